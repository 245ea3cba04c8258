"""Tenstorrent plans: the whole-document rules of `planc check` that need the machine model.

* `tt.l1-capacity` (error): while a kernel runs, each Tensix core's L1 holds the kernel's
  circular buffers and its share of every L1-resident buffer live at that kernel (an
  L1-interleaved buffer spreads its tile pages over the L1 of every compute core). TT-Metalium
  allocates both when the program is created, and its allocator refuses what does not fit
  ("Out of Memory: Not enough space to allocate ... L1"): the plan cannot run. A buffer is live
  from the first to the last kernel that names it, as `tt-place` keeps it.
* `tt.dram-capacity` (error): each DRAM bank holds its share of every DRAM-interleaved buffer
  live at a kernel (TT-Metalium spreads a DRAM buffer's pages round-robin over the banks and
  reserves the same address range, ceil(pages / banks) pages, in every bank). Its allocator
  refuses a buffer that does not fit a bank ("Out of Memory: Not enough space to allocate ...
  DRAM"): the plan cannot run. Live ranges as for L1 (the host may hold buffers longer, never
  shorter), so an error here is an error on any host.
* `tt.clobbered-input` (error): a kernel reads a tensor that an earlier kernel of the document
  produces (its result tensor id), but a kernel between the two writes some of the same
  bytes: the reader sees the later kernel's data, not its producer's (a wrong result; the
  mistake of a plan reordered or a buffer reused too early).
* `tt.kernel-order` (error): a kernel reads bytes that only a later kernel of the document
  writes. The runtime runs the plans in document order, so the reader sees whatever the
  buffer held before: a wrong result.

Both are decided on counts of tiles and byte regions (`targets.ark.byte_regions`), never by
walking tiles; a document is a few hundred kernels at most.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from devices.tt import TTDevice, device_named
from dialects import ark, tt
from dialects.findings import ERROR, Finding, at_op
from dialects.tt_kernels import KernelKind, NotAKernel, TileView, kernel_buffers, kernel_geometry
from targets.ark.byte_regions import ByteRegion, overlaps
from targets.tt.schedule import circular_buffers, held_operand, tile_bytes


@dataclass
class _L1Buffer:
    buffer: int
    bytes_per_core: int
    first: int
    last: int


def check(module: ModuleOp, options: Any = None) -> list[Finding]:
    plans = [p for op in module.ops if isinstance(op, tt.PlansOp) for p in op.plans()]
    kernels = [(index, p) for index, p in enumerate(plans) if kernel_operator(p) is not None]
    device = device_named(getattr(options, "arch", None))
    return [*capacity_findings(kernels, device), *dram_findings(kernels, device),
            *order_findings(kernels)]


def kernel_operator(plan: tt.PlanOp) -> ark.ArkOp | None:
    """The kernel's operator, when the plan has a kernel planc can read as tiles."""
    if plan.kernel is None:
        return None
    try:
        kernel_geometry(plan.kernel.operator)
    except NotAKernel:
        return None
    return plan.kernel.operator


def _in_l1(plan: tt.PlanOp) -> set[str]:
    """The kernel's operands (A, B, C) the plan's layouts put in L1."""
    layouts = plan.layouts.by_buffer() if plan.layouts is not None else {}
    return {name for name, layout in layouts.items() if layout.shard_value == "L1"}


def _cb_bytes(plan: tt.PlanOp, device: TTDevice) -> int:
    """Bytes of the kernel's circular buffers in each core's L1."""
    op = plan.kernel.operator
    geometry = kernel_geometry(op)
    buffers = kernel_buffers(op)
    held = None
    if geometry.kind is KernelKind.MATMUL and plan.work_partition is not None:
        work = {core.coordinates: core.tiles() for core in plan.work_partition.cores()}
        held = held_operand(work, geometry, buffers, device)
    return sum(cb.total_bytes for cb in circular_buffers(geometry, buffers, held))


@dataclass
class L1Use:
    """What each core's L1 holds while one kernel runs."""

    circular_buffers: int
    buffers: list[_L1Buffer]

    @property
    def bytes_per_core(self) -> int:
        return self.circular_buffers + sum(b.bytes_per_core for b in self.buffers)


def _live_buffers(kernels: list[tuple[int, tt.PlanOp]], banks: int,
                  ) -> tuple[list[_L1Buffer], set[int]]:
    """Every buffer the kernels name, from the first to the last kernel naming it, with its
    largest share of `banks` banks in bytes; and the buffers some kernel places in L1."""
    uses: dict[int, _L1Buffer] = {}
    in_l1: set[int] = set()
    for position, (_, plan) in enumerate(kernels):
        placed = _in_l1(plan)
        for name, tensor in kernel_buffers(plan.kernel.operator).items():
            pages = TileView.of(tensor.shape_list).num_tiles
            share = -(-pages // banks) * tile_bytes(tensor.data_type)
            use = uses.setdefault(tensor.buffer_id,
                                  _L1Buffer(tensor.buffer_id, 0, position, position))
            use.last = position
            use.bytes_per_core = max(use.bytes_per_core, share)
            if name in placed:
                in_l1.add(tensor.buffer_id)
    return list(uses.values()), in_l1


def l1_use(kernels: list[tuple[int, tt.PlanOp]], device: TTDevice) -> list[L1Use]:
    """Per kernel, in order: its circular buffers and the L1-resident buffers live there (from
    the first to the last kernel naming them), in bytes of each core's L1."""
    uses, in_l1 = _live_buffers(kernels, device.l1_banks)
    residents = [use for use in uses if use.buffer in in_l1]
    return [L1Use(_cb_bytes(plan, device),
                  [b for b in residents if b.first <= position <= b.last])
            for position, (_, plan) in enumerate(kernels)]


def capacity_findings(kernels: list[tuple[int, tt.PlanOp]], device: TTDevice) -> list[Finding]:
    findings = []
    for (index, plan), use in zip(kernels, l1_use(kernels, device), strict=True):
        if use.bytes_per_core > device.l1_usable_bytes:
            names = ", ".join(f"{b.buffer} ({b.bytes_per_core} B)" for b in use.buffers[:8])
            findings.append(at_op(
                plan, "tt.l1-capacity", ERROR,
                f"kernel {plan.label()} (plan {index}) needs {use.bytes_per_core} bytes of each "
                f"core's L1 but {device.name} has {device.l1_usable_bytes}: circular buffers "
                f"{use.circular_buffers} B, L1 buffers live here {names or 'none'}; put a "
                "buffer in DRAM or use a larger grid"))
    return findings


def dram_use(kernels: list[tuple[int, tt.PlanOp]], device: TTDevice) -> list[list[_L1Buffer]]:
    """Per kernel, in order: the DRAM-interleaved buffers live there (from the first to the
    last kernel naming them) with their bytes in each DRAM bank."""
    uses, in_l1 = _live_buffers(kernels, device.dram_banks)
    residents = [use for use in uses if use.buffer not in in_l1]
    return [[b for b in residents if b.first <= position <= b.last]
            for position in range(len(kernels))]


def dram_findings(kernels: list[tuple[int, tt.PlanOp]], device: TTDevice) -> list[Finding]:
    """The first kernel at which the DRAM buffers live there overflow a bank (one finding:
    every later kernel of the same buffers would repeat it)."""
    bank = device.dram_bytes // device.dram_banks
    for (index, plan), live in zip(kernels, dram_use(kernels, device), strict=True):
        need = sum(b.bytes_per_core for b in live)
        if need > bank:
            names = ", ".join(f"{b.buffer} ({b.bytes_per_core} B)" for b in
                              sorted(live, key=lambda b: -b.bytes_per_core)[:8])
            return [at_op(plan, "tt.dram-capacity", ERROR,
                          f"kernel {plan.label()} (plan {index}) needs {need} bytes of each DRAM "
                          f"bank but {device.name} has {bank} ({device.dram_bytes} bytes over "
                          f"{device.dram_banks} banks): DRAM buffers live here {names}")]
    return []


def order_findings(kernels: list[tuple[int, tt.PlanOp]]) -> list[Finding]:
    """Reads of bytes that no earlier kernel wrote but a later one does, and reads whose
    producer's bytes a kernel in between overwrote."""
    writes: list[tuple[int, tt.PlanOp, ByteRegion]] = []
    produced: dict[int, int] = {}
    """result tensor id -> position of the kernel that produces it."""
    for position, (index, plan) in enumerate(kernels):
        output = kernel_buffers(plan.kernel.operator)["C"]
        writes.append((index, plan, ByteRegion.of(output)))
        for result in plan.kernel.operator.results_types:
            produced.setdefault(result.tensor_id, position)
    findings = []
    for position, (index, plan) in enumerate(kernels):
        for name, tensor in kernel_buffers(plan.kernel.operator).items():
            if name == "C":
                continue
            region = ByteRegion.of(tensor)
            source = produced.get(tensor.tensor_id)
            if source is not None and source < position:
                finding = _clobbered(plan, index, name, tensor, region, writes[source],
                                     writes[source + 1:position])
                if finding is not None:
                    findings.append(finding)
                continue
            if any(overlaps(region, w) for _, _, w in writes[:position]):
                continue
            later = next(((i, p) for i, p, w in writes[position + 1:] if overlaps(region, w)),
                         None)
            if later is not None:
                findings.append(at_op(
                    plan, "tt.kernel-order", ERROR,
                    f"kernel {plan.label()} (plan {index}) reads {name} (tensor "
                    f"{tensor.tensor_id}) before kernel {later[1].label()} (plan {later[0]}) "
                    "writes it; the runtime runs plans in document order"))
    return findings


def _clobbered(plan: tt.PlanOp, index: int, name: str, tensor, region: ByteRegion,
               producer: tuple, between: list[tuple]) -> Finding | None:
    """The finding for a read whose producer's bytes a kernel in `between` overwrites."""
    other = next(((i, p) for i, p, w in between if overlaps(region, w)), None)
    if other is None:
        return None
    return at_op(plan, "tt.clobbered-input", ERROR,
                 f"kernel {plan.label()} (plan {index}) reads {name} (tensor "
                 f"{tensor.tensor_id}) that kernel {producer[1].label()} (plan {producer[0]}) "
                 f"produces, but kernel {other[1].label()} (plan {other[0]}) overwrites it "
                 "in between; the runtime runs plans in document order")
