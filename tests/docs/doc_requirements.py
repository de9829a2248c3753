"""What a document's blocks need beyond Python: programs (``curl``...) and services (a broker).

Shell and console blocks that run a program of ``tools.TOOLS`` (``curl``, ``node``...) need it:
:func:`tools_in` finds them and the block skips (``missing tool: curl (install: ...)``) where
one is missing, like any test (``tests/tools.py``).

A run of blocks that needs a service says so with a directive, which the harness provides in
both runs of the docs (all blocks, and the visible blocks as pasted)::

    <!-- requires: rabbitmq-server -->
    ... blocks ...
    <!-- requires: end -->

``rabbitmq-server``
    Debian's RabbitMQ (``brokers.start_rabbitmq``); ``localhost:5672`` in the blocks (the
    broker's default address) is rewritten to it. Missing: every block up to ``requires: end``
    is skipped with the tool's reason.
``sqs``
    An SQS-API server (moto's, ``brokers.start_moto``): ``AWS_ENDPOINT_URL_SQS`` points every
    AWS SDK's SQS client at it, as a developer's environment would point them at theirs.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from sybil import Document, Example, Region
from sybil.example import NotEvaluated
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer

from tools import TOOLS, need_tool

_TOOL_WORD = re.compile(
    r"(?<![\w./-])(" + "|".join(re.escape(name) for name in TOOLS) + r")(?![\w.-])"
)


def tools_in(script: str) -> list[str]:
    """The programs of ``tools.TOOLS`` a shell script names as words, in first-use order."""
    return list(dict.fromkeys(_TOOL_WORD.findall(script)))


class ServiceHost(Protocol):
    """What a document's environment offers a service: an address rewrite, an environment
    variable for every later block, and a cleanup at the document's end."""

    def rewrite_address(self, shown: str, real: str) -> None: ...

    def set_variable(self, name: str, value: str) -> None: ...

    def on_close(self, cleanup: Callable[[], None]) -> None: ...


def _start_rabbitmq(host: ServiceHost) -> None:
    from brokers import start_rabbitmq

    broker = start_rabbitmq()
    host.on_close(broker.stop)
    host.rewrite_address("localhost:5672", f"127.0.0.1:{broker.port}")


def _start_sqs(host: ServiceHost) -> None:
    import tempfile
    from pathlib import Path

    from brokers import start_moto

    broker = start_moto(Path(tempfile.mkdtemp(prefix="firstwrite-doc-moto-")))
    host.on_close(broker.stop)
    host.set_variable("AWS_ENDPOINT_URL_SQS", broker.url)


#: Each requirement: the programs it needs, and how it is started for a document.
SERVICES: dict[str, tuple[tuple[str, ...], Callable[[ServiceHost], None]]] = {
    "rabbitmq-server": (("rabbitmq-server",), _start_rabbitmq),
    "sqs": ((), _start_sqs),
}


class Requires:
    """The ``requires:`` directive (module docstring). ``host_of(example)`` is the document's
    environment."""

    def __init__(self, host_of: Callable[[Example], ServiceHost]) -> None:
        self.lexer = DirectiveInHTMLCommentLexer("requires", arguments=r"[\w.-]+")
        self.host_of = host_of
        self.active: dict[Document, tuple[str, ...]] = {}

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            name = region.lexemes["arguments"]
            if name != "end" and name not in SERVICES:
                raise ValueError(f"requires: unknown {name!r} (known: {', '.join(SERVICES)})")
            region.parsed = name
            region.evaluator = self.evaluate
            yield region

    def evaluate(self, example: Example) -> None:
        name = str(example.parsed)
        if name == "end":
            self.active.pop(example.document, None)
            example.document.pop_evaluator(self.gate)
            return
        programs, start = SERVICES[name]
        self.active[example.document] = programs
        example.document.push_evaluator(self.gate)
        for program in programs:
            need_tool(program)
        start(self.host_of(example))

    def gate(self, example: Example) -> Any:
        """Every block inside the directive's run: skipped where a program is missing."""
        if example.region.evaluator != self.evaluate:
            for program in self.active.get(example.document, ()):
                need_tool(program)
        raise NotEvaluated()


class Serve:
    """``<!-- serve: NAME localhost:PORT -->``: serve the ASGI or WSGI app the blocks so far
    named ``NAME`` (on uvicorn, or a threaded wsgiref server) for the rest of the document, on
    a free port that ``localhost:PORT`` in every later block is rewritten to. It stands in for
    the reader's ``uvicorn app:app --port PORT`` in another terminal, which the text shows."""

    def __init__(self, host_of: Callable[[Example], Any]) -> None:
        self.lexer = DirectiveInHTMLCommentLexer("serve", arguments=r"\w+ [\w.]+:\d+")
        self.host_of = host_of

    def __call__(self, document: Document) -> Iterable[Region]:
        for region in self.lexer(document):
            region.parsed = region.lexemes["arguments"]
            region.evaluator = self.evaluate
            yield region

    def evaluate(self, example: Example) -> None:
        name, address = str(example.parsed).split()
        self.host_of(example).serve_named(name, address, example.namespace)
