"""gemini-allocate-l2: the L2 snapshots of every workload and their addresses.

On a schedule from the earlier passes, the pass lists, for every workload, the tensors in its
core's L2 when it starts (`targets.gemini.l2.plan_tensors`: inputs assembled from core blocks or
loaded from DRAM, staged weights, store staging), with `newly_added`, `cur_wl_ifmap`, sources,
tensor ids and `tensor_order` (the DRAM queue position from gemini-dram-order, M for on-chip
tensors), and gives each tensor an address by Gemini's allocator: lowest-address first fit at
workload boundaries, freed after the last use. Every workload gets one ring region covering
the buffer.

On a schedule that already has snapshots (an imported scheduler IR) it keeps the lifetimes as
listed and re-assigns the addresses with the same allocator, which is how planc is checked
against Gemini's own allocations.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp

from dialects import dnn, gemini
from ground.diagnostics import PlancError
from targets.gemini.l2 import L2Tensor, allocate, plan_tensors, take_over
from targets.gemini.plan import (
    ORDER,
    HardwarePass,
    error_at,
    get_int,
    layer_table,
    schedule_of,
    workload_step,
)


def reallocate(schedule: gemini.ScheduleOp) -> None:
    """Re-assign the addresses of an existing set of snapshots (lifetimes as listed)."""
    capacity = schedule.value("buffersize")
    for core in schedule.cores:
        tensors: dict[int, L2Tensor] = {}
        entries: dict[int, list[gemini.L2TensorOp]] = defaultdict(list)
        for position, wl in enumerate(core.workloads):
            for entry in wl.buffer:
                tid = entry.value("tensor_id")
                entries[tid].append(entry)
                tensor = tensors.get(tid)
                if tensor is None:
                    tensor = tensors[tid] = L2Tensor(core.id, entry.value("kind"),
                                                     entry.value("size"), ([], []), 8, 8, 0,
                                                     set(), first=position, tensor_id=tid)
                tensor.last = position
        allocate(core, list(tensors.values()), capacity)
        for tid, tensor in tensors.items():
            for entry in entries[tid]:
                entry.address = gemini.int_attr(tensor.address)


def try_allocate(schedule: gemini.ScheduleOp, layers: dict[str, dnn.LayerOp],
                 hw, tensors: dict[int, list[L2Tensor]] | None = None) -> PlancError | None:
    """The allocation error the current plan would hit, or None (nothing in the IR is
    changed; `tensors`: the plan's tensors if already made)."""
    tensors = plan_tensors(schedule, layers, hw) if tensors is None else tensors
    cores = {core.id: core for core in schedule.cores}
    _number(tensors, cores)
    for core_id, found in tensors.items():
        try:
            allocate(cores[core_id], found, schedule.value("buffersize"))
        except PlancError as e:
            return e
    return None


def _number(tensors: dict[int, list[L2Tensor]], timelines: dict[int, gemini.CoreOp]) -> None:
    """Tensor ids in the order tensors enter L2 (by global step, then core)."""
    steps = {core: [workload_step(wl) for wl in timeline.workloads]
             for core, timeline in timelines.items()}
    everything = [(steps[core][t.first], core, i, t)
                  for core, found in tensors.items() for i, t in enumerate(found)]
    for tensor_id, (*_, tensor) in enumerate(sorted(everything, key=lambda e: e[:3])):
        tensor.tensor_id = tensor_id


def live_at_each(tensors: list[L2Tensor], positions: int) -> Iterator[list[L2Tensor]]:
    """For each position 0 .. `positions` - 1 in turn, the tensors listed there (`first` <=
    position <= `last`), in the order of `tensors`. One sweep over the positions: testing
    every tensor of the core at every position was quadratic in the workloads of a core
    (33 of 39 s of the pass on 5,000 generated operators)."""
    starting: dict[int, list[int]] = defaultdict(list)
    for index, tensor in enumerate(tensors):
        starting[max(tensor.first, 0)].append(index)
    live: list[int] = []
    for position in range(positions):
        if position in starting:
            live = sorted(live + starting[position])
        live = [i for i in live if tensors[i].last >= position]
        yield [tensors[i] for i in live]


def _entry_parts(tensor: L2Tensor, order: int, sources: ArrayAttr) -> tuple[dict, dict]:
    """The properties every entry of `tensor` has, before and after `newly_added` (made once
    per tensor: it is listed at every position it is live)."""
    head = {
        "address": gemini.int_attr(tensor.address), "size": gemini.int_attr(tensor.size),
        "tensor_id": gemini.int_attr(tensor.tensor_id), "kind": gemini.str_attr(tensor.kind),
        "align": gemini.int_attr(tensor.align), "bitwidth": gemini.int_attr(tensor.bitwidth),
        "lower": gemini.ints_attr(tensor.box[0]), "upper": gemini.ints_attr(tensor.box[1]),
        "tensor_order": gemini.int_attr(order),
    }
    if tensor.kind == "ofmap":
        # As Gemini writes store staging: no transfer ids, no sources, no newly_added.
        return head, {"layer_name": gemini.str_attr(tensor.layer_name),
                      "start_send": gemini.bool_attr(True)}
    tail = {"transfer_id": gemini.ints_attr(tensor.transfer_ids), "source": sources}
    if tensor.layer_name is not None:
        tail["layer_name"] = gemini.str_attr(tensor.layer_name)
    return head, tail


def _entry(tensor: L2Tensor, position: int, parts: tuple[dict, dict],
           readers_here: bool) -> gemini.L2TensorOp:
    head, tail = parts
    if tensor.kind == "ofmap":
        return gemini.L2TensorOp.build(**head, **tail)
    props = {**head, "newly_added": gemini.bool_attr(position == tensor.first), **tail}
    # A producer's own on-chip copy (`producer_position`) is not an input of its workload.
    if readers_here and tensor.kind == "ifmap" and tensor.producer_position is None:
        props["cur_wl_ifmap"] = gemini.bool_attr(True)
    return gemini.L2TensorOp.build(**props)


@dataclass(frozen=True)
class GeminiAllocateL2Pass(HardwarePass):
    """L2 snapshots with first-fit addresses (or re-allocation of existing snapshots)."""

    name = "gemini-allocate-l2"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule = schedule_of(op, self.name)
        graph = dnn.find_graph(op)
        if graph is None or any(wl.has_list("buffer") for wl in schedule.workloads()):
            reallocate(schedule)
            return
        cores = {core.id: core for core in schedule.cores}
        # gemini-dram-order planned (and allocated) these tensors already, on this very IR in
        # the default pipeline; any other IR is planned here.
        tensors = take_over(op, self.hw)
        allocated = tensors is not None
        if tensors is None:
            tensors = plan_tensors(schedule, layer_table(graph), self.hw)
            _number(tensors, cores)
        dram = schedule.dram
        order_of = {("load", ld.value("transfer_id")): get_int(ld, ORDER) for ld in dram.loads}
        order_of |= {("store", s.value("transfer_id")): get_int(s, ORDER) for s in dram.stores}
        sentinel = len(dram.loads) + len(dram.stores)
        capacity = schedule.value("buffersize")
        parts: dict[int, tuple[dict, dict]] = {}
        ring = gemini.rows_attr([[0, capacity]])
        for core_id, found in tensors.items():
            core = cores[core_id]
            if not allocated:
                allocate(core, found, capacity)
            workloads = core.workloads
            for (position, wl), live in zip(enumerate(workloads),
                                            live_at_each(found, len(workloads)), strict=True):
                entries = []
                for tensor in live:
                    order = order_of.get(tensor.dram, sentinel) if tensor.dram else sentinel
                    if order is None:
                        raise error_at(wl, "DRAM transfers have no gemini.order (run "
                                           "gemini-dram-order first)")
                    if id(tensor) not in parts:
                        parts[id(tensor)] = _entry_parts(tensor, order,
                                                         ArrayAttr(tensor.sources()))
                    entries.append((order, -tensor.tensor_id,
                                    _entry(tensor, position, parts[id(tensor)],
                                           position in tensor.readers)))
                for *_, entry in sorted(entries, key=lambda e: e[:2]):
                    wl.append(entry)
                wl.add_list("buffer")
                wl.ring_buffer_info = ring
