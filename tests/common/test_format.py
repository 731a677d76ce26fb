"""The shared formatters, against hand-worked strings."""

from reviewkit.common.format import MISSING, ms, num, pct, points, ratio


def test_percent_ratio_number_and_milliseconds():
    assert pct(0.41234) == "41.2%" and pct(0.41234, 2) == "41.23%" and pct(1) == "100.0%"
    assert ratio(0.31234) == "0.312" and ratio(2) == "2.000"
    assert num(1234.5) == "1.23e+03" and num(0.012345, 2) == "0.012"
    assert ms(12.345) == "12.3" and ms(999.4) == "999" and ms(12345.6) == "12,346"


def test_one_marker_for_missing_everywhere():
    assert {pct(None), ratio(None), num(None), ms(None)} == {MISSING} == {"—"}


def test_binary_size_whole_where_exact():
    from reviewkit.common.format import binary_size

    assert binary_size(32 * 1024) == "32 KiB"
    assert binary_size(3 * 512 * 1024) == "1.5 MiB"  # 1572864 bytes
    assert binary_size(32 << 20) == "32 MiB"
    assert binary_size(1000 * 1024) == "1000 KiB"  # not "1e+03 KiB"
    assert binary_size(2 << 30) == "2 GiB"
    assert binary_size(512) == "512 B"


def test_points_by_hand():
    # 0.352 of a fraction is 35.2 percentage points; the interval's ends likewise.
    assert points(0.352, (0.21, 0.5)) == "+35.2 pt [+21.0, +50.0]"
    assert points(-0.0833) == "-8.3 pt"
    assert points(None) == MISSING


def test_elided_keeps_short_text_and_cuts_long_text_to_its_limit():
    from reviewkit.common.format import elided

    assert elided("abc", 3) == "abc"
    assert elided("abcdef", 4) == "abc…" and len(elided("x" * 2000, 90)) == 90
