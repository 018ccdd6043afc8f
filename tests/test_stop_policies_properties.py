"""Stop conditions (gates.policies), properties (hypothesis): loop detection fires
exactly on a periodic tail no longer than its window, and never on distinct names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engine import LoopDetected
from gates.policies import LoopDetection, RunStats

names = st.sampled_from(["a", "b", "c", "d", "e"])


@given(
    unit=st.lists(names, min_size=1, max_size=4),
    window=st.integers(min_value=1, max_value=6),
    prefix=st.lists(names, max_size=5),
)
def test_loop_detection_fires_on_any_repeated_unit_no_longer_than_the_window(
    unit: list[str], window: int, prefix: list[str]
) -> None:
    if len(unit) > window:
        return
    repeats = (2 * window) // len(unit) + 1
    history = prefix + unit * repeats
    decision = LoopDetection(window).evaluate(RunStats(invocation_history=history))
    assert decision is not None and isinstance(decision.reason, LoopDetected)
    pattern = decision.reason.pattern
    assert len(pattern) <= len(unit)
    assert len(unit) % len(pattern) == 0  # the shortest period divides the unit's length


@given(window=st.integers(min_value=1, max_value=8), length=st.integers(min_value=0, max_value=80))
def test_loop_detection_never_fires_on_distinct_names(window: int, length: int) -> None:
    history = [f"s{i}" for i in range(length)]
    assert LoopDetection(window).evaluate(RunStats(invocation_history=history)) is None


@given(history=st.lists(names, max_size=30), window=st.integers(min_value=1, max_value=6))
def test_loop_detection_fires_exactly_when_the_tail_is_periodic(
    history: list[str], window: int
) -> None:
    tail = history[-2 * window :]
    periodic = len(history) >= 2 * window and any(
        all(tail[i] == tail[i + p] for i in range(len(tail) - p)) for p in range(1, window + 1)
    )
    decision = LoopDetection(window).evaluate(RunStats(invocation_history=history))
    assert (decision is not None) == periodic
