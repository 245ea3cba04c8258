"""Partition strategies, placement and the cost model, as pure functions over shapes."""

from __future__ import annotations

import itertools
import math

import pytest

from backends.tt_plan import document_json
from devices.tt import device_named, parse_grid
from dialects.tt_kernels import kernel_buffers, kernel_geometry
from frontends.model_builder import ModelBuilder
from ground.diagnostics import UsageError
from passes.tt_partition import (
    STRATEGIES,
    active_ranges,
    core_order,
    morton,
    partition_tiles,
    split_counts,
)
from passes.tt_place import BufferUse, place_buffers
from tests.tt.fixtures import lower, matmul_model

SHAPES = [(1, 1), (1, 7), (5, 1), (4, 4), (3, 10), (8, 88), (13, 6)]
GRIDS = [(1, 1), (2, 2), (4, 4), (3, 5), (8, 8)]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_tile_once_and_work_balanced(strategy):
    for tiles, grid in itertools.product(SHAPES, GRIDS):
        work = partition_tiles(tiles, grid, strategy)
        assigned = [t for items in work.values() for t in items]
        expected = {(i, j) for i in range(tiles[0]) for j in range(tiles[1])}
        assert sorted(assigned) == sorted(expected), (tiles, grid)
        counts = [len(items) for items in work.values()]
        total, cores = tiles[0] * tiles[1], grid[0] * grid[1]
        assert max(counts) == math.ceil(total / cores), (tiles, grid)
        assert max(counts) - min(counts) <= 1
        assert len(work) == min(total, cores)
        assert all(0 <= x < grid[0] and 0 <= y < grid[1] for x, y in work)


def test_split_counts_follow_split_work_to_cores():
    assert split_counts(10, 4) == [3, 3, 2, 2]
    assert split_counts(3, 8) == [1, 1, 1]
    assert split_counts(16, 16) == [1] * 16
    assert split_counts(0, 4) == []


def test_core_orders():
    assert core_order((2, 3), "row_major") == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]
    assert core_order((2, 3), "column_major") == [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2),
                                                  (1, 2)]


def test_strategies_hand_out_the_tiles_they_promise():
    # 4x4 tiles over 4 cores: 4 tiles each.
    assert partition_tiles((4, 4), (2, 2), "row_major")[(0, 0)] == [(0, 0), (0, 1), (0, 2),
                                                                    (0, 3)]
    assert partition_tiles((4, 4), (2, 2), "column_major")[(0, 0)] == [(0, 0), (1, 0), (2, 0),
                                                                       (3, 0)]
    assert partition_tiles((4, 4), (2, 2), "block")[(0, 1)] == [(0, 2), (0, 3), (1, 2), (1, 3)]
    assert partition_tiles((4, 4), (2, 2), "z_order")[(1, 1)] == [(2, 2), (2, 3), (3, 2),
                                                                  (3, 3)]


def test_morton_interleaves_columns_then_rows():
    order = sorted(((i, j) for i in range(2) for j in range(4)), key=lambda t: morton(*t))
    assert order == [(0, 0), (0, 1), (1, 0), (1, 1), (0, 2), (0, 3), (1, 2), (1, 3)]


def test_block_cores_touch_fewer_rows_and_columns():
    def extent(work):
        return max(len({t[0] for t in w}) + len({t[1] for t in w}) for w in work.values())
    assert extent(partition_tiles((8, 8), (4, 4), "block")) == 4      # 2x2 blocks
    assert extent(partition_tiles((8, 8), (4, 4), "row_major")) == 5  # 1x4 strips


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_active_ranges_cover_exactly_the_working_cores(strategy):
    for used, grid in [(1, (4, 4)), (5, (4, 4)), (16, (4, 4)), (7, (3, 5)), (15, (3, 5))]:
        ranges = active_ranges(used, grid, strategy)
        cores = [(sx + x, sy + y) for (sx, sy), (ex, ey) in ranges
                 for x in range(ex) for y in range(ey)]
        assert sorted(cores) == sorted(core_order(grid, strategy)[:used])
        assert len(ranges) <= 2
    assert active_ranges(16, (4, 4), strategy) == [((0, 0), (4, 4))]


def _chosen(m: int, k: int, n: int, grid: tuple[int, int]) -> str:
    from passes.tt_partition import choose_strategy
    plan = lower(matmul_model(m, k, n), "tt-tile").ops.first.plans()[0]
    return choose_strategy(plan, grid, device_named(None))


def test_auto_picks_the_cheapest_strategy():
    """Cores keep one operand's K strip while consecutive tiles share it. 8x8 output tiles on
    4x4 cores: row_major gives each core 4 tiles of one row (1 A strip + 4 B strips),
    column_major 4 of one column (the same), block a 2x2 block (2 + 4): the tie keeps
    row_major. 16x2 tiles on 2x2 cores: a row_major core gets 4 rows of 2 tiles (4 + 8),
    a column_major core 8 tiles of one column (1 + 8): column_major wins."""
    assert _chosen(256, 1024, 256, (4, 4)) == "row_major"
    assert _chosen(512, 1024, 64, (2, 2)) == "column_major"


def _kernel(m: int, k: int, n: int, **kw):
    from dialects.tt_kernels import kernel_buffers, kernel_geometry
    op = lower(matmul_model(m, k, n, **kw), "tt-tile").ops.first.plans()[0].kernel.operator
    return kernel_geometry(op), kernel_buffers(op), op


def test_strips_too_large_for_l1_are_streamed():
    from targets.tt.schedule import held_operand
    work = {(0, 0): [(0, 0), (0, 1)]}
    device = device_named(None)
    geometry, buffers, _ = _kernel(64, 256, 64)
    assert held_operand(work, geometry, buffers, device) == "A"
    huge_k = device.l1_usable_bytes // 2048  # a strip of all of L1
    geometry, buffers, _ = _kernel(64, 32 * huge_k, 64)
    assert held_operand(work, geometry, buffers, device) is None


def test_a_batched_b_strip_belongs_to_its_batch():
    """Output tiles (0, 0) and (1, 0) of a batched matmul share B's column 0 only when B is
    broadcast over the batch; with B batched they need different strips."""
    from targets.tt.schedule import held_operand, strip_index
    b = ModelBuilder()
    b.matmul(b.tensor([2, 32, 64]), b.tensor([2, 64, 32]))
    op = lower(b.finish(), "tt-tile").ops.first.plans()[0].kernel.operator
    geometry, buffers = kernel_geometry(op), kernel_buffers(op)
    assert [strip_index(geometry, buffers, "B")(t) for t in [(0, 0), (1, 0)]] == [0, 1]
    work = {(0, 0): [(0, 0), (1, 0)]}
    assert held_operand(work, geometry, buffers, device_named(None)) == "A"
    geometry, buffers, _ = _kernel(64, 64, 32)  # 2x1 tiles, B shared: one B strip
    assert held_operand(work, geometry, buffers, device_named(None)) == "B"


def test_cost_model_counts_held_strips():
    from dialects.tt_kernels import kernel_buffers, kernel_geometry
    from targets.tt.schedule import core_traffic
    module = lower(matmul_model(128, 256, 128), "tt-tile")
    op = module.ops.first.plans()[0].kernel.operator
    geometry = kernel_geometry(op)  # 4x4 tiles, Kt = 8
    items = [(0, 0), (0, 1), (1, 0), (1, 1)]
    assert core_traffic(geometry, op, items, "A").reads == {"A": 16, "B": 32}
    assert core_traffic(geometry, op, items, "B").reads == {"A": 32, "B": 32}
    assert core_traffic(geometry, op, items, None).reads == {"A": 32, "B": 32}
    assert kernel_buffers(op).keys() == {"A", "B", "C"}


def test_place_buffers_by_traffic_and_live_range():
    # Budgets of 4 KiB per bank, 2 banks; pages of 1 KiB.
    hot = BufferUse(0, pages=4, page_bytes=1024, first=0, last=1, traffic_bytes=40960)
    cold = BufferUse(1, pages=4, page_bytes=1024, first=0, last=0, traffic_bytes=1024)
    late = BufferUse(2, pages=4, page_bytes=1024, first=1, last=1, traffic_bytes=4096)
    big = BufferUse(3, pages=100, page_bytes=1024, first=0, last=0, traffic_bytes=10 ** 6)
    assert place_buffers([hot, cold, late, big], [4096, 4096], banks=2) == {0, 1, 2}
    assert place_buffers([hot, cold, late, big], [2048, 4096], banks=2) == {0, 2}


def test_large_buffers_go_to_dram():
    """A 32x8192 x 8192x8192 FP32 matmul: the 256 MiB weight cannot live in 64 cores' L1;
    the small activation and output can."""
    module = lower(matmul_model(32, 8192, 8192, "FP32"),
                   "tt-tile,tt-partition{grid=8x8 strategy=row_major},tt-place")
    layouts = document_json(module)["layouts"]
    assert {name: layout["shard"] for name, layout in layouts.items()} == {
        "A": "L1", "B": "DRAM", "C": "L1"}


def test_grid_flag_is_checked_against_the_device():
    device = device_named("wormhole_b0")
    assert parse_grid("4x2", device) == (4, 2)
    assert parse_grid(None, device_named("blackhole")) == (13, 10)
    for text, message in [("9x1", "does not fit the wormhole_b0 compute grid 8x8"),
                          ("8", "expected GXxGY"), ("0x4", "expected GXxGY")]:
        with pytest.raises(UsageError, match=message):
            parse_grid(text, device)
    with pytest.raises(UsageError, match="unknown Tenstorrent device 'a100'"):
        device_named("a100")
