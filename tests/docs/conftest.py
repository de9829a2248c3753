"""Every code block of README.md and docs/*.md runs as a test (Sybil; machinery in doc_harness.py).

``pytest tests/docs/test_documents.py`` runs them all; each block is an item named
``tests/docs/test_documents.py::<document>::line:N,column:M``. A new docs/*.md is picked up
without registering it. The convention, for anyone writing docs:

Python (```python)
    Blocks run in order, in one namespace per document (a later block sees an earlier one's
    names). Top-level ``await`` is allowed: it runs on one event loop per document, as in
    ``python -m asyncio``. ``>>>`` blocks run as doctests.

Hidden blocks check results
    ``<!-- invisible-code-block: python`` ... ``-->``: runs like a visible block, to assert what
    the example claims. Visible code must run without them, as a reader pastes it:
    ``test_pasted.py`` runs every page's visible blocks alone (``doc_pasted.py``: Python in one
    fresh interpreter per page, nothing of tests/ importable, top-level ``await`` a
    SyntaxError). So a stand-in for the reader's side effect is visible code, said to be one.

What a page needs beyond Python (``doc_requirements.py``)
    A shell block running ``curl`` (or another program of ``tests/tools.py``) is skipped where
    it is missing, saying how to install it. ``<!-- requires: rabbitmq-server -->`` ...
    ``<!-- requires: end -->`` around blocks that need a broker starts one for the page
    (``localhost:5672`` rewritten to it; skipped with its install command where missing);
    ``requires: sqs`` starts moto's SQS server (``AWS_ENDPOINT_URL_SQS``).
    ``<!-- serve: app localhost:8080 -->`` serves the ASGI or WSGI app the blocks named ``app``
    for the rest of the page, standing in for the reader's ``uvicorn`` in another terminal.

Skipping
    ``<!-- skip: next -->`` skips the next block; only for a block that truly cannot run here
    (real AWS), and the text around it must say why. ``skip: start`` / ``skip: end`` for a run
    of blocks. Sybil's own directives, see its documentation.

Shell (```sh, ```bash, ```shell)
    The block runs as one bash script with ``set -euo pipefail``: any failing command fails
    it. So an HTTP call that must succeed is ``curl -fsS`` (or ``--fail-with-body``): a bare
    ``curl -s`` exits 0 on a 4xx. Continuation lines (``\\``) and comments are fine.

Console (```console)
    ``$ command`` lines run with bash in order (stderr shown with stdout, as in a terminal);
    the lines shown under a command are its expected output, compared with doctest's
    ELLIPSIS (``...`` matches anything) and NORMALIZE_WHITESPACE. No output shown: not
    compared.

Serving your own app
    ``serve:`` above; a hidden block may also call ``doc_env.serve(app, "localhost:8080")``
    (all-blocks run only). ``localhost:8080`` / ``127.0.0.1:8080`` in every later block is
    rewritten to the app's free port, so a ``curl`` shown in the text reaches it.

Saving a file
    ``<!-- save-as: test_orders.py -->`` before a block writes that block to the named file
    in the working directory instead of running it; a later block runs it (``pytest
    test_orders.py``).

YAML (```yaml)
    Parsed; a CloudFormation resource (``Type: AWS::...``) is also linted with cfn-lint.

Other fences
    A fence with no language, ``text`` or ``mermaid`` (and ``json``, ``http``, ``toml``,
    ``ini``) is an illustration and is not run. Any other language fails
    ``test_doc_harness.py::test_every_block_is_run_or_an_illustration``.

What every block runs in (one per document, the ``doc_env`` fixture)
    * the working directory is a fresh temporary directory;
    * ``FIRSTWRITE_LOCAL_DB`` is a temporary file, so ``Idempotency()`` with no arguments uses
      a database of the document's own;
    * a real ``firstwrite engine serve`` listens on a free loopback port for the document, and
      ``127.0.0.1:8000`` / ``localhost:8000`` (``make run``'s address) in any block is rewritten
      to it;
    * the environment is a developer's after ``make run``: ``AWS_ENDPOINT_URL`` points every
      AWS SDK at that server, with dummy credentials, region ``us-east-1`` and no ~/.aws
      files, so production lines such as ``boto3.client("dynamodb")`` run unchanged against
      the local engine and nothing can reach real AWS;
    * ``PATH`` starts with this virtualenv's ``bin`` (``firstwrite``, ``aws``, ``pytest``).

Commands that are not run as written (``doc_harness.translate``)
    ``make run`` and ``make test`` (any ``make TARGET``): ``make run`` serves until stopped and
    ``make test`` is this suite, so here they are dry-run (``make -n``: the target and its
    recipe exist); ``tests/test_install.py`` runs ``make run`` for real from a fresh clone.
    ``firstwrite engine serve ...`` (without ``--help``) serves until stopped: the document's
    server, already listening at the rewritten address, stands in for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from doc_harness import REPO, DocumentSuite, doc_env
from doc_pasted import PastedEnvironment, make_pasted_sybil

__all__ = ["doc_env"]


class PastedSuite(DocumentSuite):
    """The same documents, visible blocks only, Python in a fresh interpreter per document
    (``doc_pasted.py``)."""

    environment = PastedEnvironment
    make_sybil = staticmethod(make_pasted_sybil)
    group = "pasted"


HERE = Path(__file__).resolve().parent


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def pytest_pycollect_makemodule(module_path: Path, parent: pytest.Collector) -> pytest.File | None:
    if module_path.resolve() == HERE / "test_documents.py":
        return DocumentSuite.from_parent(parent, path=module_path, documents=documents(), root=REPO)
    if module_path.resolve() == HERE / "test_pasted.py":
        return PastedSuite.from_parent(parent, path=module_path, documents=documents(), root=REPO)
    return None
