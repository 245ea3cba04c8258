"""`tt-place`: decide for every buffer whether it lives in L1 or in DRAM, by size.

A Tensix core has about 1.4 MiB of L1 SRAM; a buffer placed in L1 is interleaved page by page
(one 32x32 tile per page) over the L1 of every compute core, so it takes ceil(tiles / cores)
pages of each core's L1. Buffers are considered across all plans of the document, because an
ARK buffer lives from the first kernel that touches it to the last one:

1. each kernel reserves its circular buffers (`targets.tt.schedule.circular_buffers`);
2. buffers are taken in order of traffic density (tiles the kernels move per byte of buffer,
   most first; smaller first on ties), and a buffer goes to L1 if, at every kernel of its live
   range, it fits in what is left of L1 next to the CBs and the buffers already placed;
3. everything else goes to DRAM, interleaved over the DRAM banks.

Layouts name the kernel's buffers A, B and C, with `tile_id_order` "row_major" (tiles of the
[..., H, W] tensor numbered row by row, batch by batch, as tt-metal's tile layout does).
`place_buffers` is a pure function over sizes, live ranges and budgets.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from devices.tt import TTDevice, device_named
from dialects import tt
from dialects.tt_kernels import KernelKind, TileView, kernel_buffers, kernel_geometry
from dialects.utils import op_list
from ground.diagnostics import PlancError
from passes.tt_partition import MEMO_SIZE, SMALL_KERNEL_TILES, cost_key
from targets.tt.schedule import circular_buffers, core_traffic, held_operand, tile_bytes

# ---------------------------------------------------------------------------------------------
# Pure placement
# ---------------------------------------------------------------------------------------------


@dataclass
class BufferUse:
    """One device buffer as placement sees it."""

    key: int
    """An identifier (the ARK buffer id)."""
    pages: int
    page_bytes: int
    first: int
    last: int
    """The range of kernels (by position) during which it must stay allocated."""
    traffic_bytes: int = 0
    """Bytes the kernels read from and write to it."""

    @property
    def size(self) -> int:
        return self.pages * self.page_bytes

    def bank_share(self, banks: int) -> int:
        """Bytes it takes in each L1 bank when interleaved over `banks` banks."""
        return -(-self.pages // banks) * self.page_bytes


def place_buffers(uses: Sequence[BufferUse], budgets: Sequence[int], banks: int) -> set[int]:
    """Keys of the buffers that go to L1; `budgets[k]` is the L1 bytes per bank free for
    buffers while kernel k runs."""
    free = list(budgets)
    in_l1: set[int] = set()
    order = sorted(uses, key=lambda u: (-u.traffic_bytes / max(u.size, 1), u.size, u.key))
    for use in order:
        share = use.bank_share(banks)
        live = range(use.first, use.last + 1)
        if all(free[k] >= share for k in live):
            for k in live:
                free[k] -= share
            in_l1.add(use.key)
    return in_l1


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


def _work_lists(plan: tt.PlanOp) -> dict:
    return {core.coordinates: core.tiles() for core in plan.work_partition.cores()}


def _kernel_needs(plan: tt.PlanOp, device: TTDevice) -> tuple[int, dict[str, int]]:
    """(CB bytes per core, bytes moved per kernel buffer) for a partitioned plan; the same
    for plans of equal `_needs_key` (a model repeats a few kernel shapes and partitions)."""
    op = plan.kernel.operator
    geometry = kernel_geometry(op)
    buffers = kernel_buffers(op)
    key = _needs_key(plan, geometry, op, buffers, device)
    found = _NEEDS.get(key) if key is not None else None
    if found is None:
        found = _compute_needs(plan, op, geometry, buffers, device)
        if key is not None:
            if len(_NEEDS) >= MEMO_SIZE:
                _NEEDS.clear()
            _NEEDS[key] = found
    return found[0], dict(found[1])


def _needs_key(plan: tt.PlanOp, geometry, op, buffers, device: TTDevice) -> tuple | None:
    """Everything `_compute_needs` reads: what the cost model reads of the kernel
    (`tt_partition.cost_key`) and the bytes of each core's tiles, in core order; None
    unless every core holds one `tt.work_list` of a small kernel (as tt-partition makes)."""
    if geometry.grid_tiles[0] * geometry.grid_tiles[1] > SMALL_KERNEL_TILES:
        return None
    lists = []
    for core in plan.work_partition.cores():
        ops = op_list(core.body.block)
        if len(ops) != 1 or type(ops[0]) is not tt.WorkListOp:
            return None
        lists.append((ops[0].io.data.data, ops[0].jo.data.data))
    return cost_key(geometry, op, buffers, None, device), tuple(lists)


_NEEDS: dict[tuple, tuple[int, dict[str, int]]] = {}
"""`_compute_needs` by `_needs_key`."""


def _compute_needs(plan: tt.PlanOp, op, geometry, buffers,
                   device: TTDevice) -> tuple[int, dict[str, int]]:
    work = _work_lists(plan)
    pages = {name: tile_bytes(t.data_type) for name, t in buffers.items()}
    held = (held_operand(work, geometry, buffers, device)
            if geometry.kind is KernelKind.MATMUL else None)
    cbs = circular_buffers(geometry, buffers, held)
    moved = dict.fromkeys(buffers, 0)
    for items in work.values():
        traffic = core_traffic(geometry, op, items, held)
        for name, count in traffic.reads.items():
            moved[name] += count * pages[name]
        moved["C"] += traffic.writes * pages["C"]
    return sum(cb.total_bytes for cb in cbs), moved


def place_plans(plans: Sequence[tt.PlanOp], device: TTDevice) -> dict[int, bool]:
    """For every ARK buffer the plans use: True if it goes to L1."""
    uses: dict[int, BufferUse] = {}
    budgets = []
    for index, plan in enumerate(plans):
        if plan.kernel is None or plan.work_partition is None:
            raise PlancError("tt-place needs partitioned plans (run tt-tile and tt-partition "
                             "first)")
        cb_bytes, moved = _kernel_needs(plan, device)
        budgets.append(device.l1_usable_bytes - cb_bytes)
        for name, tensor in kernel_buffers(plan.kernel.operator).items():
            pages = TileView.of(tensor.shape_list).num_tiles
            use = uses.setdefault(tensor.buffer_id, BufferUse(
                tensor.buffer_id, pages, tile_bytes(tensor.data_type), index, index))
            use.pages = max(use.pages, pages)
            use.page_bytes = max(use.page_bytes, tile_bytes(tensor.data_type))
            use.last = index
            use.traffic_bytes += moved[name]
    in_l1 = place_buffers(list(uses.values()), budgets, device.l1_banks)
    return {key: key in in_l1 for key in uses}


def layouts_for(plan: tt.PlanOp, in_l1: Mapping[int, bool]) -> tt.LayoutsOp:
    return tt.LayoutsOp([
        tt.LayoutOp.with_properties(_layout_properties(
            name, "L1" if in_l1[tensor.buffer_id] else "DRAM"))
        for name, tensor in kernel_buffers(plan.kernel.operator).items()])


@functools.cache
def _layout_properties(name: str, shard: str) -> dict:
    """The properties of buffer `name`'s layout (shared: attributes are immutable)."""
    return tt.LayoutOp(name, shard, interleave=True, tile_id_order="row_major").properties


@dataclass(frozen=True)
class TtPlacePass(ModulePass):
    name = "tt-place"

    arch: str | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        device = device_named(self.arch)
        for document in [p for p in op.ops if isinstance(p, tt.PlansOp)]:
            plans = [p for p in document.plans() if p.layouts is None]
            if not plans:
                continue
            in_l1 = place_plans(plans, device)
            for plan in plans:
                plan.body.block.add_op(layouts_for(plan, in_l1))
