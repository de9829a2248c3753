"""The machinery behind tests/docs: Sybil parsers, evaluators and the per-document environment.

The convention it implements is documented in ``conftest.py`` beside it. This module is kept
importable on its own so that ``test_doc_harness.py`` can run it over synthetic Markdown files
(with ``pytester``) and show that a broken block fails, with its file and line.
"""

from __future__ import annotations

import ast
import asyncio
import doctest
import inspect
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from app_server import AppServer
from doc_requirements import Requires, Serve, tools_in
from sybil import Document, Example, Region, Sybil
from sybil.evaluators.python import pad
from sybil.integration.pytest import SybilFile, SybilItem
from sybil.parsers.markdown import CodeBlockParser, PythonCodeBlockParser, SkipParser
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer

from engine_process import start_server
from tools import need_tools

REPO = Path(__file__).resolve().parents[2]
ENV_FIXTURE = "doc_env"

PYTHON = "python"
SHELLS = ("sh", "bash", "shell")
CONSOLE = "console"
YAML = "yaml"  # parsed, and linted with cfn-lint when it is CloudFormation
RUN = (PYTHON, *SHELLS, CONSOLE, YAML)
#: Fenced blocks in these languages are illustrations, not code: diagrams, trees, payloads.
ILLUSTRATIONS = ("", "text", "mermaid", "json", "http", "toml", "ini")

#: The address the docs use for a local server (``make run``'s default); rewritten to the
#: document's real server in every block that runs.
DOC_ADDRESS = re.compile(r"\b(?:localhost|127\.0\.0\.1):8000\b")

BLOCK_TIMEOUT = 300.0

#: Commands a shell block may show but the harness must not run as written, each with what is
#: run instead. ``make run`` serves until stopped and ``make test`` is this very suite: both are
#: dry-run (``make -n``: the targets and their recipes exist) here, and run for real from a
#: fresh clone by ``tests/test_install.py``. ``firstwrite engine serve`` (without ``--help``)
#: serves until stopped: the document's own server, already listening at the rewritten
#: address, stands in for it.
_MAKE = re.compile(r"^make(?P<args>(?:\s+[\w.=/:-]+)+)\s*(?:#.*)?$")
_SERVE = re.compile(r"^firstwrite\s+engine\s+serve\b(?!.*(?:\s-h\b|--help))")


def _address(text: str) -> re.Pattern[str]:
    """``host:port`` as the docs may write it (``localhost`` or ``127.0.0.1``)."""
    host, _, port = text.rpartition(":")
    if host not in ("localhost", "127.0.0.1") or not port.isdigit():
        raise ValueError(f"expected localhost:PORT or 127.0.0.1:PORT, got {text!r}")
    return re.compile(rf"\b(?:localhost|127\.0\.0\.1):{port}\b")


class DocEnvironment:
    """Where one document's blocks run: a working directory, a local database file, a served
    engine, and the environment a developer would have after ``make run`` and pointing the AWS
    SDKs at it (``AWS_ENDPOINT_URL``, dummy credentials, ``us-east-1``, no ~/.aws files)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cwd = root / "cwd"
        self.cwd.mkdir(parents=True, exist_ok=True)
        self.local_db = root / "local.db"
        self.server = start_server(root / "server.db", log_path=root / "server.log")
        self.server_address = self.server.url.removeprefix("http://")
        self._runner: asyncio.Runner | None = None
        self.namespace: dict[str, Any] = {}  # the document's, set by its first item
        self.apps: list[tuple[re.Pattern[str], AppServer]] = []
        self.rewrites: list[tuple[re.Pattern[str], str]] = []
        self.cleanups: list[Callable[[], None]] = []
        bin_dir = os.path.dirname(sys.executable)
        self.variables = {
            "FIRSTWRITE_LOCAL_DB": str(self.local_db),
            "AWS_ENDPOINT_URL": self.server.url,
            "AWS_ACCESS_KEY_ID": "local",
            "AWS_SECRET_ACCESS_KEY": "local",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "AWS_CONFIG_FILE": str(root / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(root / "no-aws-credentials"),
            "AWS_EC2_METADATA_DISABLED": "true",
            "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""),
        }

    def rewrite(self, source: str) -> str:
        source = DOC_ADDRESS.sub(self.server_address, source)
        for pattern, app in self.apps:
            source = pattern.sub(app.address, source)
        for pattern, real in self.rewrites:
            source = pattern.sub(real, source)
        return source

    def rewrite_address(self, shown: str, real: str) -> None:
        """``shown`` (``localhost:PORT`` as the text writes it) becomes ``real`` in every
        later block."""
        self.rewrites.append((_address(shown), real))

    def set_variable(self, name: str, value: str) -> None:
        """An environment variable for every later block (and this process, for Python)."""
        self.variables[name] = value
        previous = os.environ.get(name)
        os.environ[name] = value
        self.on_close(
            lambda: (
                os.environ.pop(name, None)
                if previous is None
                else os.environ.__setitem__(name, previous)
            )
        )

    def on_close(self, cleanup: Callable[[], None]) -> None:
        """Run ``cleanup`` when the document ends (last registered, first run)."""
        self.cleanups.append(cleanup)

    def serve(self, app: Any, address: str) -> str:
        """Serve an ASGI or WSGI ``app`` for the rest of the document: ``address``
        (``localhost:8080`` as the text writes it) is rewritten to it in every later block.
        Returns the app's real URL."""
        server = AppServer(app)
        self.apps.append((_address(address), server))
        return server.url

    def serve_named(self, name: str, address: str, namespace: dict[str, Any]) -> None:
        """The ``serve:`` directive: serve the blocks' ``name`` at ``address`` (rewritten)."""
        self.serve(namespace[name], address)

    def run_coroutine(self, coroutine: Any) -> Any:
        """Top-level ``await`` runs on one event loop per document, as in ``python -m asyncio``."""
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coroutine)

    def close(self) -> None:
        from firstwrite.engine import Engine

        # Engines a document left open: stop their TTL sweepers while the cwd is still theirs.
        for value in self.namespace.values():
            if isinstance(value, Engine):
                value.close()
        for _, app in self.apps:
            app.stop()
        if self._runner is not None:
            self._runner.close()
        for cleanup in reversed(self.cleanups):
            cleanup()
        self.server.stop()


@pytest.fixture(scope="module")
def doc_env(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[DocEnvironment]:
    """One environment per document (a document is a pytest module here), of the kind its
    suite says (:attr:`DocumentSuite.environment`)."""
    suite = request.node.getparent(DocumentSuite)
    kind = suite.environment if suite is not None else DocEnvironment
    env = kind(tmp_path_factory.mktemp("doc"))
    # A block may set os.environ or sys.path as a reader's script does (docs/http.md sets
    # DJANGO_SETTINGS_MODULE): the document's changes end with it, not in later tests.
    environ, path = dict(os.environ), list(sys.path)
    with pytest.MonkeyPatch.context() as patch:
        try:
            for name, value in env.variables.items():
                patch.setenv(name, value)
            patch.chdir(env.cwd)
            yield env
        finally:
            env.close()
            os.environ.clear()
            os.environ.update(environ)
            sys.path[:] = path


def _env(example: Example) -> DocEnvironment:
    env = example.namespace.get(ENV_FIXTURE)
    if not isinstance(env, DocEnvironment):
        raise RuntimeError(f"the {ENV_FIXTURE!r} fixture is missing: collect with DocumentSuite")
    return env


class PythonEvaluator:
    """Runs a Python block in the document's namespace (top-level ``await`` allowed)."""

    def __call__(self, example: Example) -> None:
        __tracebackhide__ = True
        env = _env(example)
        source = env.rewrite(pad(example.parsed, example.line + example.parsed.line_offset))
        code = compile(
            source,
            example.path,
            "exec",
            flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT,
            dont_inherit=True,
        )
        try:
            if code.co_flags & inspect.CO_COROUTINE:
                env.run_coroutine(eval(code, example.namespace))
            else:
                exec(code, example.namespace)
        finally:
            example.namespace.pop("__builtins__", None)


def _logical_lines(source: str) -> list[str]:
    """Shell source joined at backslash-newline continuations."""
    return source.replace("\\\n", " ").splitlines()


def translate(command: str) -> str:
    """The command the harness runs for one logical line of a shell block."""
    stripped = command.strip()
    make = _MAKE.match(stripped)
    if make is not None:
        targets = make.group("args").split()
        return f"make -n -C {shlex.quote(str(REPO))} {shlex.join(targets)} >/dev/null"
    if _SERVE.match(stripped):
        return "true  # the document's own server stands in"
    return command


def _run_bash(script: str, env: DocEnvironment) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + script],
        cwd=env.cwd,
        env={**os.environ, **env.variables},
        capture_output=True,
        text=True,
        timeout=BLOCK_TIMEOUT,
        stdin=subprocess.DEVNULL,
    )


class ShellEvaluator:
    """Runs a ``sh`` block with bash (``set -euo pipefail``), each command as written except
    for the few in ``translate``; any command failing fails the block."""

    def __call__(self, example: Example) -> str | None:
        env = _env(example)
        script = "\n".join(translate(line) for line in _logical_lines(env.rewrite(example.parsed)))
        need_tools(tools_in(script))
        result = _run_bash(script, env)
        if result.returncode != 0:
            return (
                f"exit status {result.returncode}\n--- script\n{script}\n"
                f"--- stdout\n{result.stdout}--- stderr\n{result.stderr}"
            )
        return None


_MARK = "@@firstwrite-doc-command@@\n"
_CHECKER = doctest.OutputChecker()
_CHECK_FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def parse_console(source: str) -> list[tuple[str, str]]:
    """``$ command`` lines (continued by ``> `` lines or a trailing backslash) and the output
    shown after each."""
    steps: list[tuple[str, list[str]]] = []
    continuing = False
    for line in source.splitlines():
        if line.startswith("$ ") or line == "$":
            steps.append((line[2:], []))
        elif steps and (continuing or line.startswith("> ")) and not steps[-1][1]:
            steps[-1] = (steps[-1][0] + "\n" + line.removeprefix("> "), [])
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"console output before any '$ ' command: {line!r}")
        continuing = bool(steps) and not steps[-1][1] and line.endswith("\\")
    return [(command, "\n".join(output).strip("\n")) for command, output in steps]


class ConsoleEvaluator:
    """Runs a ``console`` block: each ``$`` command with bash (stderr merged into stdout, as a
    terminal shows it); the output shown under a command must match what it printed, with
    ``...`` matching anything (doctest's ELLIPSIS) and runs of whitespace equal."""

    def __call__(self, example: Example) -> str | None:
        env = _env(example)
        steps = parse_console(env.rewrite(example.parsed))
        script = "".join(
            f"printf '%s' {shlex.quote(_MARK)}\n"
            + "\n".join(map(translate, _logical_lines(cmd)))
            + "\n"
            for cmd, _ in steps
        )
        need_tools(tools_in(script))
        result = _run_bash("exec 2>&1\n" + script, env)
        printed = result.stdout.split(_MARK)[1:]
        for index, (command, expected) in enumerate(steps):
            got = printed[index] if index < len(printed) else ""
            failed_here = index == len(printed) - 1 and result.returncode != 0
            if failed_here or (
                expected and not _CHECKER.check_output(expected + "\n", got, _CHECK_FLAGS)
            ):
                return (
                    f"$ {command}\n"
                    + (f"exit status {result.returncode}\n" if failed_here else "")
                    + f"--- expected\n{expected}\n--- got\n{got}"
                )
        return None


class YamlEvaluator:
    """Parses a ``yaml`` block; a CloudFormation resource (``Type: AWS::...``) must also pass
    cfn-lint inside a minimal template."""

    def __call__(self, example: Example) -> str | None:
        import yaml

        document = yaml.safe_load(str(example.parsed))
        if not isinstance(document, dict):
            return None
        resources = {
            name: body
            for name, body in document.items()
            if isinstance(body, dict) and str(body.get("Type", "")).startswith("AWS::")
        }
        if not resources:
            return None
        from cfnlint.api import lint_all

        template = yaml.safe_dump(
            {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}
        )
        # Errors and warnings; informational rules (I...) are style opinions.
        problems = [m for m in lint_all(template) if not m.rule.id.startswith("I")]
        return "cfn-lint:\n" + "\n".join(map(str, problems)) if problems else None


class SaveAs:
    """``<!-- save-as: NAME -->``: the next fenced block is written to NAME in the document's
    working directory instead of being run (a later block runs it, e.g. ``pytest NAME``)."""

    def __init__(self) -> None:
        self.lexer = DirectiveInHTMLCommentLexer("save-as", arguments=r"[\w./-]+")
        self.pending: dict[Document, str] = {}

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            region.parsed = region.lexemes["arguments"]
            region.evaluator = self.evaluate
            yield region

    def evaluate(self, example: Example) -> None:
        if example.region.evaluator == self.evaluate:
            if example.document in self.pending:
                raise ValueError("save-as: the previous save-as has no block after it")
            self.pending[example.document] = str(example.parsed)
            example.document.push_evaluator(self.evaluate)
            return
        name = self.pending.pop(example.document)
        example.document.pop_evaluator(self.evaluate)
        target = _env(example).cwd / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(str(example.parsed))


def make_sybil() -> Sybil:
    python = PythonCodeBlockParser()
    # Sybil's Python parser, with an evaluator that rewrites the server address and allows
    # top-level await; ``>>>`` blocks still run as doctests.
    python.codeblock_parser = CodeBlockParser(PYTHON, PythonEvaluator())
    parsers: list[Callable[[Document], Iterable[Region]]] = [
        python,
        *(CodeBlockParser(language, ShellEvaluator()) for language in SHELLS),
        CodeBlockParser(CONSOLE, ConsoleEvaluator()),
        CodeBlockParser(YAML, YamlEvaluator()),
        SkipParser(),
        SaveAs(),
        Requires(_env),
        Serve(_env),
    ]
    return Sybil(parsers=parsers, fixtures=[ENV_FIXTURE])


class DocItem(SybilItem):
    """A block's test item; a failure shows the document's line, not the harness's frames."""

    def setup(self) -> None:
        # Sybil copies every fixture value in the closure into the namespace, pytest's
        # ``request`` included, which would shadow a block's own ``request``: only ours.
        self._request._fillfixtures()
        env = self.funcargs[ENV_FIXTURE]
        env.namespace = self.example.namespace
        self.example.namespace[ENV_FIXTURE] = env

    def _traceback_filter(self, excinfo: pytest.ExceptionInfo[BaseException]) -> Any:
        return super()._traceback_filter(excinfo).filter(excinfo)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        # The "source" of a block is the whole Markdown file: the long style would print it.
        return super().repr_failure(
            excinfo, style="short" if style in (None, "auto", "long") else style
        )


class DocFile(SybilFile):
    """One document: its blocks as :class:`DocItem` in document order."""

    def collect(self) -> Iterator[DocItem]:
        for sybil in self.sybils:
            document = sybil.parse(self.path)
            self.documents.append(document)
            for example in document.examples():
                yield DocItem.from_parent(self, sybil=sybil, example=example)


class DocumentSuite(pytest.File):
    """The collector of a set of Markdown documents: one child per document, one item per
    block, named ``<document>::line:N,column:M``. Every block of one document runs in one xdist
    group, in order."""

    documents: Sequence[Path] = ()
    root: Path = REPO
    #: Where each document's blocks run, and how a document is parsed into them.
    environment: type[DocEnvironment] = DocEnvironment
    make_sybil: Callable[[], Sybil] = staticmethod(make_sybil)
    group = "doc"  # the xdist group of a document's blocks: f"{group}:{document}"

    @classmethod
    def from_parent(  # type: ignore[override]
        cls, parent: pytest.Collector, *, path: Path, documents: Sequence[Path], root: Path
    ) -> DocumentSuite:
        suite: DocumentSuite = super().from_parent(parent, path=path)
        suite.documents = documents
        suite.root = root
        return suite

    def collect(self) -> Iterator[pytest.Collector]:
        sybil = self.make_sybil()
        for document in self.documents:
            name = document.relative_to(self.root).as_posix()
            child = DocFile.from_parent(
                self, path=document, sybils=[sybil], name=name, nodeid=f"{self.nodeid}::{name}"
            )
            child.add_marker(pytest.mark.xdist_group(f"{self.group}:{name}"))
            yield child


def fenced_blocks(path: Path) -> Iterator[tuple[int, str]]:
    """(line, language) of every fenced code block in a Markdown file."""
    fence: str | None = None
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = re.match(r"^\s*(`{3,}|~{3,})\s*([^\s`]*)", line)
        if match is None:
            continue
        if fence is None:
            fence = match.group(1)
            yield number, match.group(2)
        elif match.group(1).startswith(fence) and not match.group(2):
            fence = None
