"""`tt-partition`: split each kernel's output tiles over a Tensix core grid.

Every strategy balances work the way tt-metal's `split_work_to_cores` does: with T tiles and
P cores, the first T mod P cores get ceil(T/P) tiles and the others floor(T/P), so no core
has more than ceil(T/P). Strategies differ in which tiles a core gets and in what order:

* row_major     tiles numbered row by row, cores taken x-major ((0,0), (0,1), ...): TileLang-
                TT's row_major partition, which reproduces its example plans exactly;
* column_major  tiles numbered column by column, cores taken y-major;
* block         tiles numbered band by band (bands of h tile rows, column by column inside a
                band), so each core gets a near-square block; h minimises the largest
                (rows + columns) a core touches; a core walks its block row by row;
* z_order       tiles numbered along a Morton (Z) curve, cores taken x-major.

`auto` (the default) asks the cost model (`targets.tt.schedule`) for the modeled time of
each strategy and keeps the fastest, the first in the order above on ties. The cores that get
work are described by as few disjoint core ranges as possible (one for the whole grid when
all cores work). The functions here are pure (shapes and grids in, work lists out), so other
targets can reuse them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from devices.tt import device_named, parse_grid
from dialects import ark, tt
from dialects.locations import source_path
from dialects.tt_kernels import TileList, kernel_buffers, kernel_geometry
from ground.diagnostics import PlancError
from targets.tt.schedule import Core, Tile, kernel_cost

STRATEGIES = ("row_major", "column_major", "block", "z_order")
ITEM_ORDER = {"row_major": "row_major", "column_major": "column_major", "block": "row_major",
              "z_order": "z_order"}
"""The `tile_order` a work item states: the order in which its core walks its tiles."""

Partition = dict[Core, Sequence[Tile]]


# ---------------------------------------------------------------------------------------------
# Pure partitioning
# ---------------------------------------------------------------------------------------------


def split_counts(total: int, parts: int) -> list[int]:
    """Tiles per part, tt-metal style: the first `total % parts` parts get one more."""
    used = min(total, parts)
    if used == 0:
        return []
    base, extra = divmod(total, used)
    return [base + 1 if i < extra else base for i in range(used)]


def core_order(grid: tuple[int, int], strategy: str) -> list[Core]:
    gx, gy = grid
    if strategy == "column_major":
        return [(x, y) for y in range(gy) for x in range(gx)]
    return [(x, y) for x in range(gx) for y in range(gy)]


def morton(io: int, jo: int) -> int:
    """Interleave the bits of jo (even positions) and io (odd): the Z-curve index."""
    code = 0
    for bit in range(max(io.bit_length(), jo.bit_length())):
        code |= ((jo >> bit) & 1) << (2 * bit) | ((io >> bit) & 1) << (2 * bit + 1)
    return code


def banded(tiles: tuple[int, int], height: int) -> list[Tile]:
    """Tiles band by band (`height` tile rows per band), column by column within a band."""
    mt, nt = tiles
    return [(io, jo) for top in range(0, mt, height) for jo in range(nt)
            for io in range(top, min(top + height, mt))]


def _chunks(sequence: Sequence[Tile], counts: Sequence[int]) -> list[list[Tile]]:
    out, start = [], 0
    for n in counts:
        out.append(list(sequence[start:start + n]))
        start += n
    return out


def _block_extent(chunks: list[list[Tile]]) -> int:
    """The largest number of distinct tile rows plus columns one core touches."""
    return max(len({t[0] for t in c}) + len({t[1] for t in c}) for c in chunks)


def tile_sequence(tiles: tuple[int, int], strategy: str, counts: Sequence[int]) -> list[Tile]:
    """All output tiles in the order the strategy hands them out."""
    mt, nt = tiles
    if strategy == "row_major":
        return [(io, jo) for io in range(mt) for jo in range(nt)]
    if strategy == "column_major":
        return [(io, jo) for jo in range(nt) for io in range(mt)]
    if strategy == "z_order":
        return sorted(((io, jo) for io in range(mt) for jo in range(nt)),
                      key=lambda t: morton(*t))
    if strategy == "block":
        best = min(range(1, mt + 1),
                   key=lambda h: (_block_extent(_chunks(banded(tiles, h), counts)), h))
        return banded(tiles, best)
    raise PlancError(f"unknown partition strategy '{strategy}' (expected one of "
                     f"{', '.join(STRATEGIES)})")


def partition_tiles(tiles: tuple[int, int], grid: tuple[int, int],
                    strategy: str) -> Partition:
    """The work list of every core that gets work, in core order."""
    counts = split_counts(tiles[0] * tiles[1], grid[0] * grid[1])
    chunks = _chunks(tile_sequence(tiles, strategy, counts), counts)
    if strategy == "block":
        chunks = [sorted(chunk) for chunk in chunks]
    return dict(zip(core_order(grid, strategy), chunks, strict=False))


# ---------------------------------------------------------------------------------------------
# The same partitions as arrays (what the pass uses)
# ---------------------------------------------------------------------------------------------
#
# A kernel of a real model has up to hundreds of thousands of output tiles (a Llama-2-7B layer
# at sequence 2048: over two million in all), and the block strategy's band height was chosen
# by listing every tile of every candidate height. Here the sequences are numpy arrays and the
# band height is decided from each core's first and last position alone; `partition_tiles`
# above stays the plain statement of the same partitions, which the tests compare with.


def _sequence_arrays(tiles: tuple[int, int], strategy: str, counts: Sequence[int]):
    """`tile_sequence` as two arrays (tile rows, tile columns)."""
    import numpy as np

    mt, nt = tiles
    index = np.arange(mt * nt, dtype=np.int64)
    if strategy == "row_major":
        return index // nt, index % nt
    if strategy == "column_major":
        return index % mt, index // mt
    if strategy == "z_order":
        io, jo = index // nt, index % nt
        code = np.zeros_like(index)
        for bit in range(max(mt - 1, nt - 1, 1).bit_length()):
            code |= ((jo >> bit) & 1) << (2 * bit) | ((io >> bit) & 1) << (2 * bit + 1)
        order = np.argsort(code, kind="stable")
        return io[order], jo[order]
    if strategy == "block":
        return _banded_arrays(tiles, block_height(tiles, counts), index)
    raise PlancError(f"unknown partition strategy '{strategy}' (expected one of "
                     f"{', '.join(STRATEGIES)})")


def _band_position(position, height, tiles: tuple[int, int]):
    """(band height, column, row within the band) of sequence positions of `banded`."""
    import numpy as np

    mt, nt = tiles
    band = position // (height * nt)
    band_height = np.minimum(height, mt - band * height)
    offset = position - band * height * nt
    return band, band_height, offset // band_height, offset % band_height


def _banded_arrays(tiles: tuple[int, int], height: int, index):
    band, band_height, column, row = _band_position(index, height, tiles)
    return band * height + row, column


def block_height(tiles: tuple[int, int], counts: Sequence[int]) -> int:
    """The band height `tile_sequence` picks for "block": the least largest (tile rows +
    tile columns) a core touches, the lowest height on ties. Each core's rows and columns
    follow from the band, column and row of its first and last tile."""
    import numpy as np

    mt, nt = tiles
    ends = np.cumsum(np.asarray(counts, dtype=np.int64))
    first, last = ends - np.asarray(counts, dtype=np.int64), ends - 1
    best, best_extent = 1, None
    for low in range(1, mt + 1, 1024):            # bounded memory for tall kernels
        h = np.arange(low, min(low + 1024, mt + 1), dtype=np.int64)[:, None]
        bs, hs, cs, rs = _band_position(first[None, :], h, tiles)
        be, he, ce, re = _band_position(last[None, :], h, tiles)
        same = bs == be
        rows_same = np.where(cs == ce, re - rs + 1,
                             np.where(ce == cs + 1, np.minimum(hs, hs - rs + re + 1), hs))
        rows_apart = (np.where(cs == nt - 1, hs - rs, hs) + (be - bs - 1) * h
                      + np.where(ce == 0, re + 1, he))
        cols_apart = np.where((be - bs >= 2) | (ce >= cs - 1), nt, nt - cs + ce + 1)
        extent = np.where(same, rows_same + ce - cs + 1, rows_apart + cols_apart).max(axis=1)
        at = int(np.argmin(extent))
        if best_extent is None or extent[at] < best_extent:
            best, best_extent = low + at, int(extent[at])
    return best


def partition_arrays(tiles: tuple[int, int], grid: tuple[int, int],
                     strategy: str) -> dict[Core, TileList]:
    """`partition_tiles`, each core's tiles as a `TileList`."""
    import numpy as np

    counts = split_counts(tiles[0] * tiles[1], grid[0] * grid[1])
    io, jo = _sequence_arrays(tiles, strategy, counts)
    work, start = {}, 0
    for core, n in zip(core_order(grid, strategy), counts, strict=False):
        cio, cjo = io[start:start + n], jo[start:start + n]
        if strategy == "block":
            order = np.argsort(cio * tiles[1] + cjo, kind="stable")
            cio, cjo = cio[order], cjo[order]
        work[core] = TileList(cio, cjo)
        start += n
    return work


SMALL_KERNEL_TILES = 4096
"""Up to this many output tiles, plain lists are cheaper than numpy arrays (whose per-call
cost dominates a kernel of a few tiles); both give the same partition."""


def partition_work(tiles: tuple[int, int], grid: tuple[int, int], strategy: str) -> Partition:
    """`partition_tiles` for small kernels, `partition_arrays` for the others."""
    if tiles[0] * tiles[1] <= SMALL_KERNEL_TILES:
        return partition_tiles(tiles, grid, strategy)
    return partition_arrays(tiles, grid, strategy)


def _work_list(items, len_k: int | None, order: str) -> tt.WorkListOp:
    if isinstance(items, TileList):
        return tt.WorkListOp(items.io, items.jo, len_k, order)
    return tt.WorkListOp([t[0] for t in items], [t[1] for t in items], len_k, order)


def active_ranges(used: int, grid: tuple[int, int],
                  strategy: str) -> list[tuple[Core, tuple[int, int]]]:
    """Disjoint (start, extent) rectangles covering the first `used` cores in core order."""
    gx, gy = grid
    if strategy == "column_major":
        full, rest = divmod(used, gx)
        ranges = [((0, 0), (gx, full))] if full else []
        return ranges + ([((0, full), (rest, 1))] if rest else [])
    full, rest = divmod(used, gy)
    ranges = [((0, 0), (full, gy))] if full else []
    return ranges + ([((full, 0), (1, rest))] if rest else [])


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


def choose_strategy(plan: tt.PlanOp, grid: tuple[int, int], device) -> str:
    """The strategy with the least modeled time for this plan's kernel (first on ties)."""
    op = plan.kernel.operator
    geometry = kernel_geometry(op)
    buffers = kernel_buffers(op)
    key = cost_key(geometry, op, buffers, grid, device)
    chosen = _CHOSEN.get(key)
    if chosen is None:
        def seconds(strategy: str) -> float:
            work = partition_work(geometry.grid_tiles, grid, strategy)
            return kernel_cost(geometry, op, work, buffers, device).seconds

        chosen = min(STRATEGIES, key=seconds)
        if len(_CHOSEN) >= MEMO_SIZE:
            _CHOSEN.clear()
        _CHOSEN[key] = chosen
    return chosen


def cost_key(geometry, op: ark.ArkOp, buffers: dict, grid: tuple[int, int], device) -> tuple:
    """Everything `kernel_cost` reads of a kernel without `in_dram` (the geometry, the
    operator's class, each buffer's data type and shape, the grid and the device), so that
    kernels of equal keys have equal modeled times for every strategy: a model repeats a
    few kernel shapes, and the four candidate partitions of each cost ~1.5 ms."""
    return (geometry, type(op), grid, device,
            tuple((name, t.data_type, tuple(t.shape_list)) for name, t in buffers.items()))


MEMO_SIZE = 4096
"""Entries kept by each memo of this pass (a model has a few distinct kernel shapes)."""
_CHOSEN: dict[tuple, str] = {}
"""The strategy `choose_strategy` chose, by `cost_key`."""
_CORES: dict[tuple, tuple] = {}
"""The cores' keys and work-list attributes `partition_plan` built, by kernel tiles, grid,
strategy and len_k (small kernels only; attributes are immutable, so plans share them)."""


def _core_attributes(tiles: tuple[int, int], grid: tuple[int, int], strategy: str,
                     len_k: int | None) -> tuple:
    """((core key, io, jo) per core that gets work, in core order; its count)."""
    key = (tiles, grid, strategy, len_k)
    found = _CORES.get(key)
    if found is not None:
        return found
    work = partition_work(tiles, grid, strategy)
    order = ITEM_ORDER[strategy]
    found = tuple((tt.CoreOp.key_of(core), _work_list(items, len_k, order).properties)
                  for core, items in work.items())
    if tiles[0] * tiles[1] <= SMALL_KERNEL_TILES:
        if len(_CORES) >= MEMO_SIZE:
            _CORES.clear()
        _CORES[key] = found
    return found


def partition_plan(plan: tt.PlanOp, grid: tuple[int, int], strategy: str, device) -> None:
    kernel = plan.kernel
    if kernel is None:
        raise PlancError("tt-partition needs plans with a tt.kernel (run tt-tile first)")
    if plan.work_partition is not None:
        return
    if strategy == "auto":
        strategy = choose_strategy(plan, grid, device)
    built = _core_attributes(kernel.grid_tiles, grid, strategy, kernel.len_k_value)
    cores = [tt.CoreOp(core, [tt.WorkListOp.with_properties(properties)])
             for core, properties in built]
    ranges = [tt.CoreRangeOp(start, extent)
              for start, extent in active_ranges(len(built), grid, strategy)]
    plan.set_grid(grid)
    block = plan.body.block
    for core_range in ranges:
        block.insert_op_before(core_range, kernel)
    block.add_op(tt.WorkPartitionOp(cores))


def _refuse_oversized(plan: tt.PlanOp, device) -> None:
    """A tensor larger than the device's DRAM cannot be placed at all (and its tiles would be
    far too many to partition): an error, before any tile is listed."""
    kernel = plan.kernel
    if kernel is None:
        return
    for op in kernel.body.block.ops:
        for value in op.results:
            tensor = value.type
            if isinstance(tensor, ark.TensorType) and tensor.span_bytes > device.dram_bytes:
                raise PlancError(f"tensor {tensor.tensor_id} {tensor.shape_list} "
                                 f"{tensor.data_type} holds {tensor.span_bytes / 1e9:.3g} GB, more "
                                 f"than the {device.dram_bytes / 1e9:.3g} GB of DRAM of "
                                 f"{device.name}", path=source_path(plan))


@dataclass(frozen=True)
class TtPartitionPass(ModulePass):
    name = "tt-partition"

    grid: str | None = None
    """GXxGY; default: the device's compute grid."""
    strategy: str = "auto"
    arch: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.strategy not in ("auto", *STRATEGIES):
            raise PlancError(f"tt-partition: unknown strategy '{self.strategy}' (expected "
                             f"auto, {', '.join(STRATEGIES)})")
        device = device_named(self.arch)
        grid = parse_grid(self.grid, device)
        for plans in [p for p in op.ops if isinstance(p, tt.PlansOp)]:
            for plan in plans.plans():
                _refuse_oversized(plan, device)
                partition_plan(plan, grid, self.strategy, device)
