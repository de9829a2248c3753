"""The console's pictures: a scenario's run as a sequence diagram, a race as a timeline.

Both are drawn server-side as SVG from what was recorded (a scenario's steps, the race's
answers), never per scenario by hand, so a scenario added later gets its diagram for free.
:func:`scenario_markup` and :func:`race_markup` are what the pages embed (styled by the
console's ``static/diagram.css``); :func:`scenario_file` and :func:`race_file` are whole SVG
files with that stylesheet inside (light and dark schemes, print), for ``firstwrite console
export-diagram``, the docs and bug reports. No script is needed to see any of them.
"""

from __future__ import annotations

from ..race import RaceResult
from ..scenarios.stage import Outcome
from . import svg
from .sequence import scenario_svg
from .timeline import race_svg

__all__ = [
    "race_file",
    "race_markup",
    "race_svg",
    "scenario_file",
    "scenario_markup",
    "scenario_svg",
]


def scenario_markup(outcome: Outcome, number: int | None = None) -> str:
    """The run's sequence diagram as markup to embed in a page as it is: built by
    :mod:`xml.etree`, every text and attribute in it is escaped already."""
    return svg.inline(scenario_svg(outcome, number=number))


def race_markup(result: RaceResult) -> str:
    """The race's timeline as markup to embed in a page as it is (escaped, as above)."""
    return svg.inline(race_svg(result))


def scenario_file(outcome: Outcome, number: int | None = None) -> str:
    """The run's sequence diagram as an SVG file's text."""
    return svg.standalone(scenario_svg(outcome, number=number))


def race_file(result: RaceResult) -> str:
    """The race's timeline as an SVG file's text."""
    return svg.standalone(race_svg(result))
