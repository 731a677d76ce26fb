"""reviewkit's one cache folder: $REVIEWKIT_CACHE_DIR, else $XDG_CACHE_HOME/reviewkit."""

from __future__ import annotations

from reviewkit.common.cache import cache_dir
from reviewkit.render.charts.convert import chart_cache_dir


def test_the_cache_folder_follows_reviewkit_cache_dir_first(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("REVIEWKIT_CACHE_DIR", raising=False)
    assert cache_dir() == tmp_path / "xdg" / "reviewkit"
    assert chart_cache_dir().parent == tmp_path / "xdg" / "reviewkit"
    monkeypatch.setenv("REVIEWKIT_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_dir() == tmp_path / "mine"
    # the charts' SVG, PDF and spec caches live under the same folder as the device profiles
    assert chart_cache_dir().parent == tmp_path / "mine"
    assert chart_cache_dir().name.startswith("vlc")
