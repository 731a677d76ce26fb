"""The one set of number formatters for terminal, gate messages and packet: percent, ratio, ms,
sizes."""

from __future__ import annotations

import math

# One marker for a value that was not measured or does not apply, everywhere it is printed.
MISSING = "—"


def pct(x: float | None, digits: int = 1) -> str:
    """A fraction as a percentage: 0.4123 -> "41.2%"."""
    return MISSING if x is None else f"{100 * x:.{digits}f}%"


def change(x: float | None, digits: int = 1) -> str:
    """A relative change with its sign: 0.0234 -> "+2.3%", -0.1 -> "-10.0%"."""
    return MISSING if x is None else f"{100 * x:+.{digits}f}%"


def change_ci(ci: tuple[float, float] | None) -> str:
    """The interval of a relative change: (-0.02, 0.031) -> "-2.0% .. +3.1%"."""
    return "no interval" if ci is None else f"{change(ci[0])} .. {change(ci[1])}"


def points(delta: float | None, ci: tuple[float, float] | None = None) -> str:
    """A change of a fraction in percentage points, with its interval when there is one:
    (0.352, (0.21, 0.5)) -> "+35.2 pt [+21.0, +50.0]"."""
    if delta is None:
        return MISSING
    return f"{100 * delta:+.1f} pt" + (f" [{100 * ci[0]:+.1f}, {100 * ci[1]:+.1f}]" if ci else "")


def num(x: float | None, digits: int = 3) -> str:
    """A number to `digits` significant figures."""
    return MISSING if x is None else f"{x:.{digits}g}"


# Under this a ratio is given to two significant figures, not three decimals: a 100x speed-up's
# interval [0.00041, 0.00099] printed as "[0.000, 0.001]" says nothing.
SMALL_RATIO = 0.1


def ratio(x: float | None) -> str:
    """A candidate/baseline ratio to three decimals, or two significant figures under 0.1:
    0.31234 -> "0.312", 0.011666 -> "0.012", 0.00068 -> "0.00068"."""
    if x is None:
        return MISSING
    if 0 < abs(x) < SMALL_RATIO:
        return f"{x:#.2g}"
    return f"{x:.3f}"


def setting(value: object) -> str:
    """A knob or environment value as a reader writes it, never a Python repr: a list as
    "fp32, bf16" (none when empty), a bool as true/false, a table as "k=v, ...", None as —."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return ", ".join(setting(v) for v in value) or "none"
    if isinstance(value, dict):
        return ", ".join(f"{k}={setting(v)}" for k, v in value.items()) or "none"
    return str(value)


def ms(x_ms: float | None) -> str:
    """Milliseconds to three significant figures, whole with separators from 1,000 up."""
    if x_ms is None:
        return MISSING
    return f"{x_ms:.3g}" if x_ms < 1000 else f"{x_ms:,.0f}"


def binary_size(nbytes: int) -> str:
    """Bytes in binary units, whole where exact: 32768 -> "32 KiB", 1572864 -> "1.5 MiB"."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            value = nbytes / (1 << shift)
            return f"{value:.0f} {unit}" if value == round(value) else f"{value:.3g} {unit}"
    return f"{nbytes} B"


SHOWN_CHARS = 80  # an input value quoted in a message: enough to recognise it, never a page


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """repr() of an input value for a one-line message, cut to `limit` characters with the
    length said: a 10,000-character field must not become a 10,000-character error."""
    text = repr(value)
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(str(value)):,} characters)"


def elided(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, the last an ellipsis: a C++ kernel name of thousands of
    characters must not fill a page or a terminal."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


SCI_BELOW = 1e-4  # 0.0000254 makes the reader count zeros: smaller as 2.54 x 10^-5


SCI_FROM = 1e15  # past a thousand trillion the digits stop being readable as a count


_SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


TIMES = "\u00d7"  # the multiplication sign


def readable(x: float, digits: int = 4) -> str:
    """`digits` significant digits, written out with thousands separators (12,350, 0.0736):
    never Python's exponent form ("1.235e+04", "2.54e-05"), which is no way to print a number
    for a reader. Magnitudes below SCI_BELOW or from SCI_FROM as 2.54 x 10^-5, with the
    multiplication sign and superscripts (DejaVu Sans has both)."""
    x = float(x)
    if not math.isfinite(x):
        return MISSING
    if x == 0:
        return "0"
    rounded = float(f"{x:.{digits}g}")
    exponent = math.floor(math.log10(abs(rounded)))
    if abs(rounded) < SCI_BELOW or abs(rounded) >= SCI_FROM:
        mantissa = f"{rounded / 10.0**exponent:.{digits - 1}f}".rstrip("0").rstrip(".")
        return f"{mantissa}{TIMES}10{str(exponent).translate(_SUPERSCRIPT)}"
    text = f"{rounded:,.{max(0, digits - 1 - exponent)}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text
