"""The packet as HTML: the jinja environment (autoescaped) and the page render."""

from __future__ import annotations

import functools
import re

from reviewkit import templates
from reviewkit.common import format as fmt
from reviewkit.render.packet.bottlenecks import class_text
from reviewkit.render.packet.sections import shown_sections

TEMPLATES = templates.FOLDER


STYLESHEETS = ("packet.css", "screen.css", "print.css")


SCRIPTS = ("packet.js", "site.js")


VEGA_BUNDLE = "vega-bundle.js"


# `reviewkit soak --out ...` in a check's summary or a rubric's clears_with: markdown's inline
# code, shown as code rather than as literal backticks
INLINE_CODE = re.compile(r"`([^`\n]+)`")


def prose(text: object):
    """Text from a check, a rubric or a file, escaped, with its `inline code` as <code>; a
    backtick left unpaired (a summary cut short) is dropped."""
    import markupsafe

    escaped = str(markupsafe.escape("" if text is None else str(text)))
    coded = INLINE_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escaped)
    return markupsafe.Markup(coded.replace("`", ""))


@functools.cache
def jinja_environment():
    """One environment per process: it compiles each template once (~75 ms a page)."""
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["pct"] = fmt.pct
    env.filters["num"] = fmt.num
    env.filters["ms"] = fmt.ms
    env.filters["ratio"] = fmt.ratio
    env.filters["ci"] = lambda ci: "" if not ci else f"[{fmt.ratio(ci[0])}, {fmt.ratio(ci[1])}]"
    env.filters["setting"] = fmt.setting
    env.filters["prose"] = prose
    env.filters["sig"] = fmt.readable  # any other number: never "2.54e-05"
    # a bottleneck class in words: "unclassified" says why in full
    env.filters["bottleneck"] = class_text
    return env


def render_html(
    model: dict,
    svgs: dict[str, str],
    mode: str,
    asset_base: str = "assets/",
    nav: dict | None = None,
) -> str:
    """mode "screen": interactive charts with the SVG fallback; "print": SVG images for PDF."""
    from markupsafe import Markup

    env = jinja_environment()
    template = env.get_template("packet.html.j2")
    # The specs embedded in the page drop "$schema": a URL off the machine that nothing needs
    # (packet.js tells vega-embed the mode); the files under assets/charts keep it.
    specs = {
        k: {f: v for f, v in spec.items() if f != "$schema"} for k, spec in model["charts"].items()
    }
    return template.render(
        m=model,
        sections=shown_sections(model),
        mode=mode,
        specs=specs,
        svgs={k: Markup(v) for k, v in svgs.items()},
        asset_base=asset_base,
        nav=nav or {},
    )
