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
