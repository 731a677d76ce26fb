"""Review-file markdown to sanitised HTML: a fixed tag set, no raw HTML, no off-machine links."""

from __future__ import annotations

MARKDOWN_TAGS = {
    "p",
    "br",
    "hr",
    "em",
    "strong",
    "code",
    "pre",
    "blockquote",
    "ul",
    "ol",
    "li",
    "a",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "thead",
    "tbody",
    "tr",
    "th",
    "td",
    "del",
    "sup",
    "sub",
}


def markdown_html(text: str) -> str:
    """Markdown to HTML with no raw HTML, no script, and no URL that leaves the machine.

    Raw HTML in the input is dropped by the sanitiser (ammonia via nh3); links keep only
    relative targets, so `javascript:`, `data:` and off-machine `https:` hrefs lose their href
    and stay as text.
    """
    import markdown
    import nh3

    html = markdown.markdown(text or "", extensions=["tables", "fenced_code"])
    return nh3.clean(
        html,
        tags=MARKDOWN_TAGS,
        attributes={"a": {"href", "title"}, "th": {"align"}, "td": {"align"}},
        url_schemes=set(),
        link_rel="noopener noreferrer",
    )
