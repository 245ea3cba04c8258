"""The split-K search of `sched-partition`: the cuts it considers, checked against the rules
they must keep on generated problem sizes, and the cost-model estimate it decides with
checked against the whole-plan cost model."""

from __future__ import annotations

import math
import random

import pytest

from devices.hardware import gpu_device
from passes.sched_partition import MAX_PARTS, k_parts, split_shapes
from targets.ark.cost_model import kernel_estimate


def _cases(n: int, seed: int = 13):
    rng = random.Random(seed)
    for _ in range(n):
        step = rng.choice((16, 32, 64))
        yield rng.randint(1, 200) * step + rng.choice((0, 0, rng.randint(1, step - 1))), step


@pytest.mark.parametrize("rounding", [round, math.floor])
def test_k_parts_cover_k_in_whole_steps_in_proportion(rounding):
    rng = random.Random(3)
    for depth, step in _cases(300):
        weights = [1.0] * rng.randint(1, 6) + [1 / rng.randint(1, 5)] * rng.randint(0, 1)
        parts = k_parts(depth, step, weights, rounding)
        if parts is None:
            assert depth // step < len(weights)
            continue
        assert depth // step >= len(weights)
        assert len(parts) == len(weights)
        assert sum(parts) == depth
        assert all(p > 0 for p in parts)
        assert all(p % step == 0 for p in parts[1:])
        # Brute force: every part within two steps of its exact share.
        exact = [depth // step * step * w / sum(weights) for w in weights]
        assert all(abs(p - e) <= 2 * step for p, e in zip(parts[1:], exact[1:], strict=True))
        assert abs(parts[0] - exact[0]) <= 2 * step * len(weights) + step


def test_split_shapes_fit_the_device_and_run_each_part_in_one_wave():
    rng = random.Random(5)
    for _ in range(300):
        processors, slots = rng.choice((108, 132, 304, 7)), rng.randint(1, 4)
        tiles, limit = rng.randint(1, processors), rng.randint(2, MAX_PARTS)
        shapes = list(split_shapes(tiles, slots, processors, limit))
        for ranges, weights in shapes:
            assert 2 <= len(ranges) <= limit and len(weights) == len(ranges)
            assert sum(ranges) <= processors and min(ranges) >= 1
            full = [r for r, w in zip(ranges, weights, strict=True) if w == 1.0]
            assert full and all(r * slots >= tiles for r in full)
        if 2 * tiles <= processors:
            # Two one-tile-per-processor parts always fit, so they are considered.
            assert ([tiles, tiles], [1.0, 1.0]) in shapes


@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
def test_busy_processors_only_slow_a_kernel_down(arch):
    """Sharing the bandwidth with concurrent kernels never makes a kernel faster, and a
    kernel alone is as fast as when it counts only itself."""
    from dialects import ark
    from frontends.model_builder import ModelBuilder
    from passes.sched_tile import choose_tiling

    device = gpu_device(arch)
    m = ModelBuilder()
    m.matmul(m.tensor([1, 64, 4096]), m.tensor([128, 4096]), transpose_other=True)
    module = m.finish()
    (mm,) = [op for op in module.walk() if isinstance(op, ark.MatmulOp)]
    tiling = choose_tiling("matmul", [mm], device)
    estimate = kernel_estimate([mm], tiling.configs, tiling.tiles, tiling.warps, 1, device)
    for processors in (1, 7, tiling.tiles):
        alone = estimate.on(processors)
        assert estimate.on(processors, None) == alone
        times = [estimate.on(processors, busy) for busy in (1, processors, device.processors)]
        assert times[0] == times[1] == alone
        assert times[2] >= alone
