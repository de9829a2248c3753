"""Installed size of a Lambda deployment package: firstwrite's core against Powertools'.

A deployment package is what ``pip install --target package/ ...`` puts in a directory, zipped.
Both contenders are installed from the pins of ``requirements/dev.lock`` (hashes checked), each
with the requirements its idempotency needs and nothing else:

- firstwrite: the core (``pip install firstwrite``: boto3 and what boto3 needs), built from this
  checkout;
- aws-lambda-powertools: its core requirements plus boto3, which its DynamoDB persistence layer
  needs (Powertools' ``aws-sdk`` extra).

Lambda's Python runtime ships boto3 and botocore, so the package may leave them out: each size is
reported with boto3's requirement closure and without it. Sizes are deterministic (one
measurement): files as the wheels ship them (``--no-compile``: no bytecode), and the zip at
zlib's default level, as ``zip -r`` makes it. Lambda's limits: 250 MB unzipped, 50 MB zipped
for a direct upload.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement

from ._common import REPO, Section, Series, Settings, Table, scratch_dir

OURS = "firstwrite"
POWERTOOLS = "aws-lambda-powertools"
LOCK = REPO / "requirements" / "dev.lock"
MB = 1e6

_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==\S+")


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_closure(roots: Iterable[str]) -> set[str]:
    """``roots`` and everything they require (no extras), from the installed metadata."""
    seen: set[str] = set()
    todo = [canonical(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for line in metadata.requires(name) or ():
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(canonical(requirement.name))
    return seen


def core_requirements() -> list[str]:
    """firstwrite's core requirements, from pyproject.toml (not the installed metadata)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return [Requirement(r).name for r in project["dependencies"]]


def locked(names: Iterable[str], lock: Path = LOCK) -> str:
    """The lock's entries (pin and hashes) for ``names``, as a requirements file."""
    entries: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in lock.read_text().splitlines():
        pin = _PIN.match(line)
        if pin is not None:
            current = entries.setdefault(canonical(pin.group(1)), [])
        elif not line.startswith("    --hash"):
            current = None
            continue
        if current is not None:
            current.append(line)
    wanted = sorted(set(names))
    missing = [name for name in wanted if name not in entries]
    if missing:
        raise LookupError(f"not pinned in {lock.name}: {missing}")
    return "\n".join("\n".join(entries[name]) for name in wanted) + "\n"


def _pip(*args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--quiet", *args],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip install {' '.join(args)}: {done.stderr[-2000:]}")


def _checkout_copy(into: Path) -> Path:
    """The files a wheel of this checkout is built from (so the build leaves no trace here)."""
    into.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, into / name)
    shutil.copytree(
        REPO / "src", into / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    return into


def installed_files(target: Path) -> dict[str, list[Path]]:
    """Distribution name -> its files in a ``--target`` directory (from each RECORD)."""
    files: dict[str, list[Path]] = {}
    for dist_info in target.glob("*.dist-info"):
        name = canonical(dist_info.name.removesuffix(".dist-info").rsplit("-", 1)[0])
        record = (dist_info / "RECORD").read_text().splitlines()
        paths = [target / line.rsplit(",", 2)[0] for line in record if line.strip()]
        files[name] = [path for path in paths if path.is_file()]
    return files


def zipped_size(files: Iterable[Path], root: Path, scratch: Path) -> int:
    archive = scratch / "package.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(files):
            zf.write(path, path.relative_to(root))
    size = archive.stat().st_size
    archive.unlink()
    return size


def run(settings: Settings, log: Callable[[str], None]) -> Section:
    del settings  # sizes are deterministic: one measurement whatever the mode
    boto3 = requirement_closure(["boto3"])
    contenders = {
        OURS: requirement_closure(core_requirements()) | {OURS},
        POWERTOOLS: requirement_closure([POWERTOOLS, "boto3"]),
    }
    method = [
        "`pip install --target DIR --no-deps --no-compile --require-hashes` of the pins in "
        "requirements/dev.lock, plus this checkout's firstwrite wheel (`--no-deps`).",
        f"{OURS}: the core, `pip install firstwrite` "
        f"({', '.join(sorted(contenders[OURS] - {OURS}))}).",
        f"{POWERTOOLS}: its core requirements plus boto3, which its DynamoDB idempotency store "
        f"needs ({', '.join(sorted(contenders[POWERTOOLS] - {POWERTOOLS}))}).",
        f"Without boto3: both minus boto3's closure ({', '.join(sorted(boto3))}), which Lambda's "
        "Python runtime provides.",
        "Unzipped: the files as the wheels ship them (no bytecode). Zipped: deflate at zlib's "
        "default level, as `zip -r`. Lambda's limits: 250 MB unzipped, 50 MB zipped.",
    ]
    with scratch_dir("install-size-") as scratch:
        target = scratch / "package"
        requirements = scratch / "requirements.txt"
        requirements.write_text(locked(set().union(*contenders.values()) - {OURS}))
        log(f"    pip install --target: {len(requirements.read_text().splitlines())} lock lines")
        common = ["--target", str(target), "--no-deps", "--no-compile"]
        _pip(*common, "--require-hashes", "-r", str(requirements))
        _pip(*common, str(_checkout_copy(scratch / "checkout")))
        files = installed_files(target)
        missing = set().union(*contenders.values()) - set(files)
        if missing:
            raise RuntimeError(f"not installed: {missing}")
        sizes = {name: sum(p.stat().st_size for p in paths) for name, paths in files.items()}

        tables = []
        for title, leave_out in (
            ("Deployment package with boto3", set()),
            ("Deployment package without boto3 (the Lambda runtime's)", boto3),
        ):
            series, extra = [], {"zipped MB": {}, "files": {}, "packages": {}}
            for name, dists in contenders.items():
                shipped = sorted(dists - leave_out)
                paths = [p for d in shipped for p in files[d]]
                total = sum(sizes[d] for d in shipped)
                series.append(Series(name, [total / MB], unit="MB"))
                extra["zipped MB"][name] = f"{zipped_size(paths, target, scratch) / MB:.2f}"
                extra["files"][name] = f"{len(paths):,}"
                extra["packages"][name] = ", ".join(
                    f"{d} {sizes[d] / MB:.2f}" for d in sorted(shipped, key=lambda d: -sizes[d])
                )
                log(f"    {title}: {name} {total / MB:.2f} MB")
            notes = ["Sizes in MB (10^6 bytes); `packages` lists each distribution's unzipped MB."]
            tables.append(Table(title, series, ours=[OURS], extra=extra, notes=notes))
    return Section("install_size", "Installed size: a Lambda deployment package", method, tables)


# -- the figures README.md quotes ---------------------------------------------------------------

#: README.md's sentence on the core's size, with the figures of the "without boto3" table.
README_FIGURES = re.compile(
    r"adds\s+(?P<ours>\d+\.\d\d) MB\s+\((?P<zipped>\d+\.\d\d) MB\s+zipped;\s+Powertools'\s+"
    r"idempotency:\s+(?P<powertools>\d+\.\d\d) MB\)"
)
WITHOUT_BOTO3 = "Deployment package without boto3"


def readme_figures(readme: str) -> dict[str, float]:
    """The sizes README.md quotes: firstwrite's core and its zip, and Powertools', in MB."""
    found = README_FIGURES.search(readme)
    if found is None:
        raise LookupError("README.md no longer quotes the install size as this expects")
    return {name: float(value) for name, value in found.groupdict().items()}


def recorded_figures(benchmarks: str) -> dict[str, float]:
    """The same sizes as BENCHMARKS.md records them (its "without boto3" table)."""
    section = benchmarks[benchmarks.index(f"#### {WITHOUT_BOTO3}") :]
    rows = {}
    for line in section.splitlines()[1:]:
        if line.startswith("#"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) > 4 and cells[0].strip("*") in (OURS, POWERTOOLS):
            rows[cells[0].strip("*")] = cells
    ours, powertools = rows[OURS], rows[POWERTOOLS]
    return {"ours": float(ours[1]), "zipped": float(ours[4]), "powertools": float(powertools[1])}
