"""The reviewkit command line: one module per command group, terminal tables, the demo."""
