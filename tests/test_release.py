"""The release check: the wheel and the sdist build, carry the package's files and metadata,
install into a clean virtualenv, and every public module imports from the installed copy.

Built as a release is built (PEP 517, setuptools from the build requirements, in a virtualenv
of its own, from a copy of the committed files). Each artifact is installed ``--no-deps`` into a
fresh virtualenv, which then sees the development virtualenv's third-party packages through a
path entry (not its ``.pth`` files, so not its editable firstwrite): the imports run the
installed files, and nothing is downloaded but the build backend (pip's cache, else PyPI).
"""

from __future__ import annotations

import email
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import venv
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SRC = REPO / "src" / "firstwrite"

pytestmark = pytest.mark.slow  # builds, two virtualenvs, two installs: about a minute

#: Files a wheel must carry besides the modules (pyproject's package-data).
DATA = ("py.typed", "engine/expressions/grammar.lark", "console/templates/base.html")

BUILD = """
import sys
from setuptools import build_meta
out = sys.argv[1]
sdist = build_meta.build_sdist(out)
wheel = build_meta.build_wheel(out)
print(sdist, wheel)
"""

IMPORT_ALL = """
import importlib, json, pkgutil, sys
import firstwrite
names = ["firstwrite"] + [
    m.name for m in pkgutil.walk_packages(firstwrite.__path__, "firstwrite.")
    if not any(part.startswith("_") for part in m.name.split("."))
]
for name in names:
    importlib.import_module(name)
from importlib.metadata import version
print(json.dumps({"file": firstwrite.__file__, "modules": names, "version": version("firstwrite")}))
"""


def _run(*args: str | Path, cwd: Path | None = None) -> str:
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{args}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
    return done.stdout


def _public_modules() -> set[str]:
    names = {"firstwrite"}
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if not any(part.startswith("_") for part in parts[1:]):
            names.add(".".join(parts))
    return names


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist and the wheel, built from the committed tree (``git archive HEAD``)."""
    base = tmp_path_factory.mktemp("release")
    tree = base / "tree"
    tree.mkdir()
    archive = subprocess.run(
        ["git", "archive", "HEAD"], cwd=REPO, capture_output=True, timeout=120, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True, timeout=120)
    requires = tomllib.loads((tree / "pyproject.toml").read_text())["build-system"]["requires"]
    builder = base / "builder"
    venv.create(builder, with_pip=True)
    python = builder / "bin" / "python"
    _run(python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requires)
    out = base / "dist"
    out.mkdir()
    sdist, wheel = _run(python, "-c", BUILD, out, cwd=tree).splitlines()[-1].split()
    return {"sdist": out / sdist, "wheel": out / wheel}


def _clean_venv(where: Path) -> Path:
    venv.create(where, with_pip=True)
    python = where / "bin" / "python"
    site = _run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").strip()
    # The development virtualenv's third-party packages, as a plain path entry: its .pth files
    # (the editable install of this checkout among them) are not run.
    (Path(site) / "zz_dev_packages.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_installs_clean_and_every_public_module_imports(
    kind: str, artifacts: dict[str, Path], tmp_path: Path
) -> None:
    python = _clean_venv(tmp_path / "venv")
    _run(
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
        "--no-deps",
        artifacts[kind],
    )
    report = _run(python, "-c", IMPORT_ALL, cwd=tmp_path)
    import json

    seen = json.loads(report)
    assert seen["file"].startswith(str(tmp_path / "venv")), seen["file"]  # the installed copy
    assert set(seen["modules"]) == _public_modules()
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert seen["version"] == project["version"]
    firstwrite_script = tmp_path / "venv" / "bin" / "firstwrite"
    assert "usage: firstwrite" in _run(firstwrite_script, "--help")


def test_the_wheel_carries_its_data_and_complete_metadata(artifacts: dict[str, Path]) -> None:
    with zipfile.ZipFile(artifacts["wheel"]) as wheel:
        names = set(wheel.namelist())
        meta_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = email.message_from_bytes(wheel.read(meta_name))
        entry_points = wheel.read(meta_name.replace("METADATA", "entry_points.txt")).decode()
    for data in DATA:
        assert f"firstwrite/{data}" in names
    assert any(n.startswith("firstwrite/console/static/") for n in names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    classifiers = metadata.get_all("Classifier") or []
    assert set(project["classifiers"]) == set(classifiers) and "Typing :: Typed" in classifiers
    urls = {value.split(",", 1)[0] for value in metadata.get_all("Project-URL") or []}
    assert {"Homepage", "Documentation", "Changelog", "Issues", "Source"} <= urls
    assert set(metadata["Keywords"].split(",")) == set(project["keywords"])
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Requires-Python"] == ">=3.11"
    extras = set(metadata.get_all("Provides-Extra") or [])
    assert extras == set(project["optional-dependencies"])
    assert "firstwrite = firstwrite.cli:main" in entry_points
    assert "firstwrite = firstwrite.testing.plugin" in entry_points  # the pytest plugin


def test_the_sdist_carries_what_a_build_from_it_needs(artifacts: dict[str, Path]) -> None:
    with tarfile.open(artifacts["sdist"]) as sdist:
        names = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    assert {"pyproject.toml", "README.md", "LICENSE"} <= names
    for data in DATA:
        assert f"src/firstwrite/{data}" in names
    assert sys.version_info >= (3, 11)
