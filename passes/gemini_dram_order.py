"""gemini-dram-order: when each DRAM transfer happens, and the one DRAM queue they form.

All cores share one DRAM channel. Loads are queued in the order their first reader runs
(weights before feature maps when tied) and each is issued just early enough to be hidden
behind the compute of the workloads before its first reader (estimated with the cycle model,
at the configured bandwidth), never before the load ahead of it in the queue, and only when
every destination core has room for it until its last reader (L2 for feature maps and staged
weights, WL0 for weights read straight into WL0). A load that cannot fit even at its first
reader is an error naming the workload. Stores enter the queue when their workload finishes.

The searches are bounded: a load's issue step is found by binary search (a later step leaves
it fewer positions to occupy, so fitting is monotone), room over a span of positions is a
segment-tree range maximum, and the walk back to hide a transfer stops after
`MAX_HIDING_STEPS`; the workload count itself is capped by gemini-partition.

Records `gemini.issue` (the step before which a load lands) on every DRAM load and
`gemini.order` (its position in the queue, the IR's tensor_order) on every DRAM load and
store.
"""

from __future__ import annotations

import bisect
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


class Occupancy:
    """Bytes (L2) or units (WL0) in use at each position of one core: a segment tree with
    range additions and range maxima, so that asking whether a span of workloads has room
    costs O(log positions), not O(span)."""

    def __init__(self, capacity: float, positions: int):
        self.capacity = capacity
        self.size = max(1, positions)
        self._max = [0.0] * (4 * self.size)
        self._add = [0.0] * (4 * self.size)

    def _update(self, node: int, lo: int, hi: int, first: int, last: int, size: float) -> None:
        if last < lo or hi < first:
            return
        if first <= lo and hi <= last:
            self._max[node] += size
            self._add[node] += size
            return
        mid = (lo + hi) // 2
        self._update(2 * node, lo, mid, first, last, size)
        self._update(2 * node + 1, mid + 1, hi, first, last, size)
        self._max[node] = self._add[node] + max(self._max[2 * node], self._max[2 * node + 1])

    def _query(self, node: int, lo: int, hi: int, first: int, last: int) -> float:
        if last < lo or hi < first:
            return float("-inf")
        if first <= lo and hi <= last:
            return self._max[node]
        mid = (lo + hi) // 2
        return self._add[node] + max(self._query(2 * node, lo, mid, first, last),
                                     self._query(2 * node + 1, mid + 1, hi, first, last))

    def peak(self, first: int, last: int) -> float:
        """The most in use at any position first..last."""
        return self._query(1, 0, self.size - 1, first, last)

    def fits(self, first: int, last: int, size: float) -> bool:
        return self.peak(first, last) + size <= self.capacity

    def add(self, first: int, last: int, size: float) -> None:
        self._update(1, 0, self.size - 1, first, last, size)


def wl0_units(load: gemini.DramLoadOp, layer: dnn.LayerOp) -> int:
    k_range = load.ints_of("upper")[1] - load.ints_of("lower")[1] + 1
    return model.wl0_direct_units(layer, k_range)


MAX_HIDING_STEPS = 4096
"""How many steps back a load may be issued to hide its transfer (bounds that walk)."""

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
        l2 = {core: Occupancy(hw.buffer_bytes * fill, len(tl.workloads))
              for core, tl in timelines.items()}
        wl0 = {core: Occupancy(hw.wl0_capacity_units * fill, len(tl.workloads))
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
        steps = sorted(start)
        for load in queue:
            previous = self._issue(load, layers, loaded, timelines, step_of, start, steps,
                                   previous, l2, wl0, hw)
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
            for position in range(len(timelines[core].workloads)):
                used = occupancy.peak(position, position)
                if used > hw.buffer_bytes * hw.l2_fill:
                    wl = timelines[core].workloads[position]
                    raise error_at(wl, f"L2 overflow: the feature maps live at workload "
                                       f"{wl.id} of core {core} need {int(used)} bytes, more "
                                       f"than the {int(hw.buffer_bytes * hw.l2_fill)} planned "
                                       f"of the L2 buffer; use a larger --buffer-size, a smaller "
                                       f"--batch or more cores")

    def _issue(self, load: gemini.DramLoadOp, layers, loaded, timelines, step_of, start,
               steps: list[int], previous: int, l2, wl0, hw: GeminiHardware) -> int:
        """The earliest step, no earlier than the load ahead in the queue nor than needed to
        hide the transfer, at which the load fits. A later step leaves it fewer positions to
        occupy, so fitting is monotone in the step and a binary search finds it."""
        dests = [d.target for d in load.destinations]
        first_use = min(step_of[t] for t in dests)
        layer = layers[_layer_of(timelines, dests[0])]
        tensors = loaded.get(load.value("transfer_id"), [])
        direct = load.value("kind") == "weight" and not tensors
        transfer = load.value("size") / hw.dram_bytes_per_cycle
        end = bisect.bisect_right(steps, first_use)
        wanted = first_use
        for index in range(end - 1, max(-1, end - 1 - MAX_HIDING_STEPS), -1):
            wanted = steps[index]
            if start[first_use] - start[wanted] >= transfer:
                break
        low = bisect.bisect_left(steps, max(wanted, previous), 0, end)
        candidates = steps[low:end] or [first_use]

        def fits(step: int) -> bool:
            return self._fits(step, load, tensors, direct, layer, timelines, dests, l2, wl0,
                              commit=False)

        index = bisect.bisect_left(range(len(candidates)), True,
                                   key=lambda i: fits(candidates[i]))
        if index < len(candidates):
            step = candidates[index]
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

