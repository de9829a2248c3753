"""npm packages the tests need (the JavaScript SDK, dynalite), installed from their lock files.

``npm_ci(folder)`` runs ``npm ci`` in ``folder`` once per lock file, under a file lock, so that
workers (or two runs) that reach it together neither install over each other nor use a
half-installed tree. Each folder's ``node_modules`` and lock are gitignored.
"""

from __future__ import annotations

import fcntl
import hashlib
import subprocess
from pathlib import Path


def npm_ci(folder: Path) -> Path:
    """``folder``'s ``node_modules``, installed as its ``package-lock.json`` says."""
    wanted = hashlib.sha256((folder / "package-lock.json").read_bytes()).hexdigest()
    stamp = folder / "node_modules" / ".installed-from"
    with (folder / ".npm-ci.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not stamp.exists() or stamp.read_text() != wanted:
            done = subprocess.run(
                ["npm", "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=600,
            )
            assert done.returncode == 0, done.stderr[-2000:]
            stamp.write_text(wanted)
    return folder / "node_modules"
