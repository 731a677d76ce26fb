"""The default rubric, layer map and platform table: package data, mapped from rubrics/ by
pyproject.toml."""

from pathlib import Path

# A plain folder path: the files are read with open(), in an editable install and a wheel alike.
FOLDER = Path(__file__).resolve().parent
