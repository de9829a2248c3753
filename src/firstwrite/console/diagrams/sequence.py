"""A scenario's run as a sequence diagram, drawn from what its stage recorded (any scenario).

Lifelines, left to right: the actors in order of appearance ("the stage" for what happens
outside any), then one per table (and region), ``DynamoDB Streams``, ``DynamoDB``. Rows, in
the order recorded:

* each step's title, numbered as the list below the diagram numbers it;
* one arrow per DynamoDB call (:class:`~firstwrite.console.scenarios.stage.Exchange`), from its actor to its
  target: the operation and its condition above, the answer below (status, error code, the
  record that came back with a failed condition, a cancellation's reasons, a throttle's
  reason), the whole answer in the arrow's ``<title>``;
* a backoff sleep on its actor's lifeline; a stage change across the diagram, a clock jump
  drawn as one; an outcome the scenario noted, beside its actor;
* after each step, each watched record's state on its table's lifeline, a lease that is over
  and a record past its retention marked;
* the verdict's checks: under the step that proves each (``Stage.check(shown_by=step)``), the
  others at the end.

Logs stay in the list below. Calls are ``<g class="call">``, steps ``<g class="seq-step">``.
"""

from __future__ import annotations

import textwrap
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from ..scenarios.stage import Check, Exchange, Note, Outcome, Snapshot, Step
from . import svg
from .labels import (
    DYNAMODB,
    actor_of,
    answer_label,
    is_clock_jump,
    operation_label,
    outcome_class,
    snapshot_words,
    target_of,
)

MARGIN = 16.0
GUTTER = 430.0  # between the last actor and the first target: where the arrows' labels go
TARGET_COLUMN = 180.0
RIGHT = 200.0  # after the last target: half a record box
UPRIGHT_CHARS = 40  # an actor's name standing upright, shortened beyond
LABEL_CHARS = 68  # an arrow's label, shortened beyond (the <title> has it whole)
# The height of each kind of row.
ROW_STEP = 34
ROW_CALL = 40
ROW_SLEEP = ROW_NOTE = 22
ROW_BAND = 26
ROW_RECORD = 44
ROW_CHECK = 20


@dataclass
class _Lanes:
    actors: list[str] = field(default_factory=list)
    targets: list[str] = field(default_factory=list)
    x: dict[str, float] = field(default_factory=dict)
    column: float = 116.0
    header: float = 56.0
    header_lines: dict[str, list[str]] = field(default_factory=dict)
    upright: bool = False  # many actors: their names stand upright over narrow columns
    width: float = 0.0
    regional: bool = False  # the run used several regions: tables are told apart by region

    def at(self, name: str) -> float:
        return self.x.get(name, self.x[self.targets[-1]] if self.targets else MARGIN)


def _lanes(outcome: Outcome) -> _Lanes:
    regions = {
        e.region for s in outcome.steps for e in s.events if isinstance(e, Exchange) and e.region
    }
    regional = len(regions) > 1
    lanes = _Lanes(regional=regional)
    for step in outcome.steps:
        for event in step.events:
            if isinstance(event, Exchange):
                actor, target = actor_of(event.actor), target_of(event, regional)
                if target not in lanes.targets:
                    lanes.targets.append(target)
            elif event.kind in ("sleep", "outcome") and event.actor:
                actor = event.actor
            else:
                continue
            if actor not in lanes.actors:
                lanes.actors.append(actor)
        for shot in step.snapshots:
            name = shot.table or DYNAMODB
            name = f"{name} ({shot.region})" if regional and shot.region else name
            if name not in lanes.targets:
                lanes.targets.append(name)
    if not lanes.targets:
        lanes.targets.append(DYNAMODB)
    lanes.column = max(60.0, min(130.0, 900.0 / max(len(lanes.actors), 1)))
    lanes.upright = lanes.column < 100
    for name in lanes.targets:
        lanes.header_lines[name] = textwrap.wrap(name, 26, max_lines=3, placeholder="…")
    for name in lanes.actors:
        upright = [svg.clean(name, UPRIGHT_CHARS)] if lanes.upright else []
        lanes.header_lines[name] = (
            upright
            or textwrap.wrap(name, int(lanes.column / 7.5), max_lines=3, placeholder="…")
            or [name]
        )
    most = max(len(v) for v in lanes.header_lines.values())
    lanes.header = 24.0 + 14.0 * most
    if lanes.upright:
        longest = max(len(v[0]) for k, v in lanes.header_lines.items() if k in lanes.actors)
        lanes.header = max(lanes.header, 24.0 + 6.8 * longest)
    for i, name in enumerate(lanes.actors):
        lanes.x[name] = MARGIN + lanes.column * (i + 0.5)
    first = MARGIN + lanes.column * len(lanes.actors) + GUTTER
    for i, name in enumerate(lanes.targets):
        lanes.x[name] = first + TARGET_COLUMN * i
    lanes.width = first + TARGET_COLUMN * (len(lanes.targets) - 1) + RIGHT
    return lanes


class _Drawing:
    """The rows of one diagram, appended top to bottom."""

    def __init__(self, outcome: Outcome, lanes: _Lanes, body: ET.Element) -> None:
        self.outcome = outcome
        self.lanes = lanes
        self.body = body
        self.y = lanes.header + 8.0
        self.calls = 0
        self.regional = lanes.regional
        self.label_right = lanes.x[lanes.targets[0]] - 10.0

    def chars(self, width: float) -> int:
        """How many characters of ``width`` px fit across the diagram."""
        return max(int((self.lanes.width - 2 * MARGIN) / width), 40)

    def step(self, number: int, step: Step, checks: list[Check]) -> None:
        group = svg.add(self.body, "g", class_="seq-step", data_step=number)
        svg.add(group, "title", f"Step {number}: {step.title}. {step.narrative}")
        svg.add(group, "rect", class_="step-band", x=0, y=self.y, width=self.lanes.width, height=24)
        svg.add(
            group,
            "text",
            f"{number}. {svg.clean(step.title, 110)}",
            class_="step-title",
            x=MARGIN,
            y=self.y + 16.5,
        )
        self.y += ROW_STEP
        for event in step.events:
            if isinstance(event, Exchange):
                self.call(group, event)
            elif event.kind == "sleep":
                self.sleep(group, event)
            elif event.kind == "stage":
                self.band(group, event)
            elif event.kind == "outcome":
                self.note(group, event)
        for shot in step.snapshots:
            self.snapshot(group, shot, step.at)
        for check in checks:
            self.check(group, check)

    def call(self, parent: ET.Element, exchange: Exchange) -> None:
        self.calls += 1
        actor = actor_of(exchange.actor)
        target = target_of(exchange, self.regional)
        x1, x2 = self.lanes.at(actor), self.lanes.at(target)
        kind = outcome_class(exchange)
        group = svg.add(
            parent,
            "g",
            class_=f"call {kind}",
            data_seq=self.calls,
            data_operation=exchange.operation,
            data_status=exchange.status,
            data_code=exchange.code or "",
        )
        svg.add(
            group,
            "title",
            f"Call {self.calls}: {actor} → {target}: {exchange.operation} → {exchange.summary}",
        )
        line_y = self.y + 18
        right = self.label_right if x2 > self.label_right else x2 - 10
        svg.add(
            group,
            "text",
            svg.clean(operation_label(exchange), LABEL_CHARS),
            class_="op",
            x=right,
            y=line_y - 5,
            text_anchor="end",
        )
        svg.add(group, "line", class_="arrow", x1=x1, y1=line_y, x2=x2 - 6, y2=line_y)
        svg.add(group, "circle", class_="arrow-tail", cx=x1, cy=line_y, r=3)
        svg.add(group, "path", class_="arrow-head", d=f"M{x2:.1f},{line_y:.1f} l-9,-4.5 v9 z")
        svg.add(
            group,
            "text",
            "← " + svg.clean(answer_label(exchange), LABEL_CHARS),
            class_="answer",
            x=right,
            y=line_y + 14,
            text_anchor="end",
        )
        self.y += ROW_CALL

    def sleep(self, parent: ET.Element, note: Note) -> None:
        x = self.lanes.at(actor_of(note.actor))
        group = svg.add(parent, "g", class_="sleep")
        svg.add(group, "title", f"{actor_of(note.actor)}: {note.text}")
        svg.add(group, "rect", class_="sleep-bar", x=x - 4, y=self.y + 2, width=8, height=16, rx=2)
        svg.add(group, "text", svg.clean(note.text, 40), x=x + 8, y=self.y + 14)
        self.y += ROW_SLEEP

    def band(self, parent: ET.Element, note: Note) -> None:
        jump = is_clock_jump(note)
        group = svg.add(parent, "g", class_="clock-jump" if jump else "stage-change")
        svg.add(group, "title", f"{note.text}. {note.code}".strip(" ."))
        mid = self.y + ROW_BAND / 2
        label = ("» " if jump else "▸ ") + svg.clean(note.text, 120)
        svg.add(group, "text", label, class_="band-text", x=MARGIN + 4, y=mid + 4)
        start = min(MARGIN + 12 + 6.6 * len(label), self.lanes.width - MARGIN)
        end = self.lanes.width - MARGIN
        svg.add(group, "line", class_="band-line", x1=start, y1=mid, x2=end, y2=mid)
        self.y += ROW_BAND

    def note(self, parent: ET.Element, note: Note) -> None:
        x = self.lanes.at(actor_of(note.actor)) if note.actor else MARGIN
        group = svg.add(parent, "g", class_="outcome-note")
        svg.add(group, "title", f"{actor_of(note.actor)}: {note.text}")
        svg.add(group, "text", "✎ " + svg.clean(note.text, 110), x=x + 6, y=self.y + 15)
        self.y += ROW_NOTE

    def snapshot(self, parent: ET.Element, shot: Snapshot, at: float) -> None:
        name = shot.table or DYNAMODB
        if self.regional and shot.region:
            name = f"{name} ({shot.region})"
        x = self.lanes.at(name)
        words = snapshot_words(shot, at)
        kind = shot.record.kind if shot.record is not None else "item"
        group = svg.add(parent, "g", class_=f"record record-{kind}")
        svg.add(
            group,
            "title",
            f"{shot.label} ({shot.key}) after this step, {self.outcome.when(at)}: {words}",
        )
        svg.add(
            group,
            "rect",
            class_="record-box",
            x=x - 190,
            y=self.y + 3,
            width=380,
            height=ROW_RECORD - 6,
            rx=4,
        )
        svg.add(
            group,
            "text",
            svg.clean(f"{shot.label} · {self.outcome.when(at)}", 60),
            class_="record-label",
            x=x - 182,
            y=self.y + 18,
        )
        svg.add(
            group, "text", svg.clean(words, 60), class_="record-state", x=x - 182, y=self.y + 33
        )
        self.y += ROW_RECORD

    def check(self, parent: ET.Element, check: Check) -> None:
        group = svg.add(parent, "g", class_="check " + ("passed" if check.passed else "failed"))
        mark = "✓" if check.passed else "✗"
        svg.add(
            group,
            "text",
            f"{mark} " + svg.clean(check.text, self.chars(6.6)),
            x=MARGIN + 4,
            y=self.y + 14,
        )
        self.y += ROW_CHECK


def scenario_svg(outcome: Outcome, *, number: int | None = None) -> ET.Element:
    """The run ``outcome`` as an ``<svg>`` element (see the module docstring)."""
    lanes = _lanes(outcome)
    pinned: dict[int, list[Check]] = {}
    loose: list[Check] = []
    for check in outcome.checks:
        if check.step is not None and 0 <= check.step < len(outcome.steps):
            pinned.setdefault(check.step, []).append(check)
        else:
            loose.append(check)
    calls = [e for s in outcome.steps for e in s.events if isinstance(e, Exchange)]
    verdict = "held" if outcome.held else "did not hold"
    title = f"Scenario {number}. {outcome.title}" if number else f"Scenario {outcome.title}"
    desc = (
        f"Sequence diagram of one run: {len(outcome.steps)} steps, {len(calls)} DynamoDB calls "
        f"between {', '.join(lanes.actors) or 'nobody'} and {', '.join(lanes.targets)}. "
        f"The verdict {verdict}: {outcome.verdict}"
    )
    # Drawn into a scratch root first: the height is known only at the end.
    body = ET.Element("g", {"class": "rows"})
    drawing = _Drawing(outcome, lanes, body)
    for index, step in enumerate(outcome.steps):
        drawing.step(index + 1, step, pinned.get(index, []))
    verdict_group = svg.add(
        body, "g", class_="seq-verdict " + ("held" if outcome.held else "broken")
    )
    drawing.y += 6
    svg.add(
        verdict_group,
        "text",
        f"Verdict: {verdict}. " + svg.clean(outcome.verdict, drawing.chars(8.0) - 16),
        class_="seq-verdict-line",
        x=MARGIN,
        y=drawing.y + 16,
    )
    drawing.y += 26
    if outcome.error:
        svg.add(
            verdict_group,
            "text",
            svg.clean(outcome.error, drawing.chars(6.6)),
            class_="error-line",
            x=MARGIN,
            y=drawing.y + 14,
        )
        drawing.y += ROW_CHECK
    for check in loose:
        drawing.check(verdict_group, check)
    height = drawing.y + MARGIN
    slug = "".join(c for c in outcome.slug if c.isalnum() or c == "-") or "scenario"
    root = svg.root(
        lanes.width, height, ident=f"seq-{slug}", title=title, desc=desc, kind="sequence"
    )
    _heads(root, lanes, height)
    root.append(body)
    return root


def _heads(root: ET.Element, lanes: _Lanes, height: float) -> None:
    """The lifelines and their names at the top."""
    group = svg.add(root, "g", class_="lifelines")
    for name in [*lanes.actors, *lanes.targets]:
        x = lanes.x[name]
        kind = "target" if name in lanes.targets else "actor"
        lane = svg.add(group, "g", class_=f"lifeline {kind}")
        svg.add(lane, "title", name)
        svg.add(
            lane,
            "line",
            class_="lifeline-line",
            x1=x,
            y1=lanes.header - 6,
            x2=x,
            y2=height - MARGIN,
        )
        lines = lanes.header_lines[name]
        if kind == "actor" and lanes.upright:
            bottom = lanes.header - 10
            svg.add(
                lane,
                "text",
                lines[0],
                class_="head-text",
                x=x + 4,
                y=bottom,
                transform=f"rotate(-90 {x + 4:.1f} {bottom:.1f})",
            )
            continue
        box = (lanes.column - 8) if kind == "actor" else TARGET_COLUMN - 16
        tall = 14.0 + 14.0 * len(lines)
        top = lanes.header - 8 - tall  # the heads sit on the lifelines, whatever their height
        svg.add(lane, "rect", class_="head", x=x - box / 2, y=top, width=box, height=tall, rx=4)
        label = svg.add(lane, "text", class_="head-text", x=x, y=top + 16, text_anchor="middle")
        for i, line in enumerate(lines):
            svg.add(label, "tspan", line, x=x, dy=0 if i == 0 else 14)
