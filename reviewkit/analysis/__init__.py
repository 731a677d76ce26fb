"""Numbers from run bundles: roofline fractions, statistics, comparisons, platforms side by side."""
