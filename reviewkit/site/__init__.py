"""The decisions log published as a static site."""
