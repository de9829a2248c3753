"""The docs' visible blocks alone, as a reader pastes them: ``test_pasted.py``'s machinery.

Each document's visible blocks run in order, its hidden ones (``invisible-code-block``) not at
all, so a visible block may use only what earlier visible blocks defined. Python blocks run in
one fresh interpreter per document (this virtualenv's Python, the document's working directory
and environment, nothing of tests/ importable, as ``python`` in a reader's shell), in its
``__main__`` namespace; top-level ``await`` is a SyntaxError there, as it is for a reader.
Shell and console blocks, ``save-as``, ``requires:`` and ``serve:`` work as in the full run
(``doc_harness.py``); ``serve:`` serves the child's object from the child.

The interpreter is this virtualenv's (every extra installed), not a fresh virtualenv per page
with only the extras the page names: a virtualenv with firstwrite and its extras installed
takes minutes a page on a 2-core machine, thirteen pages. So a page that imports a package
of an extra it never names is not caught here.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from doc_harness import (
    CONSOLE,
    ENV_FIXTURE,
    PYTHON,
    SHELLS,
    YAML,
    ConsoleEvaluator,
    DocEnvironment,
    SaveAs,
    ShellEvaluator,
    YamlEvaluator,
    _env,
)
from doc_requirements import Requires, Serve
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.python import pad
from sybil.parsers.markdown import CodeBlockParser, SkipParser

HERE = Path(__file__).resolve().parent
BLOCK_TIMEOUT = 300.0

#: The child's loop: requests on stdin, one JSON object a line; answers on the pipe whose fd it
#: is given. Block output
#: goes to its stdout/stderr (a log file). Runs with ``-c``, so nothing here is importable.
CHILD = r"""
import builtins, json, os, runpy, sys, traceback, types

def main(answers, app_server):
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    servers = []
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["op"] == "exec":
                code = compile(request["source"], request["filename"], "exec", dont_inherit=True)
                exec(code, module.__dict__)
                answer = {"ok": True}
            elif request["op"] == "env":
                os.environ.update(request["vars"])
                answer = {"ok": True}
            else:  # serve
                server = runpy.run_path(app_server)["AppServer"](module.__dict__[request["name"]])
                servers.append(server)
                answer = {"ok": True, "address": server.address}
        except BaseException:
            answer = {"ok": False, "error": traceback.format_exc()}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()
    for server in servers:
        server.stop()

main(os.fdopen(int(sys.argv[2]), "w"), sys.argv[1])
sys.stdout.flush()
os._exit(0)  # threads a page left running (a poller it never stopped) do not hold the exit
"""


class ChildPython:
    """One interpreter running a document's Python blocks in one namespace."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.log = log
        read, write = os.pipe()
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-u", "-c", CHILD, str(HERE / "app_server.py"), str(write)],
                cwd=cwd,
                env={k: v for k, v in env.items() if k != "PYTHONPATH"},
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                pass_fds=(write,),
            )
        os.close(write)
        self._answers = os.fdopen(read)

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(request) + "\n")
        self.process.stdin.flush()
        ready, _, _ = select.select([self._answers], [], [], BLOCK_TIMEOUT)
        line = self._answers.readline() if ready else ""
        if not line:
            state = "exited" if self.process.poll() is not None else "timed out"
            raise RuntimeError(f"the interpreter {state}; its output:\n{self.output()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def close(self) -> None:
        if self.process.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._answers.close()


class PastedEnvironment(DocEnvironment):
    """A :class:`DocEnvironment` whose Python runs in a :class:`ChildPython`."""

    child: ChildPython | None = None

    def python(self) -> ChildPython:
        if self.child is None:
            self.child = ChildPython(
                self.cwd, {**os.environ, **self.variables}, self.root / "python.log"
            )
        return self.child

    def set_variable(self, name: str, value: str) -> None:
        super().set_variable(name, value)
        if self.child is not None:
            self.child.ask({"op": "env", "vars": {name: value}})

    def serve_named(self, name: str, address: str, namespace: dict[str, Any]) -> None:
        answer = self.python().ask({"op": "serve", "name": name})
        if not answer["ok"]:
            raise RuntimeError(answer["error"])
        self.rewrite_address(address, answer["address"])

    def close(self) -> None:
        try:
            if self.child is not None:
                self.child.close()
        finally:
            super().close()


class ChildPythonEvaluator:
    """Runs a Python block in the document's :class:`ChildPython`; a failure shows the block's
    traceback (its document's lines) and what it printed."""

    def __call__(self, example: Example) -> str | None:
        env = _env(example)
        if not isinstance(env, PastedEnvironment):
            raise RuntimeError("the visible blocks run in a PastedEnvironment")
        source = env.rewrite(pad(example.parsed, example.line + example.parsed.line_offset))
        answer = env.python().ask({"op": "exec", "source": source, "filename": example.path})
        if answer["ok"]:
            return None
        return f"{answer['error']}--- output so far\n{env.python().output()}"


def _visible(parser: Callable[[Document], Iterable[Region]]) -> Callable[..., Iterable[Region]]:
    """``parser``'s regions but those of hidden blocks (``<!-- invisible-code-block ...``)."""

    def parse(document: Document) -> Iterable[Region]:
        for region in parser(document):
            if document.text[region.start : region.start + 4] != "<!--":
                yield region

    return parse


def make_pasted_sybil() -> Sybil:
    parsers: list[Callable[[Document], Iterable[Region]]] = [
        _visible(CodeBlockParser(PYTHON, ChildPythonEvaluator())),
        *(_visible(CodeBlockParser(language, ShellEvaluator())) for language in SHELLS),
        _visible(CodeBlockParser(CONSOLE, ConsoleEvaluator())),
        _visible(CodeBlockParser(YAML, YamlEvaluator())),
        SkipParser(),
        SaveAs(),
        Requires(_env),
        Serve(_env),
    ]
    return Sybil(parsers=parsers, fixtures=[ENV_FIXTURE])
