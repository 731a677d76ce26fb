"""The run bundle: the versioned run.json later stages read, its migrations, atomic writes."""
