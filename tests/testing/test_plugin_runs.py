"""The plugin as pytest loads it, in runs of small test modules (pytester): isolation between
tests, settings, bad settings, and a machine without the engine extra."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

INI = "[pytest]\nasyncio_default_fixture_loop_scope = function\n"


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeini(INI)
    return pytester


def test_each_test_gets_an_engine_of_its_own(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        import pytest

        @pytest.mark.parametrize("n", range(3))
        def test_create(firstwrite_client, firstwrite_engine, n):
            assert firstwrite_client.list_tables()["TableNames"] == []
            firstwrite_client.create_table(
                TableName="shared-name",
                KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            firstwrite_client.put_item(TableName="shared-name", Item={"pk": {"S": str(n)}})
            assert firstwrite_engine.execute("Scan", {"TableName": "shared-name"})["Count"] == 1
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=3)


def test_memory_by_default_file_by_ini_or_marker(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_default="""
        def test_memory(firstwrite_engine):
            assert firstwrite_engine.path is None
        """,
        test_file="""
        import pytest

        @pytest.mark.firstwrite(storage="file")
        def test_the_marker(firstwrite_engine, tmp_path):
            assert firstwrite_engine.path == str(tmp_path / "firstwrite.db")
        """,
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)
    project.makeini(INI + "firstwrite_storage = file\n")
    project.makepyfile(
        test_default="""
        def test_file(firstwrite_engine, tmp_path):
            assert firstwrite_engine.path == str(tmp_path / "firstwrite.db")
        """
    )
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("ini", "marker", "message"),
    [
        ("firstwrite_storage = disk\n", "", "*firstwrite storage must be one of*'disk'*"),
        ("", '@pytest.mark.firstwrite("memory")', "*takes keyword arguments only*"),
        ("", "@pytest.mark.firstwrite(durability='full')", "*unknown [[]'durability'[]]*"),
    ],
)
def test_bad_settings_are_reported(
    project: pytest.Pytester, ini: str, marker: str, message: str
) -> None:
    project.makeini(INI + ini)
    project.makepyfile(
        f"""
        import pytest

        {marker}
        def test_engine(firstwrite_engine):
            pass
        """
    )
    result = project.runpytest("-p", "no:randomly")
    result.stdout.fnmatch_lines([message])
    assert result.ret != 0


BLOCK_ENGINE_DEPENDENCIES = """
import sys

# The engine's dependencies (its extra), as on a machine with only `pip install firstwrite`.
for name in ("lark", "msgpack", "uvicorn", "starlette", "httptools", "uvloop", "jinja2"):
    sys.modules[name] = None
"""


def test_without_the_engine_extra_the_plugin_loads_and_says_what_to_install(
    project: pytest.Pytester,
) -> None:
    project.makeconftest(BLOCK_ENGINE_DEPENDENCIES)
    project.makepyfile(
        """
        import pytest
        from firstwrite.testing import MissingExtraError, mock_dynamodb

        def test_plain():
            assert 1 + 1 == 2

        def test_engine(firstwrite_engine):
            pass

        def test_mock():
            with pytest.raises(MissingExtraError, match=r"firstwrite\\[engine\\]"):
                with mock_dynamodb():
                    pass
        """
    )
    # A fresh interpreter: this one has the engine imported already.
    result = project.runpytest_subprocess("-p", "no:randomly", timeout=120)
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*firstwrite.testing needs firstwrite's local engine, which is an extra: "
            "pip install 'firstwrite[[]engine[]]' (missing module: *)"
        ]
    )


def test_the_plugin_waits_for_botocore_before_installing_its_hook() -> None:
    script = textwrap.dedent(
        """
        import sys
        from firstwrite.testing import redirect

        redirect.install_on_import()
        assert "botocore" not in sys.modules, "the plugin imported botocore"
        assert not redirect._installed
        import boto3  # imports botocore.handlers: the hook installs itself then

        assert redirect._installed
        client = boto3.client(
            "dynamodb", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b"
        )
        assert isinstance(client, redirect._Redirectable)
        with redirect.mock_dynamodb():
            assert client.list_tables()["TableNames"] == []
        print("ok")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_the_aio_client_without_aiobotocore_says_what_to_install(
    project: pytest.Pytester,
) -> None:
    project.makeconftest('import sys\n\nsys.modules["aiobotocore"] = None\n')
    project.makepyfile(
        """
        import pytest

        @pytest.mark.asyncio
        async def test_aio(firstwrite_aio_client):
            pass
        """
    )
    result = project.runpytest_subprocess("-p", "no:randomly", timeout=120)
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*firstwrite.testing needs aiobotocore, which is an extra: "
            "pip install 'firstwrite[[]async[]]' (missing module: aiobotocore)"
        ]
    )


def test_the_aio_client_without_pytest_asyncio_says_so(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    shadow = project.mkdir("no_pytest_asyncio")
    (shadow / "pytest_asyncio.py").write_text("raise ImportError('not installed here')\n")
    monkeypatch.setenv("PYTHONPATH", str(shadow))
    project.makeini("[pytest]\n")
    project.makepyfile(
        """
        def test_plain():
            pass

        def test_aio(firstwrite_aio_client):
            pass
        """
    )
    result = project.runpytest_subprocess("-p", "no:randomly", "-p", "no:asyncio", timeout=120)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*firstwrite_aio_client needs pytest-asyncio*"])


def test_a_run_with_the_testing_extra_has_no_deprecation_warning(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A user's own project (no pytest configuration of its own) with what ``[testing]``
    installs: under ``-W error`` nothing third-party warns, firstwrite's plugin included.
    pytest-asyncio, which warns in any project that has not set its loop scope, is not in the
    extra (``-p no:asyncio`` stands for its absence here, where the dev tools install it)."""
    import tomllib
    from pathlib import Path

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    extras = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    assert not any("asyncio" in requirement for requirement in extras["testing"])
    assert any(r.startswith("pytest-asyncio") for r in extras["testing-async"])
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        """
        def test_guard(firstwrite_guard, firstwrite_clock):
            assert firstwrite_guard.run("k", lambda: 1) == 1
            firstwrite_clock.advance(10)

        def test_client(firstwrite_client):
            assert firstwrite_client.list_tables()["TableNames"] == []
        """
    )
    monkeypatch.setenv("PYTHONWARNINGS", "error::DeprecationWarning")  # plugin load time too
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "-p", "no:asyncio", "-W", "error", "-rw", timeout=120
    )
    result.assert_outcomes(passed=2)
    assert "warnings summary" not in result.stdout.str(), result.stdout.str()
    assert "Deprecat" not in result.stderr.str(), result.stderr.str()
