"""``python -m firstwrite.demo``: ``firstwrite demo`` by another name.

Its options, its one-line errors and exit statuses: :mod:`firstwrite.cli.demo`."""

from __future__ import annotations

import sys

from firstwrite.cli import main

if __name__ == "__main__":
    sys.exit(main(["demo", *sys.argv[1:]]))
