"""gemini-dram-order: when each DRAM transfer happens, and the one DRAM queue they form.

All cores share one DRAM channel. Loads are queued in the order their first reader runs
(weights before feature maps when tied) and each is issued just early enough to be hidden
behind the compute of the workloads before its first reader (estimated with the cycle model,
at the configured bandwidth), never before the load ahead of it in the queue, and only when
every destination core has room for it until its last reader (L2 for feature maps and staged
weights, WL0 for weights read straight into WL0). A load that cannot fit even at its first
reader is an error naming the workload. Stores enter the queue when their workload finishes.

Records `gemini.issue` (the step before which a load lands) on every DRAM load and
`gemini.order` (its position in the queue, the IR's tensor_order) on every DRAM load and
store.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from compiler import gemini_model as model
from compiler.diagnostics import PlancError
from compiler.gemini_l2 import CoreTimeline, L2Tensor, plan_tensors
from compiler.gemini_model import GeminiHardware
from compiler.gemini_plan import (
    ISSUE,
    ORDER,
    HardwarePass,
    error_at,
    get_int,
    graph_of,
    layer_table,
    schedule_of,
    set_int,
    workload_step,
)
from dialects import dnn, gemini
from passes.gemini_cycles import plan_workload


@dataclass
class Occupancy:
    """Bytes (L2) or units (WL0) in use at each position of one core."""

    capacity: float
    used: list[float]

    def fits(self, first: int, last: int, size: float) -> bool:
        return all(self.used[p] + size <= self.capacity for p in range(first, last + 1))

    def add(self, first: int, last: int, size: float) -> None:
        for p in range(first, last + 1):
            self.used[p] += size


def wl0_units(load: gemini.DramLoadOp, layer: dnn.LayerOp) -> int:
    k_range = load.ints_of("upper")[1] - load.ints_of("lower")[1] + 1
    return model.wl0_direct_units(layer, k_range)


FILLS = (GeminiHardware.l2_fill, 0.8, 0.7, 0.6, 0.5)
"""Shares of L2 and WL0 the DRAM queue may fill, tried in turn."""


def allocation_failure(module: ModuleOp, schedule: gemini.ScheduleOp, layers, hw,
                       ) -> PlancError | None:
    """Would the L2 and WL0 allocators place everything with the current issue steps?"""
    from passes.gemini_allocate_l2 import try_allocate
    from passes.gemini_wl0 import try_allocate_wl0

    return try_allocate(schedule, layers, hw) or try_allocate_wl0(schedule, layers, hw)


@dataclass(frozen=True)
class GeminiDramOrderPass(HardwarePass):
    """Issue points and queue order of every DRAM transfer (gemini.issue, gemini.order)."""

    name = "gemini-dram-order"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        schedule = schedule_of(op, self.name)
        layers = layer_table(graph)
        hw = self.hw
        dram = schedule.dram
        step_of = {(c.id, wl.id): workload_step(wl) for c in schedule.cores
                   for wl in c.workloads}
        start = self._start_times(schedule, layers, hw)
        queue = sorted(dram.loads, key=lambda ld: (
            min(step_of[d.target] for d in ld.destinations), ld.value("kind") != "weight",
            ld.value("transfer_id")))
        # Byte counts do not see fragmentation: if first fit cannot place the plan, plan again
        # with less of the buffer.
        for fill in FILLS:
            issues = self._plan(schedule, layers, hw, fill, queue, step_of, start)
            for load, issue in zip(queue, issues, strict=False):
                set_int(load, ISSUE, issue)
            failure = allocation_failure(op, schedule, layers, hw)
            if failure is None:
                break
            if fill == FILLS[-1]:
                raise failure
        issued: list[tuple] = [(get_int(load, ISSUE), 0, seq, load)
                               for seq, load in enumerate(queue)]
        for store in dram.stores:
            step = step_of[(store.value("core_id"), store.value("workload_id"))]
            issued.append((step, 1, store.value("transfer_id"), store))
        for order, (*_, transfer) in enumerate(sorted(issued, key=lambda e: e[:3])):
            set_int(transfer, ORDER, order)

    def _plan(self, schedule, layers, hw: GeminiHardware, fill: float, queue, step_of,
              start) -> list[int]:
        """Issue steps of the queued loads when a `fill` share of L2 and WL0 may be used."""
        for load in queue:
            load.attributes.pop(ISSUE, None)
        timelines = {c.id: CoreTimeline(c.id, c.workloads) for c in schedule.cores}
        tensors = plan_tensors(schedule, layers, hw)
        l2 = {core: Occupancy(hw.buffer_bytes * fill, [0.0] * len(tl.workloads))
              for core, tl in timelines.items()}
        wl0 = {core: Occupancy(hw.wl0_capacity_units * fill, [0.0] * len(tl.workloads))
               for core, tl in timelines.items()}
        loaded: dict[int, list[L2Tensor]] = defaultdict(list)
        for core, found in tensors.items():
            for tensor in found:
                if tensor.dram is not None and tensor.dram[0] == "load":
                    loaded[tensor.dram[1]].append(tensor)
                else:
                    l2[core].add(tensor.first, tensor.last, tensor.size)
        self._reserve_streams(schedule, layers, hw, wl0)
        self._check_fmaps(schedule, timelines, l2, hw)
        previous = 0
        issues = []
        for load in queue:
            previous = self._issue(load, layers, loaded, timelines, step_of, start, previous,
                                   l2, wl0, hw)
            issues.append(previous)
        return issues

    def _start_times(self, schedule, layers, hw) -> dict[int, float]:
        """Estimated start cycle of every step, each core running its workloads in order."""
        start: dict[int, float] = {}
        for core in schedule.cores:
            clock = 0.0
            for wl in core.workloads:
                start[workload_step(wl)] = clock
                clock += plan_workload(layers[wl.layer], wl, hw).time
        return start

    def _reserve_streams(self, schedule, layers, hw, wl0) -> None:
        for core in schedule.cores:
            for position, wl in enumerate(core.workloads):
                plan = plan_workload(layers[wl.layer], wl, hw)
                if plan.stream_units:
                    wl0[core.id].add(position, position, plan.stream_units)

    def _check_fmaps(self, schedule, timelines, l2: dict[int, Occupancy],
                     hw: GeminiHardware) -> None:
        for core, occupancy in l2.items():
            for position, used in enumerate(occupancy.used):
                if used > hw.buffer_bytes * hw.l2_fill:
                    wl = timelines[core].workloads[position]
                    raise error_at(wl, f"L2 overflow: the feature maps live at workload "
                                       f"{wl.id} of core {core} need {int(used)} bytes, more "
                                       f"than the {int(hw.buffer_bytes * hw.l2_fill)} planned "
                                       f"of the L2 buffer; use a larger --buffer-size, a smaller "
                                       f"--batch or more cores")

    def _issue(self, load: gemini.DramLoadOp, layers, loaded, timelines, step_of, start,
               previous: int, l2, wl0, hw: GeminiHardware) -> int:
        dests = [d.target for d in load.destinations]
        first_use = min(step_of[t] for t in dests)
        layer = layers[_layer_of(timelines, dests[0])]
        tensors = loaded.get(load.value("transfer_id"), [])
        direct = load.value("kind") == "weight" and not tensors
        transfer = load.value("size") / hw.dram_bytes_per_cycle
        steps = sorted(s for s in start if s <= first_use)
        wanted = first_use
        for step in reversed(steps):
            wanted = step
            if start[first_use] - start[step] >= transfer:
                break
        candidates = [s for s in steps if s >= max(wanted, previous)] or [first_use]
        for step in candidates:
            if self._fits(step, load, tensors, direct, layer, timelines, dests, l2, wl0,
                          commit=False):
                self._fits(step, load, tensors, direct, layer, timelines, dests, l2, wl0,
                           commit=True)
                return step
        target = dests[0]
        raise PlancError(f"{'WL0' if direct else 'L2'} overflow: DRAM load "
                         f"{load.value('transfer_id')} ({load.value('size')} bytes) for "
                         f"workload {target[1]} of core {target[0]} does not fit even when it "
                         f"is read; use a larger --buffer-size, a smaller --batch or more cores")

    def _fits(self, step, load, tensors, direct, layer, timelines, dests, l2, wl0,
              commit: bool) -> bool:
        if direct:
            units = wl0_units(load, layer)
            for core in {c for c, _ in dests}:
                tl = timelines[core]
                first = tl.position_at(step)
                last = max(w for c, w in dests if c == core)
                if first is None or first > last:
                    first = last
                if commit:
                    wl0[core].add(first, last, units)
                elif not wl0[core].fits(first, last, units):
                    return False
            return True
        for tensor in tensors:
            first = timelines[tensor.core].position_at(step)
            first = min(tensor.readers) if first is None else min(first, min(tensor.readers))
            if commit:
                l2[tensor.core].add(first, tensor.last, tensor.size)
            elif not l2[tensor.core].fits(first, tensor.last, tensor.size):
                return False
        return True


def _layer_of(timelines, target: tuple[int, int]) -> str:
    core, wid = target
    return timelines[core].workloads[wid].layer

