"""What every command of the CLI shares: argument types and output helpers.

Exit codes and the
one-line error are :mod:`firstwrite.shared.command_line`, which the demo shares too)."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from firstwrite.shared.command_line import integer

# -- argument types -------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    value = integer(text, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def non_negative_int(text: str) -> int:
    value = integer(text, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def non_negative(text: str) -> float:
    value = _float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def positive(text: str) -> float:
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {text!r}")
    return value


def fraction(text: str) -> float:
    """A share: ``0.15`` or ``15%``."""
    percent = text.endswith("%")
    value = _float(text[:-1] if percent else text) / (100 if percent else 1)
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"must be within 0..1 (or 0%..100%): {text!r}")
    return value


def ratio(text: str) -> float:
    """A ratio that may exceed 1 (``0.15``, ``15%``, ``2``)."""
    percent = text.endswith("%")
    value = _float(text[:-1] if percent else text) / (100 if percent else 1)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be >= 0: {text!r}")
    return value


def _float(text: str) -> float:
    try:
        value = float(text.replace("_", "").replace(",", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if math.isnan(value) or math.isinf(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="print the result as JSON on stdout (for scripts)"
    )


# -- output ---------------------------------------------------------------------------------------


def print_json(value: Any, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    json.dump(value, out, indent=2, sort_keys=False, ensure_ascii=False, default=str)
    out.write("\n")


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    align: str = "",
    indent: str = "",
) -> str:
    """A plain-text table; ``align`` holds ``<`` or ``>`` per column (default: left)."""
    cells = [[str(c) for c in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = []
    for row in cells:
        parts = []
        for i, cell in enumerate(row):
            right = i < len(align) and align[i] == ">"
            parts.append(cell.rjust(widths[i]) if right else cell.ljust(widths[i]))
        lines.append((indent + "  ".join(parts)).rstrip())
    return "\n".join(lines)


def fields(pairs: Sequence[tuple[str, Any]], indent: str = "") -> str:
    """``name  value`` lines with the names aligned."""
    width = max((len(name) for name, _ in pairs), default=0)
    return "\n".join(f"{indent}{name.ljust(width)}  {value}" for name, value in pairs)


def number(value: float, decimals: int = 0) -> str:
    """``2300`` -> ``2,300``; whole values without decimals."""
    if decimals == 0 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:,.{decimals}f}"


def duration(seconds: float) -> str:
    """A short human duration: ``45s``, ``12m05s``, ``3h20m``, ``2d04h``."""
    seconds = abs(seconds)
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours:02d}h"


def size(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")
