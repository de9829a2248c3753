"""The docs harness's newer parts, on synthetic documents in a child pytest: the visible blocks
run alone as pasted (``doc_pasted.py``), and blocks that need a missing program or service are
skipped with its install command, or fail under ``FIRSTWRITE_REQUIRE_TOOLS=1``."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]
from doc_harness import DocumentSuite, doc_env
from doc_pasted import PastedEnvironment, make_pasted_sybil


class PastedSuite(DocumentSuite):
    environment = PastedEnvironment
    make_sybil = staticmethod(make_pasted_sybil)
    group = "pasted"


def pytest_pycollect_makemodule(module_path, parent):
    root = module_path.parent
    documents = sorted(root.glob("*.md"))
    if module_path.name == "test_documents.py":
        return DocumentSuite.from_parent(parent, path=module_path, documents=documents, root=root)
    if module_path.name == "test_pasted.py":
        return PastedSuite.from_parent(parent, path=module_path, documents=documents, root=root)
"""


def md(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n").replace("'''", "```")


@pytest.fixture
def docs(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_documents='"""Collected by conftest.py."""')
    pytester.makepyfile(test_pasted='"""Collected by conftest.py."""')
    return pytester


def run(docs: pytest.Pytester, text: str, *args: str) -> pytest.RunResult:
    (docs.path / "page.md").write_text(md(text))
    return docs.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-n", "0", "-rs", *args)


HIDDEN_SETUP = """
<!-- invisible-code-block: python
rate = 3
-->

'''python
print(rate * 2)
'''
"""


def test_a_visible_block_cannot_use_what_a_hidden_block_set_up(docs: pytest.Pytester) -> None:
    result = run(docs, HIDDEN_SETUP)
    result.stdout.fnmatch_lines(
        [
            "*test_documents.py::page.md::line:5,column:1 PASSED*",  # all blocks: fine
            "*test_pasted.py::page.md::line:5,column:1 FAILED*",  # alone: the reader's error
            "*NameError: name 'rate' is not defined*",
        ]
    )


def test_pasted_blocks_share_one_fresh_interpreter(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        """
        '''python
        import sys
        orders = ["o-1"]
        '''

        '''python
        assert orders == ["o-1"] and __name__ == "__main__"
        '''

        '''python
        import doc_harness  # the harness's modules are not the reader's
        '''

        '''python
        import asyncio

        async def one():
            return 1

        await one()
        '''
        """,
        "-k",
        "test_pasted",
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines_random(
        [
            "*ModuleNotFoundError: No module named 'doc_harness'*",
            "*SyntaxError: 'await' outside function*",
        ]
    )


CURL = """
'''sh
curl --version
'''
"""


def test_a_block_needing_a_missing_program_is_skipped_saying_how_to_install_it(
    docs: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIRSTWRITE_HIDE_TOOLS", "curl")
    monkeypatch.delenv("FIRSTWRITE_REQUIRE_TOOLS", raising=False)
    result = run(docs, CURL)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*missing tool: curl (install: apt-get install -y curl)*"])


def test_require_tools_turns_the_skip_into_a_failure(
    docs: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIRSTWRITE_HIDE_TOOLS", "curl")
    monkeypatch.setenv("FIRSTWRITE_REQUIRE_TOOLS", "1")
    result = run(docs, CURL)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*missing tool: curl*FIRSTWRITE_REQUIRE_TOOLS=1 forbids*"])


def test_requires_skips_its_blocks_and_only_them(
    docs: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FIRSTWRITE_HIDE_TOOLS", "rabbitmq-server")
    monkeypatch.delenv("FIRSTWRITE_REQUIRE_TOOLS", raising=False)
    result = run(
        docs,
        """
        <!-- requires: rabbitmq-server -->

        '''python
        raise AssertionError("must not run without the broker")
        '''

        <!-- requires: end -->

        '''python
        after = True
        '''
        """,
        "-k",
        "test_documents",
    )
    # the directive and the block inside skipped; the end directive and the block after run
    result.assert_outcomes(skipped=2, passed=2)
    result.stdout.fnmatch_lines(["*missing tool: rabbitmq-server*"])
