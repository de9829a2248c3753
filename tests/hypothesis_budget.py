"""How many examples a property test draws: its own count, or a fifth of it under ``fast``.

``make test-fast`` (the pre-commit loop) runs with ``--hypothesis-profile=fast``
(tests/conftest.py registers it); ``make test`` and CI run the default profile, so every
property keeps its full count there. A test that sets ``max_examples`` itself overrides any
profile, so it passes its count through :func:`examples` instead: the profile then scales it.

Both profiles turn hypothesis's per-example deadline (200 ms) off: an example that happens to
meet a GC pause or a busy core is not an error ("Flaky", "DeadlineExceeded"); a property about
time says so in its own assertion. tests/conftest.py registers them and loads ``suite``
(``--hypothesis-profile`` chooses another).
"""

from __future__ import annotations

from hypothesis import settings

SUITE_PROFILE = "suite"  # what `make test` and CI run: hypothesis's defaults, no deadline
FAST_PROFILE = "fast"
FAST_SHARE = 5  # the fast loop draws one example in five...
FAST_FLOOR = 10  # ...and never fewer than this


def examples(count: int) -> int:
    """``count`` under the default profile; a fifth of it (at least 10) under ``fast``."""
    if settings.get_current_profile_name() == FAST_PROFILE:
        return min(count, max(FAST_FLOOR, count // FAST_SHARE))
    return count
