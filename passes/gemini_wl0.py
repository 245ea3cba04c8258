"""gemini-wl0: the WL0 (PE weight buffer) snapshot of every workload.

Small layers read their whole weights straight from DRAM into WL0 ("DDR" entries, in 64-byte
units of 32-byte-aligned channels, K padded to 64), from the moment the DRAM queue delivers them
(`gemini.issue`) until their last workload on that core. Layers whose weights are staged in L2
stream them into WL0 one intra-core tile at a time ("CORE" entries, bytes / 32, tensor_order
null), listed in the workload that uses them. Addresses are WL0 units, placed with the same
lowest-address first fit as L2. On an imported IR with WL0 lists, the listed entries keep their
lifetimes and get re-allocated.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, NoneAttr

from dialects import dnn, gemini
from ground.diagnostics import PlancError
from passes.gemini_cycles import plan_workload
from targets.gemini import model
from targets.gemini.l2 import CoreTimeline, L2Tensor, allocate, weight_in_l2
from targets.gemini.plan import (
    ISSUE,
    ORDER,
    HardwarePass,
    get_int,
    layer_table,
    schedule_of,
)


@dataclass
class Wl0Entry:
    tensor: L2Tensor
    layer: str
    source: str
    transfer_id: int
    order: int | None
    box: tuple[list[int], list[int]] | None


def try_allocate_wl0(schedule: gemini.ScheduleOp, layers: dict[str, dnn.LayerOp],
                     hw) -> PlancError | None:
    """The WL0 allocation error the current plan would hit, or None."""
    loads = {ld.value("transfer_id"): ld for ld in schedule.dram.loads}
    for core in schedule.cores:
        timeline = CoreTimeline(core.id, core.workloads)
        entries = wl0_entries(core, timeline, layers, loads, hw)
        try:
            allocate(core, [e.tensor for e in entries], hw.wl0_capacity_units, "WL0",
                     "units")
        except PlancError as e:
            return e
    return None


def reallocate(schedule: gemini.ScheduleOp, capacity: int) -> None:
    for core in schedule.cores:
        spans: dict[tuple, L2Tensor] = {}
        entries: dict[tuple, list[gemini.Wl0TensorOp]] = defaultdict(list)
        for position, wl in enumerate(core.workloads):
            for entry in wl.wl0:
                key = (entry.value("source"), tuple(entry.transfer_ids),
                       position if entry.value("source") == "CORE" else None)
                entries[key].append(entry)
                if key not in spans:
                    spans[key] = L2Tensor(core.id, "weight", entry.value("size"), ([], []), 8,
                                          8, 0, set(), first=position, tensor_id=len(spans))
                spans[key].last = position
        allocate(core, list(spans.values()), capacity, "WL0", "units")
        for key, tensor in spans.items():
            for entry in entries[key]:
                entry.address = gemini.int_attr(tensor.address)


@dataclass(frozen=True)
class GeminiWl0Pass(HardwarePass):
    """WL0 snapshots: DDR-fed whole-layer weights and L2-fed streamed tiles, first fit."""

    name = "gemini-wl0"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule = schedule_of(op, self.name)
        hw = self.hw
        graph = dnn.find_graph(op)
        if graph is None or any(wl.wl0_key is not None for wl in schedule.workloads()):
            reallocate(schedule, hw.wl0_capacity_units)
            return
        layers = layer_table(graph)
        loads = {ld.value("transfer_id"): ld for ld in schedule.dram.loads}
        for core in schedule.cores:
            timeline = CoreTimeline(core.id, core.workloads)
            entries = wl0_entries(core, timeline, layers, loads, hw)
            allocate(core, [e.tensor for e in entries], hw.wl0_capacity_units, "WL0",
                     "units")
            live: dict[int, list[Wl0Entry]] = defaultdict(list)
            for entry in entries:     # each entry is listed at every position it spans
                for position in range(entry.tensor.first, entry.tensor.last + 1):
                    live[position].append(entry)
            for position, wl in enumerate(core.workloads):
                for entry in live.get(position, ()):
                    wl.append(_wl0_op(entry))
                wl.wl0_key = gemini.str_attr("wl0_buffer")

def wl0_entries(core, timeline, layers, loads, hw) -> list[Wl0Entry]:
    direct: dict[int, Wl0Entry] = {}
    entries: list[Wl0Entry] = []
    for position, wl in enumerate(core.workloads):
        weight = wl.weight
        if weight is None:
            continue
        layer = layers[wl.layer]
        tid = weight.transfer_ids[0]
        k_range = weight.ints_of("upper")[1] - weight.ints_of("lower")[1] + 1
        if weight_in_l2(layer, k_range, hw):
            units = plan_workload(layer, wl, hw).stream_units
            tensor = L2Tensor(core.id, "weight", units, ([], []), 8, 8, 0, {position},
                              first=position, last=position, tensor_id=len(entries))
            entries.append(Wl0Entry(tensor, wl.layer, "CORE", tid, None, None))
            continue
        entry = direct.get(tid)
        if entry is None:
            load = loads[tid]
            issue = get_int(load, ISSUE)
            first = timeline.position_at(issue) if issue is not None else position
            tensor = L2Tensor(core.id, "weight", model.wl0_direct_units(layer, k_range),
                              ([], []), 8, 8, 0, set(), first=min(first, position),
                              tensor_id=len(entries))
            entry = direct[tid] = Wl0Entry(tensor, wl.layer, "DDR", tid,
                                           get_int(load, ORDER),
                                           (weight.ints_of("lower"), weight.ints_of("upper")))
            entries.append(entry)
        entry.tensor.last = position
    return entries


NO_ORDER = NoneAttr()
"""The `tensor_order` of streamed entries (one attribute: they are immutable)."""


def _wl0_op(entry: Wl0Entry) -> gemini.Wl0TensorOp:
    """The WL0 entry of `entry` (listed at every position it spans: its attributes are
    shared)."""
    props = {"address": gemini.int_attr(entry.tensor.address),
             "size": gemini.int_attr(entry.tensor.size), "align": gemini.int_attr(8),
             "bitwidth": gemini.int_attr(8), "layer_name": gemini.str_attr(entry.layer),
             "source": gemini.str_attr(entry.source),
             "tensor_order": gemini.int_attr(entry.order) if entry.order is not None
             else NO_ORDER,
             "transfer_id": gemini.ints_attr([entry.transfer_id])}
    if entry.box is not None:
        props["lower"] = gemini.ints_attr(entry.box[0])
        props["upper"] = gemini.ints_attr(entry.box[1])
    return gemini.Wl0TensorOp.build(**props)
