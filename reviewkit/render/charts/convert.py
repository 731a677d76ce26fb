"""Spec to SVG and SVG to PDF through vl-convert, cached by hash and versions; the Vega bundle."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import re
from pathlib import Path

from reviewkit.common.cache import cache_dir
from reviewkit.common.files import write_text_atomic

# altair 6.3 builds specs against schema v6.4.1; vl-convert 1.9 bundles Vega-Lite 6.4, so
# conversion and the interactive bundle use the same version the specs were written for.
VEGALITE_VERSION = "6.4"


# SVGs converted in this process, bounded: the disk cache holds the rest, and a site build
# of many decisions must not keep every SVG in memory.
_SVG_CACHE: dict[str, str] = {}
SVG_MEMO_ENTRIES = 256


# C0 and C1 control characters other than tab and newline: vl-convert's SVG writer panics on
# them and the panic aborts the whole process (no exception to catch), and SVG (XML) cannot
# hold most of them anyway. Found by the review-file fuzz (tests/review/test_fuzz_review.py).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def printable(obj):
    """The spec with every control character in its strings replaced by U+FFFD."""
    if isinstance(obj, str):
        return _CONTROL.sub("\ufffd", obj)
    if isinstance(obj, dict):
        return {printable(k): printable(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [printable(v) for v in obj]
    return obj


def _spec_key(spec: dict) -> str:
    canonical = json.dumps(spec, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def to_svg(spec: dict) -> str:
    """The spec as an SVG string, cached in memory and on disk by spec hash and versions.

    vl-convert is the slow step (~0.5 s to start, 0.1-0.6 s a chart) and its output is stable
    for the same spec, so re-rendering a packet whose data did not change converts nothing.
    """
    spec = printable(spec)
    key = _spec_key(spec)
    svg = _SVG_CACHE.get(key)
    if svg is not None:
        return svg
    cached = chart_cache_dir() / "svg" / f"{key}.svg"
    try:
        svg = cached.read_text(encoding="utf-8")
    except OSError:
        import vl_convert

        # Serial on purpose (see the engineering notes: threads crash V8, forks hang), and
        # no base URL is allowed so an external data reference fails instead of drawing empty.
        svg = vl_convert.vegalite_to_svg(spec, vl_version=VEGALITE_VERSION, allowed_base_urls=[])
        write_cache(cached, svg)
    if len(_SVG_CACHE) >= SVG_MEMO_ENTRIES:
        _SVG_CACHE.pop(next(iter(_SVG_CACHE)))
    _SVG_CACHE[key] = svg
    return svg


def chart_cache_dir() -> Path:
    """The charts' folder in reviewkit's cache (common/cache.py: $REVIEWKIT_CACHE_DIR first),
    per vl-convert and Vega-Lite version."""
    import vl_convert

    version = getattr(vl_convert, "__version__", "unknown")
    return cache_dir() / f"vlc{version}-vl{VEGALITE_VERSION}"


def svg_to_pdf(svg: str) -> bytes:
    """One chart's SVG as a one-page vector PDF (its text stays text), cached on disk by the
    SVG's hash. The packet's PDF lays these over the boxes WeasyPrint keeps for the charts:
    drawing the SVGs through WeasyPrint took about half of the PDF's time (docs/benchmarks.md)."""
    key = hashlib.sha256(svg.encode("utf-8")).hexdigest()
    cached = chart_cache_dir() / "pdf" / f"{key}.pdf"
    try:
        return cached.read_bytes()
    except OSError:
        import vl_convert

        pdf = vl_convert.svg_to_pdf(svg)
        write_cache(cached, pdf)
        return pdf


def write_cache(path: Path, text: str | bytes) -> None:
    """Write atomically; a read-only home still renders, just without the cache."""
    with contextlib.suppress(OSError):
        write_text_atomic(path, text)


@functools.cache
def javascript_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script defining window.vegaEmbed.

    Bundling takes ~1.4 s and depends only on the versions, so it is cached on disk too.
    """
    import vl_convert

    cached = chart_cache_dir() / "vega-bundle.js"
    try:
        return cached.read_text(encoding="utf-8")
    except OSError:
        pass
    bundle = vl_convert.javascript_bundle(vl_version=VEGALITE_VERSION)
    write_cache(cached, bundle)
    return bundle
