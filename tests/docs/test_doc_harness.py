"""The docs harness itself: it runs what it claims to, and a broken block fails with its file
and line. Synthetic Markdown documents run in a child pytest (``pytester``) with the same
collector and fixture as the real docs."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from doc_harness import ILLUSTRATIONS, PYTHON, REPO, RUN, fenced_blocks, parse_console, translate

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent

CONFTEST = f"""
import sys
sys.path[:0] = [{str(HERE)!r}, {str(HERE.parent)!r}]  # doc_harness, and the engine_process it uses
from doc_harness import DocumentSuite, doc_env

def pytest_pycollect_makemodule(module_path, parent):
    if module_path.name == "test_documents.py":
        root = module_path.parent
        documents = sorted(root.glob("*.md"))
        return DocumentSuite.from_parent(parent, path=module_path, documents=documents, root=root)
"""

FENCE = "```"


def md(text: str) -> str:
    """Markdown written with ''' for fences (a triple backtick cannot sit in this file's
    strings without confusing the reader)."""
    return textwrap.dedent(text).lstrip("\n").replace("'''", FENCE)


@pytest.fixture
def docs(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_documents='"""Collected by conftest.py."""')
    return pytester


def run(docs: pytest.Pytester, **documents: str) -> pytest.RunResult:
    for name, text in documents.items():
        (docs.path / f"{name}.md").write_text(md(text))
    return docs.runpytest_subprocess("-p", "no:cacheprovider", "-v", "-n", "0")


def test_a_broken_python_block_fails_with_its_file_and_line(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        broken="""
        # A document

        '''python
        total = 1 + 1
        '''

        Text between blocks.

        '''python
        assert total == 3, "the docs promised three"
        '''
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*test_documents.py::broken.md::line:3,column:1 PASSED*",
            "*test_documents.py::broken.md::line:9,column:1 FAILED*",
            "*broken.md:10: in <module>",
            "*AssertionError: the docs promised three",
        ]
    )


def test_a_failing_shell_command_fails_its_block_with_file_line_and_output(
    docs: pytest.Pytester,
) -> None:
    result = run(
        docs,
        shell="""
        '''sh
        echo first
        ls no-such-file
        echo never
        '''
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*shell.md::line:1,column:1 FAILED*",
            "*shell.md, line 1, column 1 did not evaluate as expected:",
            "exit status 2",
            "*no-such-file*",
            "*shell.md:1: SybilFailure",
        ]
    )
    assert "never" not in result.stdout.str().split("--- stdout")[1].split("--- stderr")[0]


def test_blocks_share_a_namespace_and_setup_and_skip_work(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        setup="""
        <!-- invisible-code-block: python
        secret = 41
        -->

        '''python
        answer = secret + 1
        '''

        <!-- skip: next "needs real AWS" -->

        '''python
        raise RuntimeError("a skipped block must not run")
        '''

        '''python
        assert answer == 42
        '''
        """,
    )
    result.assert_outcomes(passed=4, skipped=1)
    result.stdout.fnmatch_lines(["*SKIPPED*needs real AWS*"])


def test_each_document_has_its_own_directory_database_and_server(docs: pytest.Pytester) -> None:
    block = """
    '''python
    import os
    from pathlib import Path

    import boto3
    from firstwrite import Idempotency

    Path("marker").touch()
    assert sorted(os.listdir(".")) == ["marker"]
    assert Idempotency().run("k", lambda: os.environ["FIRSTWRITE_LOCAL_DB"]) == os.environ[
        "FIRSTWRITE_LOCAL_DB"
    ]
    # The production line, unchanged, reaches the document's server, not AWS.
    client = boto3.client("dynamodb")
    assert client.meta.endpoint_url == os.environ["AWS_ENDPOINT_URL"].rstrip("/")
    client.create_table(
        TableName="things", BillingMode="PAY_PER_REQUEST",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
    )
    '''

    '''python
    explicit = boto3.client("dynamodb", endpoint_url="http://127.0.0.1:8000")
    assert explicit.list_tables()["TableNames"] == ["things"]
    '''
    """
    # The same blocks in two documents: each would fail on the other's file, database entry
    # or table.
    result = run(docs, one=block, two=block)
    result.assert_outcomes(passed=4)


def test_shell_blocks_reach_the_documents_server(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        served="""
        '''sh
        firstwrite engine serve --port 8000 --db local.db   # stands in: already served
        curl --fail-with-body -sS -X POST http://localhost:8000/_firstwrite/clock \\
             -H 'Content-Type: application/json' -d '{"freeze": true}'
        aws dynamodb list-tables --endpoint-url http://127.0.0.1:8000 --no-sign-request
        '''
        """,
    )
    result.assert_outcomes(passed=1)


def test_served_apps_are_reached_at_the_address_the_text_shows(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        apps="""
        <!-- invisible-code-block: python
        async def asgi_app(scope, receive, send):
            if scope["type"] != "http":
                return
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b"from asgi"})

        def wsgi_app(environ, start_response):
            start_response("200 OK", [("Content-Type", "text/plain")])
            return [b"from wsgi"]

        doc_env.serve(asgi_app, "localhost:8080")
        doc_env.serve(wsgi_app, "127.0.0.1:8081")
        -->

        '''sh
        test "$(curl --fail-with-body -sS http://localhost:8080/)" = "from asgi"
        test "$(curl --fail-with-body -sS http://127.0.0.1:8081/x)" = "from wsgi"
        '''

        '''python
        import urllib.request

        assert urllib.request.urlopen("http://localhost:8081/").read() == b"from wsgi"
        '''
        """,
    )
    result.assert_outcomes(passed=3)


def test_doctest_blocks_and_top_level_await(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        session="""
        '''python
        import asyncio

        await asyncio.sleep(0)
        first_loop = asyncio.get_running_loop()
        '''

        '''python
        await asyncio.sleep(0)
        assert asyncio.get_running_loop() is first_loop   # one loop per document
        '''

        '''python
        >>> 6 * 7
        41
        '''
        """,
    )
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*session.md::line:14,column:1 FAILED*", "Expected:", "    41"])


def test_console_output_is_compared(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        console="""
        '''console
        $ echo hello world
        hello   world
        $ printf 'a\\nb\\nc\\n'
        a
        ...
        '''

        '''console
        $ echo actual
        expected
        '''
        """,
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*console.md::line:9,column:1 FAILED*", "$ echo actual", "--- expected", "expected"]
    )


def test_save_as_writes_the_next_block_for_a_later_one(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        saved="""
        <!-- save-as: test_sample.py -->

        '''python
        def test_passes():
            assert True

        def test_fails():
            assert 1 == 2
        '''

        '''sh
        ! pytest -q -p no:cacheprovider test_sample.py > out.txt
        grep -q "1 failed, 1 passed" out.txt
        '''
        """,
    )
    result.assert_outcomes(passed=3)


def test_a_broken_cloudformation_snippet_fails(docs: pytest.Pytester) -> None:
    result = run(
        docs,
        cfn="""
        '''yaml
        Table:
          Type: AWS::DynamoDB::Table
          Properties:
            BillingMode: PAY_PER_REQUEST
            KeySchema: [{AttributeName: pk, KeyType: HASH}]
        '''
        """,
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*cfn-lint:*", "*AttributeDefinitions*"])


def test_the_long_running_commands_are_not_run_as_written() -> None:
    assert translate("make run     # the engine") == f"make -n -C {REPO} run >/dev/null"
    assert translate("make test") == f"make -n -C {REPO} test >/dev/null"
    assert translate("make run PORT=9000") == f"make -n -C {REPO} run PORT=9000 >/dev/null"
    assert translate("firstwrite engine serve --port 8000").startswith("true  #")
    assert translate("firstwrite engine serve --help") == "firstwrite engine serve --help"
    assert translate("aws dynamodb list-tables") == "aws dynamodb list-tables"


def test_console_parsing() -> None:
    assert parse_console("$ a \\\n  --flag\nout\n$ b\n> more\n$ c\n") == [
        ("a \\\n  --flag", "out"),
        ("b\nmore", ""),
        ("c", ""),
    ]


def documents() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_every_block_is_run_or_an_illustration() -> None:
    """A block in a language the harness does not run (```py, ```pycon, ```zsh...) would rot
    unnoticed: name it one the harness runs, or one that is plainly not code."""
    unknown = [
        f"{path.relative_to(REPO)}:{line}: {language!r}"
        for path in documents()
        for line, language in fenced_blocks(path)
        if language not in RUN and language not in ILLUSTRATIONS
    ]
    assert not unknown, unknown


def test_the_docs_have_runnable_blocks() -> None:
    """The collector sees the real documents (a broken glob would run nothing, green)."""
    languages = [language for path in documents() for _, language in fenced_blocks(path)]
    assert languages.count(PYTHON) >= 10 and "sh" in languages
