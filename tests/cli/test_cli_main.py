"""The command as a whole: --version, --help everywhere, --json on every command that prints
data, exit codes, and one-line errors instead of tracebacks."""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
from collections.abc import Callable, Iterator
from importlib import metadata
from typing import Any

import pytest

from firstwrite.cli import build_parser
from firstwrite.cli.progress import Progress
from firstwrite.shared.command_line import ExitCode

# Commands that serve until stopped rather than print data.
SERVERS = {("engine", "serve"), ("demo",)}
# Commands that write a file rather than print data.
WRITERS = {("console", "export-diagram")}


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Any]:
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subparsers:
        yield path, parser
        return
    for name, child in subparsers[0].choices.items():
        yield from _commands(child, (*path, name))


COMMANDS = [path for path, _ in _commands(build_parser())]


def test_every_issue_command_exists() -> None:
    assert set(COMMANDS) == {
        ("demo",),
        ("engine", "serve"),
        ("table", "create"),
        ("table", "describe"),
        ("keys", "get"),
        ("keys", "list"),
        ("keys", "delete"),
        ("results", "orphans"),
        ("race",),
        ("capacity",),
        ("console", "export-diagram"),
    }


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_help_everywhere(cli: Callable[..., Any], path: tuple[str, ...]) -> None:
    result = cli(*path, "--help")
    assert result.code == 0
    assert result.out.startswith(f"usage: firstwrite {' '.join(path)}")
    # A description beyond the usage line, and every option explained.
    body = result.out.split("\n\n", 2)
    assert len(body) == 3 and len(body[1]) > 40, result.out
    if path not in SERVERS | WRITERS:
        assert "--json" in result.out


def test_top_level_help_lists_exit_codes(cli: Callable[..., Any]) -> None:
    result = cli("--help")
    assert result.code == 0
    for code in ExitCode:
        assert f"  {code.value} " in result.out


def test_version(cli: Callable[..., Any]) -> None:
    result = cli("--version")
    assert result.code == 0
    assert result.out.strip() == f"firstwrite {metadata.version('firstwrite')}"


@pytest.mark.parametrize(
    "argv",
    [[], ["engine"], ["table"], ["keys"], ["nonsense"], ["race", "--keys", "0"]],
)
def test_bad_command_lines_exit_2(cli: Callable[..., Any], argv: list[str]) -> None:
    result = cli(*argv)
    assert result.code == 2
    assert "usage: firstwrite" in result.err


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(
    cli: Callable[..., Any],
    one_line_error: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from firstwrite.cli import capacity

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(capacity.model, "plan", broken)
    result = cli("capacity", "--peak-rps", "1")
    assert result.code == 1
    assert "unexpected ZeroDivisionError: a bug" in one_line_error(result)
    with pytest.raises(ZeroDivisionError):
        build_and_run_with_debug()


def build_and_run_with_debug() -> None:
    from firstwrite.cli import main

    main(["--debug", "capacity", "--peak-rps", "1"])


def test_a_closed_stdout_stops_quietly() -> None:
    # Like `firstwrite ... | head` when head has already exited: the reader is gone before
    # the command writes (it takes far longer to start than this takes to close the pipe).
    command = [sys.executable, "-m", "firstwrite.cli", "capacity", "--peak-rps", "1", "--json"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    err = process.stderr.read()
    assert process.wait(60) == ExitCode.BROKEN_PIPE
    assert err == ""


# -- the progress bar -------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_draws_on_a_terminal_and_erases_itself() -> None:
    ticks = iter(float(n) for n in range(100))
    stream = Terminal()
    with Progress("scanning", 4, stream=stream, clock=lambda: next(ticks)) as bar:
        bar.advance()
        bar.advance()
        assert "[" + "#" * 15 + "." * 15 + "] 2/4" in stream.getvalue()
    assert stream.getvalue().endswith("\r")  # the line is blanked at the end
    last = stream.getvalue().rsplit("\r", 2)[-2]
    assert last.strip() == ""


def test_progress_without_a_total_counts() -> None:
    stream = Terminal()
    with Progress("scanning", None, stream=stream) as bar:
        bar.advance(1234)
        assert "scanning 1,234" in bar.line()


def test_progress_is_silent_off_a_terminal() -> None:
    stream = io.StringIO()
    with Progress("scanning", 10, stream=stream) as bar:
        for _ in range(10):
            bar.advance()
    assert stream.getvalue() == ""
