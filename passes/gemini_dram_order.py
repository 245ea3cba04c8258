"""gemini-dram-order: when each DRAM transfer happens, and the one DRAM queue they form.

All cores share one DRAM channel. Loads are queued in the order their first reader runs
(weights before feature maps when tied); stores join the queue when their workload has
finished, ahead of any load that would start later. The channel and the cores are simulated
together while the queue is planned (`Progress`: each workload starts after the previous one
on its core, its DRAM loads and the blocks it gets from other cores, with the cycle model's
times), so each load starts as soon as the channel is free, and it is listed in L2 (or WL0)
from the workload whose start frees its space at that moment: as late as the channel allows,
so it holds no memory while it waits in the queue. Every load is first reserved from its first
reader to its last (what a workload needs must fit: an overflow there is an error naming the
workload); bringing one forward must fit the planned L2 budget (`--l2-budget`, shared with
gemini-group-layers) and WL0, or it lands later. Byte counts do not see fragmentation, so the
plan is checked with the allocators and planned again with less of the memory that failed.

The searches are bounded: a load's landing step is found by binary searches (the space it
frees is monotone in the step, and so is fitting: a later step leaves fewer positions to
occupy), room over a span of positions is a segment-tree range maximum, and the simulation
visits each workload once; the workload count itself is capped by gemini-partition.

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

from dialects import dnn, gemini
from dialects.locations import source_path
from ground.diagnostics import PlancError
from passes.gemini_cycles import WorkloadPlan, plan_workload
from targets.gemini import model
from targets.gemini.l2 import CoreTimeline, L2Tensor, hand_over, land, plan_tensors
from targets.gemini.model import GeminiHardware
from targets.gemini.plan import (
    ISSUE,
    ORDER,
    HardwarePass,
    L2Overflow,
    graph_of,
    layer_table,
    schedule_of,
    set_int,
    workload_step,
)


class Occupancy:
    """Bytes (L2) or units (WL0) in use at each position of one core: a segment tree with
    range additions and range maxima, so that asking whether a span of workloads has room
    costs O(log positions), not O(span). Bottom-up (no recursion): leaf p is node
    `width + p`; `_max[node]` is the most in use below the node, counting the additions kept
    at the node itself and below (`_add`, for internal nodes) but not those above it."""

    def __init__(self, capacity: float, positions: int):
        self.capacity = capacity
        self.size = max(1, positions)
        self._width = 1 << (self.size - 1).bit_length()
        self._height = self._width.bit_length() - 1
        self._max = [0.0] * (2 * self._width)
        self._add = [0.0] * self._width
        self._pending: list[tuple[int, int, float]] | None = []
        """Additions made before anything was asked: the tree is built from them at once."""

    def _build(self) -> None:
        """Put the pending additions in the (empty) tree: each position's total from a running
        sum of differences, then every maximum bottom-up, O(positions + additions) rather
        than O(log positions) each (the planner reserves ~2k spans per round at 4x4)."""
        pending, self._pending = self._pending, None
        if not pending:
            return
        change = [0.0] * (self.size + 1)
        for first, last, size in pending:
            first, last = max(first, 0), min(last, self.size - 1)
            if first <= last:
                change[first] += size
                change[last + 1] -= size
        high, width = self._max, self._width
        total = 0.0
        for position in range(self.size):
            total += change[position]
            high[width + position] = total
        for node in range(width - 1, 0, -1):
            high[node] = max(high[2 * node], high[2 * node + 1])

    def _push(self, leaf: int) -> None:
        """Hand the additions kept above `leaf` down to the children on its path."""
        add = self._add
        for shift in range(self._height, 0, -1):
            node = leaf >> shift
            if add[node]:
                self._hand_down(node)

    def _hand_down(self, node: int) -> None:
        """Move the additions kept at internal `node` to its two children."""
        high, add = self._max, self._add
        pending = add[node]
        for child in (2 * node, 2 * node + 1):
            high[child] += pending
            if child < self._width:
                add[child] += pending
        add[node] = 0.0

    def _pull(self, leaf: int) -> None:
        """Recompute the maxima above `leaf`."""
        high, add = self._max, self._add
        node = leaf >> 1
        while node:
            high[node] = max(high[2 * node], high[2 * node + 1]) + add[node]
            node >>= 1

    def _span(self, first: int, last: int) -> tuple[int, int]:
        """Nodes [lo, hi) of positions first..last, clipped to the positions there are."""
        return max(first, 0) + self._width, min(last, self.size - 1) + self._width + 1

    def peak(self, first: int, last: int) -> float:
        """The most in use at any position first..last."""
        if self._pending is not None:
            self._build()
        lo, hi = self._span(first, last)
        found = float("-inf")
        if lo >= hi:
            return found
        self._push(lo)
        self._push(hi - 1)
        high = self._max
        while lo < hi:
            if lo & 1:
                found = max(found, high[lo])
                lo += 1
            if hi & 1:
                hi -= 1
                found = max(found, high[hi])
            lo >>= 1
            hi >>= 1
        return found

    def levels(self) -> list[float]:
        """What is in use at each position (`peak(p, p)` for every p, in one pass)."""
        if self._pending is not None:
            self._build()
        add, width = self._add, self._width
        for node in range(1, width):     # parents before children
            if add[node]:
                self._hand_down(node)
        return self._max[width: width + self.size]

    def fits(self, first: int, last: int, size: float) -> bool:
        return self.peak(first, last) + size <= self.capacity

    def add(self, first: int, last: int, size: float) -> None:
        if self._pending is not None:
            self._pending.append((first, last, size))
            return
        lo, hi = self._span(first, last)
        if lo >= hi:
            return
        left, right = lo, hi - 1
        high, add, width = self._max, self._add, self._width
        while lo < hi:
            if lo & 1:
                high[lo] += size
                if lo < width:
                    add[lo] += size
                lo += 1
            if hi & 1:
                hi -= 1
                high[hi] += size
                if hi < width:
                    add[hi] += size
            lo >>= 1
            hi >>= 1
        self._pull(left)
        self._pull(right)


def wl0_units(load: gemini.DramLoadOp, layer: dnn.LayerOp) -> int:
    k_range = load.ints_of("upper")[1] - load.ints_of("lower")[1] + 1
    return model.wl0_direct_units(layer, k_range)


FILLS = (GeminiHardware.l2_fill, 0.8, 0.7, 0.6, 0.5)
"""Shares of L2 and WL0 the DRAM queue may fill, tried in turn."""


def allocation_failures(schedule: gemini.ScheduleOp, layers, hw, tensors,
                        ) -> tuple[PlancError | None, PlancError | None]:
    """Would the L2 and the WL0 allocators place everything with the current issue steps?
    (Each one's failure, or None; `tensors`: the L2 tensors, already landed.)"""
    from passes.gemini_allocate_l2 import try_allocate
    from passes.gemini_wl0 import try_allocate_wl0

    return (try_allocate(schedule, layers, hw, tensors),
            try_allocate_wl0(schedule, layers, hw))


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
        queue = sorted(dram.loads, key=lambda ld: (
            min(step_of[d.target] for d in ld.destinations), ld.value("kind") != "weight",
            ld.value("transfer_id")))
        # Byte counts do not see fragmentation: if first fit cannot place the plan, plan again
        # with less of the memory that failed (L2 or WL0).
        l2_fills, wl0_fills = self._fills(hw), list(FILLS)
        for load in queue:
            load.attributes.pop(ISSUE, None)
        tensors = plan_tensors(schedule, layers, hw)
        # What each workload needs and how long it runs: nothing here changes them, and each
        # planning round reads them twice (~1.1k workloads on a 4x4 ResNet-34).
        plans = {(core.id, position): plan_workload(layers[wl.layer], wl, hw)
                 for core in schedule.cores for position, wl in enumerate(core.workloads)}
        while True:
            issues, sequence = self._plan(schedule, layers, hw, l2_fills[0], wl0_fills[0],
                                          queue, step_of, tensors, plans)
            for load, issue in zip(queue, issues, strict=False):
                set_int(load, ISSUE, issue)
            land(tensors, schedule, {load.value("transfer_id"): issue
                                     for load, issue in zip(queue, issues, strict=False)})
            l2_failure, wl0_failure = allocation_failures(schedule, layers, hw, tensors)
            if l2_failure is None and wl0_failure is None:
                break
            for fills, failure in ((l2_fills, l2_failure), (wl0_fills, wl0_failure)):
                if failure is not None:
                    if len(fills) == 1:
                        raise failure
                    fills.pop(0)
        for order, transfer in enumerate(sequence):
            set_int(transfer, ORDER, order)
        # The landed tensors are what gemini-allocate-l2 plans on this IR, and the last
        # `allocation_failures` numbered and placed them all.
        hand_over(op, hw, tensors)

    def _fills(self, hw: GeminiHardware) -> list[float]:
        """The shares of L2 prefetches may fill, tried in turn (the planned budget first)."""
        first = hw.planned_l2_bytes / hw.buffer_bytes
        return [first, *(f * first / FILLS[0] for f in FILLS[1:])]

    def _plan(self, schedule, layers, hw: GeminiHardware, fill: float, wl0_fill: float,
              queue, step_of, tensors: dict[int, list[L2Tensor]],
              plans: dict[tuple[int, int], WorkloadPlan]) -> tuple[list[int], list]:
        """Issue steps of the queued loads when `fill` of L2 and `wl0_fill` of WL0 may be used,
        and the DRAM queue (loads and stores in order). The DRAM and the cores are simulated
        together (`Progress`): each load is listed in L2 as late as it can be without making
        the DRAM wait for it, and no earlier than the budget allows."""
        timelines = {c.id: CoreTimeline(c.id, c.workloads) for c in schedule.cores}
        l2 = {core: Occupancy(hw.buffer_bytes * fill, len(tl.workloads))
              for core, tl in timelines.items()}
        wl0 = {core: Occupancy(hw.wl0_capacity_units * wl0_fill, len(tl.workloads))
               for core, tl in timelines.items()}
        loaded: dict[int, list[L2Tensor]] = defaultdict(list)
        for core, found in tensors.items():
            for tensor in found:
                if tensor.dram is not None and tensor.dram[0] == "load":
                    loaded[tensor.dram[1]].append(tensor)
                else:
                    l2[core].add(tensor.first, tensor.last, tensor.size)
        self._reserve_streams(schedule, plans, wl0)
        memories = {"L2": l2, "WL0": wl0}
        # each load's spans, by queue position (asked again at every issue and commit)
        spans = [self._spans(load, loaded, layers, timelines) for load in queue]
        for found in spans:   # every load is in place at least from its first reader on
            for memory, core, reader, last, size in found:
                memories[memory][core].add(reader, last, size)
        self._check_minimum(schedule, timelines, l2, hw.buffer_bytes * hw.l2_fill, "L2",
                            "bytes")
        self._check_minimum(schedule, timelines, wl0, hw.wl0_capacity_units, "WL0", "units")
        progress = Progress(schedule, plans)
        stores = sorted(schedule.dram.stores, key=lambda s: step_of[
            (s.value("core_id"), s.value("workload_id"))])
        sizes = {s.value("transfer_id"): progress.block_size(s) for s in stores}
        store_index = {s.value("transfer_id"): i for i, s in enumerate(stores)}
        sequence: list = []
        previous, dram_free, next_store = 0, 0.0, 0
        issues = []
        steps = sorted(step_of.values())
        for load, load_spans in zip(queue, spans, strict=True):
            progress.advance()
            # The stores this load reads back (`related_ifmap`) go first: the one queue runs
            # in order, so a map read back ahead of its store would read what DRAM held before.
            needed = max((store_index[t] for t in load.ints_of("related_ifmap")
                          if t in store_index), default=-1)
            while next_store <= needed:
                store = stores[next_store]
                # (its producer runs before the reader, so its end is known by now; if not,
                # the store goes when the channel is free)
                ready = progress.end_at(store) or 0.0
                dram_free = max(dram_free, ready) + \
                    sizes[store.value("transfer_id")] / hw.dram_bytes_per_cycle
                sequence.append(store)
                next_store += 1
            while True:
                step, begin = self._issue(load, load_spans, timelines, step_of, steps,
                                          previous, l2, wl0, progress, dram_free)
                ready = progress.end_at(stores[next_store]) if next_store < len(stores) \
                    else None
                if ready is None or ready > begin:
                    break
                store = stores[next_store]
                dram_free = max(dram_free, ready) + \
                    sizes[store.value("transfer_id")] / hw.dram_bytes_per_cycle
                sequence.append(store)
                next_store += 1
            self._bring_forward(step, load_spans, timelines, memories, commit=True)
            dram_free = begin + load.value("size") / hw.dram_bytes_per_cycle
            progress.done[load.value("transfer_id")] = dram_free
            sequence.append(load)
            previous = step
            issues.append(step)
        sequence += stores[next_store:]
        return issues, sequence

    def _reserve_streams(self, schedule, plans, wl0) -> None:
        for core in schedule.cores:
            for position in range(len(core.workloads)):
                plan = plans[(core.id, position)]
                if plan.stream_units:
                    wl0[core.id].add(position, position, plan.stream_units)

    def _check_minimum(self, schedule, timelines, memory: dict[int, Occupancy], limit: float,
                       name: str, unit: str) -> None:
        """Everything a workload reads, its output and what other workloads keep must fit
        while it runs, before any load is brought forward."""
        for core, occupancy in memory.items():
            levels = occupancy.levels()
            for position in range(len(timelines[core].workloads)):
                used = levels[position]
                if used > limit:
                    wl = timelines[core].workloads[position]
                    error = L2Overflow if name == "L2" else PlancError
                    raise error(f"{name} overflow: the data live at workload {wl.id} of core "
                                f"{core} need {int(used)} {unit}, more than the {int(limit)} "
                                f"that may be filled; use a larger --buffer-size, a smaller "
                                f"--batch or more cores", path=source_path(wl))

    def _spans(self, load, loaded, layers, timelines) -> list[tuple[str, int, int, int, int]]:
        """(memory, core, first reader, last reader, size) of a load on each core it feeds:
        the span it occupies at the least."""
        tensors = loaded.get(load.value("transfer_id"), [])
        if tensors or load.value("kind") != "weight":
            return [("L2", t.core, min(t.readers), t.last, t.size) for t in tensors]
        dests = [d.target for d in load.destinations]
        units = wl0_units(load, layers[_layer_of(timelines, dests[0])])
        spans = []
        for core in sorted({c for c, _ in dests}):
            positions = [w for c, w in dests if c == core]
            spans.append(("WL0", core, min(positions), max(positions), units))
        return spans

    def _issue(self, load: gemini.DramLoadOp, spans, timelines, step_of,
               steps: list[int], previous: int, l2, wl0,
               progress: Progress, dram_free: float) -> tuple[int, float]:
        """The step the load is listed from and when the DRAM starts it. The latest step whose
        listing does not delay the DRAM (its space is free once the workload two before the
        landing one has ended), no earlier than the load ahead in the queue; later if the
        budget has no room there (fitting is monotone in the step: a later step leaves fewer
        positions to occupy, so binary searches find both)."""
        dests = [d.target for d in load.destinations]
        first_use = min(step_of[t] for t in dests)
        end = bisect.bisect_right(steps, first_use)
        low = bisect.bisect_left(steps, previous, 0, end)
        candidates = steps[low:end] or [first_use]
        firsts = {}
        for core, wid in dests:
            firsts[core] = min(firsts.get(core, wid), wid)

        def release(step: int) -> float:
            latest = 0.0
            for core, reader in firsts.items():
                position = timelines[core].position_at(step)
                position = reader if position is None else min(position, reader)
                if position >= 2:
                    ended = progress.end.get((core, position - 2))
                    latest = max(latest, dram_free if ended is None else ended)
            return latest

        index = bisect.bisect_right(range(len(candidates)), dram_free,
                                    key=lambda i: release(candidates[i])) - 1
        index = max(index, 0)
        memories = {"L2": l2, "WL0": wl0}

        def fits(i: int) -> bool:
            return self._bring_forward(candidates[i], spans, timelines, memories, commit=False)

        index = bisect.bisect_left(range(index, len(candidates)), True, key=fits) + index
        # At its first reader a load takes no more than was reserved for it; a load feeding
        # several cores may still find no room on one of them: it goes at its first reader.
        step = candidates[min(index, len(candidates) - 1)]
        return step, max(dram_free, release(step))

    def _bring_forward(self, step: int, spans, timelines, memories, commit: bool) -> bool:
        """Does landing at `step` fit the budget (or, with `commit`, take it)? Only the
        positions before each first reader are new: the rest is reserved already."""
        for memory, core, reader, _, size in spans:
            first = timelines[core].position_at(step)
            first = reader if first is None else min(first, reader)
            if first >= reader:
                continue
            if commit:
                memories[memory][core].add(first, reader - 1, size)
            elif not memories[memory][core].fits(first, reader - 1, size):
                return False
        return True


class Progress:
    """The cores' execution as estimated while the DRAM queue is planned: workloads run in
    step order, each after the previous one on its core, its DRAM loads (`done`, filled in as
    the queue is planned) and the blocks it gets from other cores. `advance` runs every
    workload whose inputs are known; `end` holds their end cycles by (core, position)."""

    def __init__(self, schedule: gemini.ScheduleOp,
                 plans: dict[tuple[int, int], WorkloadPlan]):
        """`plans`: each workload's `plan_workload`, by (core, position)."""
        loads = {ld.value("transfer_id") for ld in schedule.dram.loads}
        producer: dict[int, tuple[int, int]] = {}
        self._ofmap_size: dict[int, int] = {}
        walked = []    # each workload's entries, grouped once for both rounds
        for core in schedule.cores:
            cid = core.id
            for position, wl in enumerate(core.workloads):
                entries = wl.grouped()
                walked.append((cid, position, wl, entries))
                for ofmap in entries.get(gemini.OfmapOp, ()):
                    tid = ofmap.value("transfer_id")
                    producer[tid] = (cid, position)
                    self._ofmap_size[tid] = ofmap.value("size")
        self._where = {}
        order = []
        for cid, position, wl, entries in walked:
            ids = [t for f in entries.get(gemini.IfmapOp, ()) for t in f.transfer_ids]
            weights = entries.get(gemini.WeightOp)
            ids += weights[0].transfer_ids if weights else []
            needs = sorted({t for t in ids if t in loads})
            after = sorted({producer[t] for t in ids
                            if t not in loads and t in producer and producer[t][0] != cid})
            time = plans[(cid, position)].time
            order.append((workload_step(wl), cid, position, time, needs, after))
            self._where[(cid, wl.id)] = (cid, position)
        self._order = sorted(order)
        self._next = 0
        self.end: dict[tuple[int, int], float] = {}
        self.done: dict[int, float] = {}

    def advance(self) -> None:
        while self._next < len(self._order):
            _, core, position, time, needs, after = self._order[self._next]
            if any(t not in self.done for t in needs) or any(p not in self.end for p in after):
                return
            begin = max([self.end.get((core, position - 1), 0.0),
                         *(self.done[t] for t in needs), *(self.end[p] for p in after)])
            self.end[(core, position)] = begin + time
            self._next += 1

    def block_size(self, store: gemini.DramStoreOp) -> int:
        return self._ofmap_size.get(store.value("transfer_id"), 0)

    def end_at(self, store: gemini.DramStoreOp) -> float | None:
        """When a store's producer ends (None while not yet known)."""
        where = self._where.get((store.value("core_id"), store.value("workload_id")))
        return self.end.get(where) if where is not None else None


def _layer_of(timelines, target: tuple[int, int]) -> str:
    core, wid = target
    return timelines[core].workloads[wid].layer

