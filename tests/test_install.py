"""The light install: ``pip install firstwrite`` is the layer on boto3 alone; the local engine, its
server and console are the ``engine`` extra; ``make run`` bootstraps from requirements/run.lock.

The layer is run in a child interpreter whose import system refuses every third-party module
outside boto3's own requirements, so an accidental import of the engine (or of anything else)
fails there exactly as it would in a Lambda package built from ``pip install firstwrite``.
"""

from __future__ import annotations

import ast
import functools
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import tomllib
from collections.abc import Iterator, Mapping
from importlib.metadata import packages_distributions
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from packaging.requirements import Requirement

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "firstwrite"

#: What ``pip install firstwrite`` brings: boto3 and its requirements (import names).
CORE_MODULES = ("boto3", "botocore", "jmespath", "s3transfer", "urllib3", "dateutil", "six")
#: The engine extra's packages, refused by name as well (the allow-list already refuses them).
ENGINE_MODULES = ("lark", "msgpack", "uvicorn", "starlette", "httptools", "uvloop", "jinja2")

#: A dependency used only through another's module: uvicorn loads httptools for its HTTP parser,
#: Starlette's templating (the console's pages) loads jinja2.
USED_THROUGH = {
    "httptools": "uvicorn.protocols.http.httptools_impl",
    "jinja2": "starlette.templating",
}
#: Declared for code being merged from parallel work. Once src imports one, the check below
#: fails until it is taken off this list (the console now imports starlette and jinja2).
AWAITING_IMPORT: set[str] = set()

BLOCKER = r"""
import sys

AT_STARTUP = set(sys.modules)  # site's own (.pth hooks): not imported by the layer

import importlib.abc
import json

ALLOWED = set(sys.stdlib_module_names) | {"firstwrite", *CORE}


class CoreOnly(importlib.abc.MetaPathFinder):
    # Refuses, as if not installed, every module outside the stdlib and the core's packages.
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top not in ALLOWED or top in ENGINE:
            raise ModuleNotFoundError(f"No module named {name!r} (not in the core)", name=name)
        return None


sys.meta_path.insert(0, CoreOnly())
for top in ENGINE:
    try:
        __import__(top)
    except ModuleNotFoundError:
        pass
    else:
        raise SystemExit(f"the blocker let {top} through")
"""

CHILD = (
    BLOCKER
    + r"""
import boto3

import firstwrite
import firstwrite.idempotency
from firstwrite import Idempotency, IdempotencyConfig

client = boto3.client(
    "dynamodb", endpoint_url=URL, region_name="us-east-1",
    aws_access_key_id="local", aws_secret_access_key="local",
)
guard = Idempotency(IdempotencyConfig(table_name=TABLE), client=client)
guard.ensure_table()
calls = []
first = guard.run("order-1", lambda: calls.append(1) or {"charged": 10}, payload={"amount": 10})
again = guard.run("order-1", lambda: calls.append(1) or {"charged": 10}, payload={"amount": 10})

third_party = sorted(
    {name.partition(".")[0] for name in set(sys.modules) - AT_STARTUP if name[:2] != "__"}
    - set(sys.stdlib_module_names)
)
engine_loaded = sorted(m for m in sys.modules if m.startswith("firstwrite.engine"))

try:
    Idempotency()
except ImportError as exc:
    zero_config = f"{type(exc).__name__}: {exc}"
else:
    zero_config = None

print(json.dumps({
    "results": [first, again],
    "calls": len(calls),
    "zero_config": zero_config,
    "third_party": third_party,
    "engine_loaded": engine_loaded,
}))
"""
)


def run_core_only(url: str, table: str) -> dict[str, Any]:
    prelude = f"CORE = {CORE_MODULES!r}\nENGINE = {ENGINE_MODULES!r}\n"
    prelude += f"URL = {url!r}\nTABLE = {table!r}\n"
    done = subprocess.run(
        [sys.executable, "-c", prelude + CHILD],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "FIRSTWRITE_LOCAL_DB": "/nonexistent/never-created.db"},
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return report


#: Every command that needs the local engine, run where the [engine] extra is missing.
ENGINE_COMMANDS = [
    ["engine", "serve", "--port", "0"],
    ["race", "--threads", "4"],
    ["table", "create"],
    ["keys", "list"],
    ["demo", "--port", "0"],
    ["console", "export-diagram", "replay", "-o", "replay.svg"],
]


def test_every_engine_command_names_the_extra_in_a_core_install(tmp_path: Path) -> None:
    """Without the [engine] extra, each command that needs the engine fails in one line that
    says what to install, never ``unexpected ModuleNotFoundError``."""
    prelude = f"CORE = {CORE_MODULES!r}\nENGINE = {ENGINE_MODULES!r}\n"
    (tmp_path / "x.db").touch()  # an existing database: `keys` must open it with the engine
    script = prelude + BLOCKER + "from firstwrite.cli import main\nsys.exit(main(sys.argv[1:]))\n"
    for argv in ENGINE_COMMANDS:
        done = subprocess.run(
            [
                sys.executable,
                "-c",
                script,
                *argv,
                *(["--db", str(tmp_path / "x.db")] if argv[0] in ("race", "table", "keys") else []),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=tmp_path,
            env={**os.environ, "FIRSTWRITE_LOCAL_DB": str(tmp_path / "local.db")},
        )
        assert done.returncode == 1, (argv, done.stdout, done.stderr)
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("firstwrite: ") and "unexpected" not in line, (argv, line)
        assert "pip install 'firstwrite[engine]'" in line, (argv, line)


def test_the_layer_runs_on_boto3_alone(http_server: Any, table_name: str) -> None:
    report = run_core_only(http_server.url, table_name)
    assert report["results"] == [{"charged": 10}, {"charged": 10}]
    assert report["calls"] == 1
    assert report["engine_loaded"] == []
    assert set(report["third_party"]) <= {"firstwrite", *CORE_MODULES}


def test_the_zero_config_default_without_the_engine_says_what_to_install(
    http_server: Any, table_name: str
) -> None:
    message = run_core_only(http_server.url, table_name)["zero_config"]
    assert message is not None, "Idempotency() worked without the engine's packages"
    assert message.startswith("ImportError: ")
    assert "pip install 'firstwrite[engine]'" in message
    assert "client=boto3.client('dynamodb')" in message
    assert re.search(r"\((lark|msgpack)[\w.]* is missing\)", message), message


# -- declared dependencies versus imports ------------------------------------------------------


def src_imports() -> dict[str, set[str]]:
    """Every absolute import in src/firstwrite (lazy ones included): module -> files."""
    found: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def declared() -> dict[str | None, set[str]]:
    """pyproject.toml's requirements by extra (None: the core), as normalised names."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    groups = {None: project["dependencies"], **project["optional-dependencies"]}
    return {extra: {canonical(Requirement(r).name) for r in reqs} for extra, reqs in groups.items()}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@functools.cache
def top_level_distributions() -> Mapping[str, list[str]]:
    """``packages_distributions()``, read once: it reads every installed distribution's files."""
    return packages_distributions()


def distributions_of(module: str) -> set[str]:
    return {canonical(d) for d in top_level_distributions().get(module.partition(".")[0], [])}


@pytest.mark.parametrize("extra", [None, "engine"])
def test_every_runtime_dependency_is_imported(extra: str | None) -> None:
    imported = src_imports()
    used = set().union(*(distributions_of(module) for module in imported))
    used |= {dist for dist, through in USED_THROUGH.items() if through in imported}
    unused = declared()[extra] - used - AWAITING_IMPORT
    assert not unused, f"declared in {extra or 'the core'} but imported by nothing: {unused}"
    assert not AWAITING_IMPORT & used, "imported now: take it off AWAITING_IMPORT"


def test_every_import_is_declared() -> None:
    everything = set().union(*declared().values())
    undeclared = {
        module: sorted(files)
        for module, files in src_imports().items()
        if module.partition(".")[0] not in sys.stdlib_module_names
        and module.partition(".")[0] != "firstwrite"
        and not distributions_of(module) & everything
    }
    assert not undeclared, f"imported but not a dependency (core or extra): {undeclared}"


def test_the_layer_imports_only_the_core_at_module_level() -> None:
    """Statically: modules of the layer import nothing outside the core at import time, except
    inside functions (the optional integrations: metrics exporters, pydantic, the local engine)."""
    offenders = []
    for path in (SRC / "idempotency").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if (
                    top not in sys.stdlib_module_names and top not in {"firstwrite", *CORE_MODULES}
                ) or name.startswith("firstwrite.engine"):
                    offenders.append(f"{path.relative_to(REPO)}: {name}")
    assert not offenders


# -- make run from a fresh clone -----------------------------------------------------------------


@pytest.fixture
def fresh_clone(tmp_path: Path) -> Path:
    """This checkout's committed HEAD, cloned: what a new user gets."""
    clone = tmp_path / "firstwrite"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True, timeout=120)
    return clone


@pytest.fixture
def make_run(fresh_clone: Path) -> Iterator[tuple[subprocess.Popen[str], list[str]]]:
    process = subprocess.Popen(
        ["make", "run", "PORT=0", "ENGINE_PORT=0", f"PYTHON={sys.executable}"],
        cwd=fresh_clone,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group: make, pip, then the server
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stdout or ()), daemon=True).start()
    yield process, lines
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.slow
def test_make_run_works_on_a_fresh_clone_from_run_lock_alone(
    fresh_clone: Path, make_run: tuple[subprocess.Popen[str], list[str]]
) -> None:
    process, lines = make_run
    started = time.monotonic()
    url = endpoint = None
    while endpoint is None and time.monotonic() - started < 600 and process.poll() is None:
        text = "".join(lines)
        match = re.search(r"listening on (http://\S+)", text)
        url = match.group(1) if match else None
        match = re.search(r"DynamoDB endpoint.*: (http://\S+)", text)
        endpoint = match.group(1) if match else None
        time.sleep(0.2)
    assert url is not None and endpoint is not None, "".join(lines)
    first_run = time.monotonic() - started
    # The main job is the demo: a retried payment is answered from the stored first answer.
    payment = {"account": "acct_alice", "amount": 100, "currency": "EUR"}
    headers = {"Idempotency-Key": "fresh-clone-1"}
    first = httpx.post(f"{url}/payments", json=payment, headers=headers, timeout=30)
    again = httpx.post(f"{url}/payments", json=payment, headers=headers, timeout=30)
    assert first.status_code == 201, first.text
    assert again.status_code == 201 and again.content == first.content
    assert again.headers["idempotent-replayed"] == "true"
    # The banner's `firstwrite keys` commands, run as printed from the clone, find that payment.
    commands = [ln.strip() for ln in lines if " keys list " in ln or " keys get " in ln]
    assert commands and commands[0].startswith(".venv-run/bin/firstwrite keys list --db "), lines
    listed = subprocess.run(
        shlex.split(commands[0]), cwd=fresh_clone, capture_output=True, text=True, timeout=60
    )
    assert listed.returncode == 0, listed.stderr
    assert "fresh-clone-1" in listed.stdout and "HTTP 201 Created" in listed.stdout
    # ... and the engine's DynamoDB endpoint stays reachable for any SDK beside it.
    client = boto3.client(
        "dynamodb",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="local",
        aws_secret_access_key="local",
    )
    client.create_table(
        TableName="fresh",
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    assert "fresh" in client.list_tables()["TableNames"]
    # Only run.lock was installed: none of the development toolchain.
    run_venv = fresh_clone / ".venv-run"
    installed = {
        canonical(p.name.split("-")[0])
        for p in run_venv.glob("lib/python*/site-packages/*.dist-info")
    }
    assert {"firstwrite", "boto3", "lark", "uvicorn"} <= installed
    assert not installed & {"pytest", "moto", "mypy", "ruff", "playwright", "sybil"}
    assert not (fresh_clone / ".venv").exists()
    print(f"\nmake run, first run on a fresh clone: {first_run:.1f} s to listening")
    os.killpg(process.pid, signal.SIGTERM)
    process.wait(30)
    assert os.path.exists(fresh_clone / "firstwrite-local.db")


# -- the size benchmark ------------------------------------------------------------------------


@pytest.mark.slow
def test_the_install_size_benchmark_measures_both_packages() -> None:
    if str(REPO) not in sys.path:  # `bench` is a top-level package beside `src/`
        sys.path.insert(0, str(REPO))
    from bench import _common, install_size, report

    section = install_size.run(_common.Settings.quick_mode(), lambda _message: None)
    assert section.error is None
    with_boto3, without = section.tables
    for table in (with_boto3, without):
        assert {s.name for s in table.series} == {"firstwrite", "aws-lambda-powertools"}
        assert "\n".join(report.render_table(table)).count("| **firstwrite** |") == 1
    ours = {t.title: t.get("firstwrite").median for t in section.tables}  # type: ignore[union-attr]
    # Without boto3 the package is firstwrite alone; with it, botocore dominates.
    assert without.extra["packages"]["firstwrite"].startswith("firstwrite ")
    assert "," not in without.extra["packages"]["firstwrite"]
    assert with_boto3.extra["packages"]["firstwrite"].startswith("botocore ")
    assert 0 < ours[without.title] < ours[with_boto3.title]
    # README.md's figures are this measurement's, within 3% (they cannot drift unseen).
    quoted = install_size.readme_figures((REPO / "README.md").read_text())
    zipped = float(without.extra["zipped MB"]["firstwrite"])
    theirs = without.get("aws-lambda-powertools").median  # type: ignore[union-attr]
    measured = {"ours": ours[without.title], "zipped": zipped, "powertools": theirs}
    for name, value in measured.items():
        assert quoted[name] == pytest.approx(value, rel=0.03), (name, quoted, measured)


def test_readme_quotes_the_install_sizes_benchmarks_md_records() -> None:
    """README.md's size sentence quotes BENCHMARKS.md's "without boto3" table (2% slack for
    a rerun that moved a figure by a rounding step); the slow test above measures afresh."""
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    from bench import install_size

    quoted = install_size.readme_figures((REPO / "README.md").read_text())
    recorded = install_size.recorded_figures((REPO / "BENCHMARKS.md").read_text())
    assert set(quoted) == set(recorded) == {"ours", "zipped", "powertools"}
    for name, value in recorded.items():
        assert quoted[name] == pytest.approx(value, rel=0.02), (name, quoted, recorded)
