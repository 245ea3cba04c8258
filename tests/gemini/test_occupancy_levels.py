"""`Occupancy.levels` (every position's use in one descent, for gemini-dram-order's minimum
check) must equal `peak(p, p)` at every position, and a brute-force sweep of the intervals."""

from __future__ import annotations

import random

import pytest

from passes.gemini_dram_order import Occupancy
from tests.gemini.test_l2_quality import random_intervals


@pytest.mark.parametrize("seed", range(40))
def test_levels_equal_point_peaks(seed):
    rng = random.Random(seed)
    positions = rng.randrange(1, 70)
    occupancy = Occupancy(10 ** 9, positions)
    live = [0] * positions
    for first, last, size in random_intervals(rng, rng.randrange(0, 60), positions):
        occupancy.add(first, last, size)
        for p in range(first, last + 1):
            live[p] += size
        levels = occupancy.levels()
        assert levels == [occupancy.peak(p, p) for p in range(positions)] == live


class RecursiveOccupancy:
    """The recursive segment tree `Occupancy` was (the reference for the bottom-up one)."""

    def __init__(self, capacity: float, positions: int):
        self.capacity = capacity
        self.size = max(1, positions)
        self._max = [0.0] * (4 * self.size)
        self._add = [0.0] * (4 * self.size)

    def _update(self, node, lo, hi, first, last, size):
        if last < lo or hi < first:
            return
        if first <= lo and hi <= last:
            self._max[node] += size
            self._add[node] += size
            return
        mid = (lo + hi) // 2
        self._update(2 * node, lo, mid, first, last, size)
        self._update(2 * node + 1, mid + 1, hi, first, last, size)
        self._max[node] = self._add[node] + max(self._max[2 * node], self._max[2 * node + 1])

    def _query(self, node, lo, hi, first, last):
        if last < lo or hi < first:
            return float("-inf")
        if first <= lo and hi <= last:
            return self._max[node]
        mid = (lo + hi) // 2
        return self._add[node] + max(self._query(2 * node, lo, mid, first, last),
                                     self._query(2 * node + 1, mid + 1, hi, first, last))

    def peak(self, first, last):
        return self._query(1, 0, self.size - 1, first, last)

    def add(self, first, last, size):
        self._update(1, 0, self.size - 1, first, last, size)


@pytest.mark.parametrize("seed", range(40))
def test_bottom_up_tree_equals_the_recursive_one(seed):
    """Any spans (empty, reaching past either end), sizes in quarters (sums stay exact)."""
    rng = random.Random(seed)
    positions = rng.randrange(0, 70)
    fast, slow = Occupancy(500.0, positions), RecursiveOccupancy(500.0, positions)
    for _ in range(rng.randrange(1, 120)):
        first = rng.randrange(-3, positions + 3)
        last = rng.randrange(first - 2, positions + 4)
        if rng.random() < 0.5:
            size = rng.randrange(1, 400) / 4
            fast.add(first, last, size)
            slow.add(first, last, size)
        assert fast.peak(first, last) == slow.peak(first, last)
        assert fast.fits(first, last, 60.0) == (slow.peak(first, last) + 60.0 <= 500.0)
    assert fast.levels() == [slow.peak(p, p) for p in range(max(1, positions))]


@pytest.mark.parametrize("seed", range(40))
def test_additions_before_any_question_equal_the_recursive_tree(seed):
    """Spans added before the first question are built into the tree at once (a running sum
    of differences); later additions and questions go through the tree."""
    rng = random.Random(seed)
    positions = rng.randrange(0, 70)
    fast, slow = Occupancy(500.0, positions), RecursiveOccupancy(500.0, positions)

    def spans(count):
        for _ in range(count):
            first = rng.randrange(-3, positions + 3)
            yield first, rng.randrange(first - 2, positions + 4), rng.randrange(1, 400) / 4

    for first, last, size in spans(rng.randrange(0, 200)):
        fast.add(first, last, size)
        slow.add(first, last, size)
    if rng.random() < 0.5:
        assert fast.levels() == [slow.peak(p, p) for p in range(max(1, positions))]
    for first, last, size in spans(rng.randrange(0, 60)):
        assert fast.peak(first, last) == slow.peak(first, last)
        fast.add(first, last, size)
        slow.add(first, last, size)
    assert fast.levels() == [slow.peak(p, p) for p in range(max(1, positions))]
    assert all(fast.peak(a, b) == slow.peak(a, b)
               for a in range(-1, positions + 1) for b in range(a - 1, positions + 1))
