"""One check for a rendered page fed hostile input: nothing in it became markup that runs."""

from __future__ import annotations

import html5lib


def parse_inert(html: str):
    """The parsed page, once no element has an on* handler or a javascript: URL, every script
    is a file or JSON data, and no payload's <img src=x> was created."""
    tree = html5lib.parse(html, namespaceHTMLElements=False)
    for el in tree.iter():
        for attr, value in el.attrib.items():
            assert not attr.lower().startswith("on"), (el.tag, attr)
            assert "javascript:" not in value.lower()
    assert all(s.get("src") or s.get("type") == "application/json" for s in tree.iter("script"))
    assert not [el for el in tree.iter("img") if el.get("src") == "x"]
    return tree
