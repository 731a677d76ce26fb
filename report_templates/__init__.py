"""Packet and site templates, CSS and scripts: package data, mapped from report_templates/."""

from pathlib import Path

# A plain folder path: jinja2 loads from it and the assets are copied from it.
FOLDER = Path(__file__).resolve().parent
