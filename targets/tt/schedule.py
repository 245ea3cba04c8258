"""What a scheduled Tenstorrent kernel costs: its circular buffers, tile traffic and modeled time.

One place answers, for a kernel and the work list of every core:

* which matmul operand a core keeps while its work items share it (`held_operand`): a core's
  reader fetches the Kt-tile strip of A (or B) once per run of work items with the same tile
  row (column) and streams the other operand, which is what the emitted TT-Metalium reader does;
* the circular buffers (`circular_buffers`), the one table from which both the host program
  and the kernels take their CB indices and sizes;
* the tiles each core reads and writes, and the modeled time (`kernel_cost`): per core the
  slower of compute and NoC traffic (readers and compute overlap through double buffering),
  bounded below by DRAM bandwidth for buffers in DRAM, plus a launch overhead.

These are pure functions over tile geometry, work lists and a device description, so the same
model serves the partitioner (choosing a strategy), the placement pass (CB bytes), the
simulator (modeled time) and the C++ emitter (CB table, held operand).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from devices.tt import TTDevice
from dialects import ark
from dialects.tt_kernels import TILE, KernelGeometry, KernelKind, TileList, TileView

Tile = tuple[int, int]
Core = tuple[int, int]
WorkLists = Mapping[Core, Sequence[Tile]]

DOUBLE_BUFFER = 2
"""Pages of a streaming circular buffer: one being filled while the other is consumed."""
HOLD_FRACTION = 4
"""A matmul operand strip is held in L1 only if it takes at most 1/4 of a core's L1."""

SFPU_OPS: tuple[type[ark.ArkOp], ...] = (
    ark.ExpOp, ark.GeluOp, ark.RsqrtOp, ark.SigmoidOp, ark.SqrtOp, ark.DivOp, ark.RopeOp)
"""Element-wise operators computed by the vector unit (SFPU) rather than the FPU."""


def tile_bytes(dtype: str) -> int:
    return TILE * TILE * ark.DATA_TYPE_BYTES[dtype]


def _changes(values: Sequence[int]) -> int:
    """How often a sequence takes a new value (the first one counts)."""
    return sum(1 for i, v in enumerate(values) if i == 0 or v != values[i - 1])


def b_has_batches(buffers: Mapping[str, ark.TensorType]) -> bool:
    return TileView.of(buffers["B"].shape_list).batch_size > 1


def strip_index(geometry: KernelGeometry, buffers: Mapping[str, ark.TensorType],
                operand: str) -> Callable[[Tile], int]:
    """Which K strip of `operand` output tile (io, jo) needs. A's strip is its tile row, so
    io names it (io includes the batch); B's is its tile column jo, within the batch when B
    has batches of its own (a broadcast B is the same for every batch)."""
    if operand == "A":
        return lambda tile: tile[0]
    if b_has_batches(buffers):
        rows, columns = geometry.output.row_tiles, geometry.grid_tiles[1]
        return lambda tile: (tile[0] // rows) * columns + tile[1]
    return lambda tile: tile[1]


def strip_changes(geometry: KernelGeometry, buffers: Mapping[str, ark.TensorType],
                  operand: str, items: Sequence[Tile]) -> int:
    """How often a core walking `items` needs a new K strip of `operand` (the first counts):
    `_changes` of `strip_index`, on whole arrays when the items are a `TileList`."""
    if not isinstance(items, TileList):
        strip = strip_index(geometry, buffers, operand)
        return _changes([strip(tile) for tile in items])
    if not len(items):
        return 0
    if operand == "A":
        values = items.io
    elif b_has_batches(buffers):
        values = (items.io // geometry.output.row_tiles) * geometry.grid_tiles[1] + items.jo
    else:
        values = items.jo
    return 1 + int((values[1:] != values[:-1]).sum())


def held_operand(work: WorkLists, geometry: KernelGeometry,
                 buffers: Mapping[str, ark.TensorType], device: TTDevice) -> str | None:
    """"A" or "B": the matmul operand whose K strip cores keep across consecutive work items
    (the one fetched less often), or None when neither strip fits in a quarter of L1."""
    budget = device.l1_usable_bytes // HOLD_FRACTION
    fetches = {name: sum(strip_changes(geometry, buffers, name, items)
                         for items in work.values()) for name in ("A", "B")}
    candidates = [name for name in ("A", "B")
                  if tile_bytes(buffers[name].data_type) * geometry.len_k <= budget]
    return min(candidates, key=lambda name: fetches[name]) if candidates else None


@dataclass(frozen=True)
class CircularBuffer:
    """One circular buffer of a kernel, on every core that runs it."""

    index: int
    """tt::CBIndex: inputs from c_0, outputs from c_16 (tt-metal's convention)."""
    name: str
    role: str
    """"input" (filled by the reader), "output" (drained by the writer) or "scaler"."""
    buffer: str | None
    """The kernel buffer (A, B, C) it carries, if any."""
    pages: int
    page_bytes: int
    dtype: str

    @property
    def total_bytes(self) -> int:
        return self.pages * self.page_bytes


OUTPUT_CB_BASE = 16


def circular_buffers(geometry: KernelGeometry, buffers: Mapping[str, ark.TensorType],
                     held: str | None) -> list[CircularBuffer]:
    """The kernel's CB table: c_0, c_1, ... for inputs, c_16 for the output."""
    table: list[CircularBuffer] = []
    inputs = [name for name in buffers if name != "C"]
    for i, name in enumerate(inputs):
        pages = geometry.len_k if held == name else DOUBLE_BUFFER
        dtype = buffers[name].data_type
        table.append(CircularBuffer(i, f"cb_in{i}", "input", name, pages, tile_bytes(dtype),
                                    dtype))
    if geometry.kind is KernelKind.REDUCE:
        dtype = buffers["A"].data_type
        table.append(CircularBuffer(len(inputs), "cb_scaler", "scaler", None, 1,
                                    tile_bytes(dtype), dtype))
    out = buffers["C"].data_type
    table.append(CircularBuffer(OUTPUT_CB_BASE, "cb_out0", "output", "C", DOUBLE_BUFFER,
                                tile_bytes(out), out))
    return table


# ---------------------------------------------------------------------------------------------
# Traffic and time
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CoreTraffic:
    reads: dict[str, int]
    """Tiles read per kernel buffer."""
    writes: int
    compute_cycles: int


def core_traffic(geometry: KernelGeometry, op: ark.ArkOp, items: Sequence[Tile],
                 held: str | None) -> CoreTraffic:
    n = len(items)
    k = geometry.len_k or 1
    names = ["A", "B"][:len(op.inputs)]
    match geometry.kind:
        case KernelKind.MATMUL:
            reads = {"A": n * k, "B": n * k}
            if held is not None:
                buffers = dict(zip(names, op.inputs, strict=True))
                reads[held] = k * strip_changes(geometry, buffers, held, items)
            cycles = n * k
        case KernelKind.REDUCE:
            reads, cycles = {"A": n * k}, n * k
        case _:
            reads, cycles = {name: n for name in names}, n
    return CoreTraffic(reads, n, cycles)


def _cycles_per_step(geometry: KernelGeometry, op: ark.ArkOp, device: TTDevice) -> int:
    if geometry.kind is KernelKind.MATMUL:
        return device.matmul_tile_cycles
    if isinstance(op, SFPU_OPS):
        return device.sfpu_tile_cycles
    return device.eltwise_tile_cycles


@dataclass(frozen=True)
class KernelCost:
    seconds: float
    max_tiles_per_core: int
    tiles_read: int
    dram_bytes: int
    busiest_core: Core | None


def kernel_cost(geometry: KernelGeometry, op: ark.ArkOp, work: WorkLists,
                buffers: Mapping[str, ark.TensorType], device: TTDevice,
                in_dram: Mapping[str, bool] | None = None) -> KernelCost:
    """Modeled time of one kernel; buffers are in DRAM unless `in_dram` says otherwise."""
    in_dram = in_dram or {}
    page = {name: tile_bytes(t.data_type) for name, t in buffers.items()}
    held = (held_operand(work, geometry, buffers, device)
            if geometry.kind is KernelKind.MATMUL else None)
    step = _cycles_per_step(geometry, op, device)
    noc_rate = device.noc_bytes_per_cycle * device.clock_hz
    slowest, busiest, dram_bytes, tiles_read = 0.0, None, 0, 0
    for core, items in work.items():
        traffic = core_traffic(geometry, op, items, held)
        moved = sum(page[name] * count for name, count in traffic.reads.items())
        moved += page["C"] * traffic.writes
        dram_bytes += sum(page[name] * count for name, count in traffic.reads.items()
                          if in_dram.get(name, True))
        dram_bytes += page["C"] * traffic.writes if in_dram.get("C", True) else 0
        tiles_read += sum(traffic.reads.values())
        seconds = max(traffic.compute_cycles * step / device.clock_hz, moved / noc_rate)
        if seconds > slowest:
            slowest, busiest = seconds, core
    dram_seconds = dram_bytes / device.dram_bandwidth_bytes_per_s
    return KernelCost(device.kernel_launch_s + max(slowest, dram_seconds),
                      max((len(items) for items in work.values()), default=0), tiles_read,
                      dram_bytes, busiest)
