"""The review packet: gather the report into one view model, then render HTML and PDF."""

from reviewkit.render.packet.fit import NO_TRACE
from reviewkit.render.packet.html import TEMPLATES, render_html
from reviewkit.render.packet.labels import PACKET_SCHEMA_VERSION, PacketError
from reviewkit.render.packet.markdown import markdown_html
from reviewkit.render.packet.model import build_model
from reviewkit.render.packet.write import (
    PacketResult,
    PdfNotProduced,
    Rendered,
    render_into,
    write_packet,
    write_shared_assets,
)

__all__ = [
    "NO_TRACE",
    "PACKET_SCHEMA_VERSION",
    "TEMPLATES",
    "PacketError",
    "PacketResult",
    "PdfNotProduced",
    "Rendered",
    "build_model",
    "markdown_html",
    "render_html",
    "render_into",
    "write_packet",
    "write_shared_assets",
]
