"""The ``fast`` hypothesis profile of ``make test-fast`` scales every property test's count."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypothesis_budget import FAST_PROFILE, SUITE_PROFILE, examples


@pytest.fixture
def profile() -> Iterator[None]:
    """Whatever profile a test loads, the run's own is back afterwards."""
    before = settings.get_current_profile_name()
    yield
    settings.load_profile(before)


def test_the_default_profile_keeps_each_count_and_fast_takes_a_fifth(profile: None) -> None:
    settings.load_profile("default")
    assert [examples(n) for n in (5, 40, 150, 600)] == [5, 40, 150, 600]
    assert settings().max_examples == 100
    settings.load_profile(FAST_PROFILE)
    assert [examples(n) for n in (5, 40, 150, 600)] == [5, 10, 30, 120]
    assert settings().max_examples == 20


def test_a_property_test_under_fast_draws_the_scaled_count(profile: None) -> None:
    settings.load_profile(FAST_PROFILE)
    drawn: list[int] = []

    @settings(max_examples=examples(150), database=None)
    @given(st.integers())
    def prop(n: int) -> None:
        drawn.append(n)

    prop()
    assert 1 < len(drawn) <= 30


def test_make_test_fast_selects_the_profile_and_make_test_does_not() -> None:
    makefile = (Path(__file__).parents[1] / "Makefile").read_text()
    fast = makefile.split("\ntest-fast:", 1)[1].split("\n\n", 1)[0]
    full = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert f"--hypothesis-profile={FAST_PROFILE}" in fast
    assert "--hypothesis-profile" not in full


def test_the_suite_runs_without_deadlines_under_either_profile(profile: None) -> None:
    # Loaded by tests/conftest.py unless --hypothesis-profile chose another (make test-fast).
    assert settings.get_current_profile_name() in (SUITE_PROFILE, FAST_PROFILE)
    assert settings().deadline is None
    for name in (SUITE_PROFILE, FAST_PROFILE):
        settings.load_profile(name)
        assert settings().deadline is None
    assert settings().max_examples == 20  # fast keeps its count under the suite's settings
