"""One check for a rendered page fed hostile input: nothing in it became markup that runs."""

from __future__ import annotations

import html5lib

URL_ATTRIBUTES = {"href", "src", "action", "formaction", "xlink:href", "data", "srcdoc",
                  "poster", "background", "cite", "ping"}  # fmt: skip


def parse_inert(html: str):
    """The parsed page, once no element has an on* handler or a javascript: URL, every script
    is a file or JSON data, and no payload's <img src=x> was created."""
    tree = html5lib.parse(html, namespaceHTMLElements=False)
    for el in tree.iter():
        for attr, value in el.attrib.items():
            assert not attr.lower().startswith("on"), (el.tag, attr)
            # a URL attribute is what a browser follows; "javascript:" as text in a meta
            # description or an alt is inert
            if attr.lower() in URL_ATTRIBUTES:
                assert not value.strip().lower().startswith("javascript:"), (el.tag, attr, value)
    assert all(s.get("src") or s.get("type") == "application/json" for s in tree.iter("script"))
    assert not [el for el in tree.iter("img") if el.get("src") == "x"]
    return tree
