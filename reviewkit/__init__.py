"""reviewkit: turn MFU and memory-stall fractions of a fixed torch suite into rollout decisions."""

__version__ = "0.1.0"
