"""Evidence a review cites besides runs (quality, sweep, soak, traces): reading and judging."""
