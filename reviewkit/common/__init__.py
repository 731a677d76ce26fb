"""Shared ground for every stage: the exception hierarchy, file hashing, TOML reading."""
