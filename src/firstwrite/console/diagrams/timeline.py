"""A race of N claims as a timeline: one lane per thread on a common time axis.

Lanes, top to bottom, in the order the threads sent their put (the thread's name and that
order on the left). On each lane: the send mark, a bar while the thread waited for its answer,
the answer mark: the winner's (one ``winner-mark``, its lane highlighted) or a loser's, from
which a line points at the item it was handed (the winner's item where the engine wrote it,
or the item stored before the race). Across all lanes: the moment the engine wrote the
winning item inside its write transaction, under its write lock, when the race watched it
(:attr:`~firstwrite.console.race.RaceResult.writes`). Times are microseconds after the threads were released.

Lane height shrinks with N (26 px for a few threads, 12 px at 128) so that 2 and 128 claims
both read at their natural size; every lane's whole story is in its ``<title>``.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections.abc import Callable

from ..race import Attempt, RaceResult
from . import svg

MARGIN = 16.0
LABELS = 150.0  # the lane names
PLOT = 720.0  # the time axis
ANSWERS = 390.0  # each lane's answer in words
AXIS = 74.0  # above the lanes: the write's label, the axis and its ticks
LEGEND = 54.0


def lane_height(n: int) -> float:
    return 26.0 if n <= 8 else 18.0 if n <= 32 else 12.0


def _nice_step(span: float, ticks: int = 6) -> float:
    raw = max(span / ticks, 1e-9)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return float(factor * power)
    return float(10 * power)


def time_words(us: float, *, in_ms: bool | None = None) -> str:
    """Microseconds as words: whole microseconds for short spans, milliseconds with one
    decimal for long ones (``in_ms``: one unit for a whole axis)."""
    if in_ms is None:
        in_ms = us >= 10_000
    return f"{us / 1000:.1f} ms" if in_ms else f"{us:.0f} µs"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def answer_words(attempt: Attempt) -> str:
    """What the thread got back, in a few words."""
    if attempt.won:
        return "200 OK: won, its item is stored"
    if attempt.item is not None:
        holder = attempt.writer_returned
        whose = f"{holder}'s item" if holder is not None else "an item without a writer"
        return f"{attempt.code} · handed {whose}"
    return f"{attempt.code}: {attempt.message}" if attempt.message else str(attempt.code)


def race_svg(result: RaceResult) -> ET.Element:
    """``result`` as an ``<svg>`` element (see the module docstring)."""
    n = len(result.attempts)
    lane = lane_height(n)
    winner = result.winner
    writes = result.writes
    latest = max([a.answered_us for a in result.attempts] + [w.at_us for w in writes] + [1.0])
    step = _nice_step(latest)
    axis_end = math.ceil(latest * 1.02 / step) * step
    left = MARGIN + LABELS
    top = MARGIN + AXIS

    def x(us: float) -> float:
        return left + max(us, 0.0) / axis_end * PLOT

    width = left + PLOT + 16 + ANSWERS
    before = 1 if result.existed is not None else 0
    height = top + lane * (n + before) + 8 + LEGEND
    lost = sum(not a.won for a in result.attempts)
    if result.existed is not None:
        story = f"the key was already taken; all {lost} attempts were handed the stored item"
    elif winner is not None:
        story = (
            f"{winner.writer} won (200 OK at {time_words(winner.answered_us)}); the other "
            f"{lost} were handed {winner.writer}'s item"
        )
    else:
        story = "first-writer-wins did not hold"
    lock_words = (
        f"; the engine wrote {writes[0].writer}'s item under its write lock at "
        f"{time_words(writes[0].at_us)}"
        if writes
        else ""
    )
    root = svg.root(
        width,
        height,
        ident="race",
        title=f"A race of {n} claims on key {svg.clean(result.key, 80)}",
        desc=(
            f"Timeline of {n} concurrent conditional PutItem calls for one key, one lane per "
            f"thread in the order they sent, on a common time axis (microseconds after the "
            f"threads were released): {story}{lock_words}. "
            f"First-writer-wins {'held' if result.held else 'did not hold'}."
        ),
        kind="timeline" + (" dense" if n > 32 else ""),
    )
    _axis(root, left, top, axis_end, step, x, height - LEGEND)

    ordered = sorted(result.attempts, key=lambda a: (a.sent, a.thread))
    lanes = svg.add(root, "g", class_="lanes")
    row_of = {a.thread: i + before for i, a in enumerate(ordered)}
    # Where the losers' lines point: the winner's item where it was written (else the
    # winner's answer), or the item stored before the race.
    target: tuple[float, float] | None = None
    if result.existed is not None:
        y = top
        stored = svg.add(lanes, "g", class_="stored-before")
        holder = (result.existed.get("writer") or {}).get("S", "(no writer)")
        svg.add(stored, "title", f"stored before the race: {holder}'s item")
        svg.add(
            stored,
            "text",
            "stored before",
            class_="lane-name",
            x=left - 8,
            y=y + lane * 0.7,
            text_anchor="end",
        )
        svg.add(
            stored, "rect", class_="item-mark", x=left - 4, y=y + lane / 2 - 4, width=8, height=8
        )
        svg.add(
            stored,
            "text",
            svg.clean(f"{holder}'s item", 60),
            class_="lane-answer",
            x=left + PLOT + 16,
            y=y + lane * 0.7,
        )
        target = (left, y + lane / 2)
    elif winner is not None:
        y = top + lane * row_of[winner.thread] + lane / 2
        at = writes[0].at_us if writes else winner.answered_us
        target = (x(at), y)

    pointers = svg.add(lanes, "g", class_="pointers")
    for attempt in ordered:
        y = top + lane * row_of[attempt.thread]
        mid = y + lane / 2
        kind = "won" if attempt.won else "lost" if attempt.item is not None else "error"
        group = svg.add(
            lanes,
            "g",
            class_=f"lane {kind}",
            data_writer=attempt.writer,
            data_result="won" if attempt.won else "lost",
        )
        svg.add(
            group,
            "title",
            f"{attempt.writer}: sent {_ordinal(attempt.sent)} at {time_words(attempt.sent_us)}, "
            f"answered {_ordinal(attempt.answered)} at {time_words(attempt.answered_us)}: "
            + answer_words(attempt),
        )
        if attempt.won:
            svg.add(
                group,
                "rect",
                class_="winner-band",
                x=MARGIN,
                y=y,
                width=width - 2 * MARGIN,
                height=lane,
            )
        svg.add(
            group,
            "text",
            f"{attempt.writer} · {_ordinal(attempt.sent)}",
            class_="lane-name",
            x=left - 8,
            y=mid + 3.5,
            text_anchor="end",
        )
        svg.add(
            group,
            "line",
            class_="wait",
            x1=x(attempt.sent_us),
            y1=mid,
            x2=x(attempt.answered_us),
            y2=mid,
        )
        svg.add(
            group, "circle", class_="send-mark", cx=x(attempt.sent_us), cy=mid, r=min(3.5, lane / 4)
        )
        size = min(7.0, lane / 2 - 1)
        ax = x(attempt.answered_us)
        if attempt.won:
            svg.add(
                group,
                "path",
                class_="winner-mark",
                d=f"M{ax:.1f},{mid - size:.1f} l{size:.1f},{size:.1f} "
                f"l{-size:.1f},{size:.1f} l{-size:.1f},{-size:.1f} z",
            )
        else:
            svg.add(
                group,
                "path",
                class_="answer-mark",
                d=f"M{ax - size / 2:.1f},{mid - size / 2:.1f} l{size:.1f},{size:.1f} "
                f"m0,{-size:.1f} l{-size:.1f},{size:.1f}",
            )
            if attempt.item is not None and target is not None:
                tx, ty = target
                svg.add(
                    pointers,
                    "path",
                    class_="points-to",
                    d=f"M{ax:.1f},{mid:.1f} C{ax - 30:.1f},{mid:.1f} "
                    f"{tx + 30:.1f},{ty:.1f} {tx:.1f},{ty:.1f}",
                )
        svg.add(
            group,
            "text",
            svg.clean(answer_words(attempt), 60),
            class_="lane-answer",
            x=left + PLOT + 16,
            y=mid + 3.5,
        )

    for write in writes:
        wx = x(write.at_us)
        mark = svg.add(root, "g", class_="lock")
        svg.add(
            mark,
            "title",
            f"the engine wrote {write.writer}'s item inside its write "
            f"transaction, under its write lock, at {time_words(write.at_us)}",
        )
        svg.add(
            mark,
            "line",
            class_="lock-line",
            x1=wx,
            y1=MARGIN + 18,
            x2=wx,
            y2=top + lane * (n + before),
        )
        svg.add(
            mark,
            "text",
            f"write lock: {write.writer}'s item written, {time_words(write.at_us)}",
            class_="lock-text",
            x=min(wx, left + PLOT - 10),
            y=MARGIN + 12,
            text_anchor="middle" if wx < left + PLOT - 150 else "end",
        )
        if winner is not None and write.writer == winner.writer:
            wy = top + lane * row_of[winner.thread] + lane / 2
            svg.add(mark, "rect", class_="item-mark", x=wx - 4, y=wy - 4, width=8, height=8)
    _legend(root, height - LEGEND + 18)
    return root


def _axis(
    root: ET.Element,
    left: float,
    top: float,
    end: float,
    step: float,
    x: Callable[[float], float],
    bottom: float,
) -> None:
    group = svg.add(root, "g", class_="axis")
    svg.add(
        group,
        "text",
        "time after the threads were released",
        class_="axis-title",
        x=left,
        y=top - 28,
    )
    svg.add(group, "line", class_="axis-line", x1=left, y1=top - 6, x2=left + PLOT, y2=top - 6)
    tick = 0.0
    while tick <= end + step / 2:
        tx = x(tick)
        svg.add(group, "line", class_="grid", x1=tx, y1=top - 10, x2=tx, y2=bottom)
        svg.add(
            group,
            "text",
            time_words(tick, in_ms=end >= 2000),
            class_="tick",
            x=tx,
            y=top - 13,
            text_anchor="middle",
        )
        tick += step


def _legend(root: ET.Element, y: float) -> None:
    group = svg.add(root, "g", class_="legend")
    x = MARGIN
    entries = [
        ("send-mark", "sent"),
        ("wait", "waiting for the answer"),
        ("winner-mark", "won: 200 OK"),
        ("answer-mark", "lost: ConditionalCheckFailedException"),
        ("points-to", "handed this item"),
        ("lock-line", "the winning write, under the engine's write lock"),
    ]
    for kind, words in entries:
        if kind == "send-mark":
            svg.add(group, "circle", class_=kind, cx=x + 6, cy=y - 4, r=3.5)
        elif kind == "winner-mark":
            svg.add(
                group, "path", class_="legend-winner", d=f"M{x + 6},{y - 10} l6,6 l-6,6 l-6,-6 z"
            )
        elif kind == "answer-mark":
            svg.add(group, "path", class_=kind, d=f"M{x + 2},{y - 8} l8,8 m0,-8 l-8,8")
        else:
            svg.add(group, "line", class_=kind, x1=x, y1=y - 4, x2=x + 14, y2=y - 4)
        svg.add(group, "text", words, class_="legend-text", x=x + 18, y=y)
        x += 18 + 6.2 * len(words) + 18
