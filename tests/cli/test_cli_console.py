"""``firstwrite console export-diagram``: the console's pictures as standalone SVG files."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from firstwrite.console import scenarios
from firstwrite.idempotency import Idempotency

NS = "{http://www.w3.org/2000/svg}"


def _svg(text: str) -> ET.Element:
    head, _, body = text.partition("\n")
    assert head == '<?xml version="1.0" encoding="UTF-8"?>'
    root = ET.fromstring(body)
    assert root.tag == f"{NS}svg"
    style = root.find(f"{NS}style")
    assert style is not None and "prefers-color-scheme: dark" in (style.text or "")
    assert root.find(f".//{NS}script") is None
    return root


def _classes(root: ET.Element, name: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{NS}g") if name in (g.get("class") or "").split()]


def test_a_scenarios_diagram(cli: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "replay.svg"
    result = cli("console", "export-diagram", "replay", "-o", str(out))
    assert (result.code, result.out, result.err) == (0, "", "")
    root = _svg(out.read_text(encoding="utf-8"))
    title = root.find(f"{NS}title")
    assert title is not None and title.text == "Scenario 6. Replay"
    # The replay scenario's calls: claim and complete, the duplicate's one failed claim, the
    # reused key's one failed claim (plus the table's setup).
    answers = [" ".join(t.text or "" for t in g.iter(f"{NS}text")) for g in _classes(root, "call")]
    assert sum("ConditionalCheckFailedException" in a for a in answers) == 2
    assert "Verdict: held." in " ".join(t.text or "" for t in root.iter(f"{NS}text"))


def test_the_race_to_stdout(cli: Callable[..., Any]) -> None:
    result = cli("console", "export-diagram", "race", "--n", "5", "-o", "-")
    assert result.code == 0, result.err
    root = _svg(result.out)
    lanes = _classes(root, "lane")
    assert len(lanes) == 5
    assert [g.get("data-result") for g in lanes].count("won") == 1
    assert len([p for p in root.iter(f"{NS}path") if p.get("class") == "winner-mark"]) == 1
    assert len(_classes(root, "lock")) == 1


def test_bad_names_and_paths_are_one_line_errors(cli: Callable[..., Any], tmp_path: Path) -> None:
    unknown = cli("console", "export-diagram", "no-such", "-o", str(tmp_path / "x.svg"))
    assert unknown.code == 2
    assert unknown.err.startswith("firstwrite: there is no scenario 'no-such'; there are ")
    assert "lease-takeover" in unknown.err and unknown.err.rstrip().endswith("race")
    assert not (tmp_path / "x.svg").exists()
    unwritable = cli("console", "export-diagram", "replay", "-o", str(tmp_path / "no" / "x.svg"))
    assert unwritable.code == 1
    assert unwritable.err.startswith(f"firstwrite: cannot write {tmp_path / 'no' / 'x.svg'}: ")
    too_many = cli("console", "export-diagram", "race", "--n", "129", "-o", "-")
    assert too_many.code == 2 and "must be between 2 and 128, not 129" in too_many.err


def test_a_run_that_did_not_hold_is_written_and_exits_3(
    cli: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def naive_run(self: Idempotency, key: str, fn: Callable[[], Any], **_: Any) -> Any:
        return fn()  # what a service without the layer does

    monkeypatch.setattr(Idempotency, "run", naive_run)
    out = tmp_path / "replay.svg"
    result = cli("console", "export-diagram", "replay", "-o", str(out))
    assert result.code == 3
    assert result.err.startswith("firstwrite: the scenario did not hold: ")
    assert f"(the diagram is in {out})" in result.err
    root = _svg(out.read_text(encoding="utf-8"))
    assert "Verdict: did not hold." in " ".join(t.text or "" for t in root.iter(f"{NS}text"))
    assert scenarios.by_slug("replay") is not None
