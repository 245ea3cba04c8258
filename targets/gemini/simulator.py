"""Simulate a Gemini schedule: what it costs, and (with its network) that it computes right.

`schedule_metrics` measures a schedule as it stands in the IR (imported or produced): compute
cycles (the IR's `time`), the latency once the one DRAM channel is modelled (loads and stores in
`tensor_order`, each starting when the DRAM is free and its L2 space is (being) released; a
workload waits for its DRAM inputs and for blocks from other cores), peak L2 bytes and DRAM
bytes.

`check_tiles` runs the schedule functionally against its `dnn` graph: every workload computes
its box from nothing but the blocks its ifmaps list (core-to-core blocks as computed by their
producers, DRAM loads from what was stored, or the network inputs), with everything it was not
sent set to NaN; its result must equal the whole-network reference, and the stored network
outputs must be complete and equal. DRAM holds a stored block for a load only when the store is
ahead of the load in the DRAM queue (`tensor_order`, as the timing model runs it): a load queued
before the store it reads gets NaN there (what DRAM held before), and when that reaches a result
the problem names the load, the store and their positions.
"""

from __future__ import annotations

import argparse
import bisect
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp

from dialects import dnn, gemini
from targets.gemini import model
from targets.gemini.dnn_interpreter import Array, evaluate, run_graph
from targets.gemini.plan import layer_table, sources, workloads_in_order

SOURCE_NAME = "gemini.from"
"""What gemini-receptive-field names on fmap DRAM loads: the layer or input they read."""


@dataclass
class Metrics:
    compute_cycles: int
    """Sum of all workloads' `time`."""
    critical_compute_cycles: int
    """The busiest core's sum of `time`."""
    latency_cycles: float
    """End of the last workload or DRAM transfer, DRAM queue included."""
    peak_l2_bytes: int
    dram_load_bytes: int
    dram_store_bytes: int
    workloads: int

    @property
    def dram_bytes(self) -> int:
        return self.dram_load_bytes + self.dram_store_bytes

    def as_dict(self, clock_hz: float) -> dict[str, Any]:
        return {"compute_cycles": self.compute_cycles,
                "critical_compute_cycles": self.critical_compute_cycles,
                "latency_cycles": round(self.latency_cycles),
                "modeled_time_s": self.latency_cycles / clock_hz,
                "peak_l2_bytes": self.peak_l2_bytes, "dram_bytes": self.dram_bytes,
                "dram_load_bytes": self.dram_load_bytes,
                "dram_store_bytes": self.dram_store_bytes, "workloads": self.workloads}


def dram_orders(schedule: gemini.ScheduleOp) -> dict[tuple[str, int], int]:
    """Each DRAM transfer's position in the DRAM queue, read from the snapshots."""
    return gemini.TensorOrderCheck.positions(schedule)


def _landing(schedule: gemini.ScheduleOp) -> dict[int, list[tuple[int, int]]]:
    """Where each DRAM load first appears: [(core, position)] of its first listings."""
    first: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for core in schedule.cores:
        seen: set[int] = set()
        for position, wl in enumerate(core.workloads):
            listed = [t for entry in wl.buffer if entry.from_dram for t in entry.transfer_ids]
            listed += [t for entry in wl.wl0 if entry.value("source") == "DDR"
                       for t in entry.transfer_ids]
            for tid in listed:
                if tid not in seen:
                    seen.add(tid)
                    first[tid].append((core.id, position))
    return first


def schedule_metrics(schedule: gemini.ScheduleOp, bytes_per_cycle: float) -> Metrics:
    dram = schedule.dram
    loads = {ld.value("transfer_id"): ld for ld in (dram.loads if dram else [])}
    stores = {s.value("transfer_id"): s for s in (dram.stores if dram else [])}
    producer: dict[int, tuple[int, int, gemini.OfmapOp]] = {}
    for core in schedule.cores:
        for position, wl in enumerate(core.workloads):
            for ofmap in wl.ofmaps:
                producer[ofmap.value("transfer_id")] = (core.id, position, ofmap)
    orders = dram_orders(schedule)
    queue = sorted([("load", t) for t in loads] + [("store", t) for t in stores],
                   key=lambda e: (orders.get(e, 1 << 30), e[0] == "store", e[1]))
    landing = _landing(schedule)
    cores = {core.id: core.workloads for core in schedule.cores}
    end: dict[tuple[int, int], float] = {}
    done: dict[tuple[str, int], float] = {}
    next_position = {core: 0 for core in cores}
    dram_free, head = 0.0, 0

    def needs(core: int, position: int) -> list:
        wl = cores[core][position]
        deps: list = [(core, position - 1)] if position else []
        ids = [t for f in wl.ifmaps for t in f.transfer_ids]
        ids += wl.weight.transfer_ids if wl.weight is not None else []
        for tid in ids:
            if tid in loads:
                deps.append(("load", tid))
            elif tid in producer and producer[tid][0] != core:
                deps.append(producer[tid][:2])
        return deps

    def known(dep) -> float | None:
        return done.get(dep) if isinstance(dep[0], str) else end.get(dep)

    def release(entry) -> float | None:
        kind, tid = entry
        if kind == "store":
            core, position, _ = producer[tid]
            return end.get((core, position))
        times = []
        for core, position in landing.get(tid, []):
            # Its space is free once the workload before its landing one has started.
            if position < 2:
                times.append(0.0)
            elif (core, position - 2) in end:
                times.append(end[(core, position - 2)])
            else:
                return None
        return max(times, default=0.0)

    total = sum(len(w) for w in cores.values())
    while len(end) < total or head < len(queue):
        progressed = False
        while head < len(queue):
            ready = release(queue[head])
            if ready is None:
                break
            kind, tid = queue[head]
            size = loads[tid].value("size") if kind == "load" else \
                producer[tid][2].value("size")
            dram_free = max(dram_free, ready) + size / bytes_per_cycle
            done[queue[head]] = dram_free
            head += 1
            progressed = True
        for core, workloads in cores.items():
            position = next_position[core]
            while position < len(workloads):
                times = [known(d) for d in needs(core, position)]
                if any(t is None for t in times):
                    break
                end[(core, position)] = max(times, default=0.0) + \
                    float(workloads[position].value("time") or 0)
                position += 1
                progressed = True
            next_position[core] = position
        if not progressed:   # a dependency cycle through the queue: let the DRAM head go
            kind, tid = queue[head]
            done[queue[head]] = dram_free = dram_free + (
                loads[tid].value("size") if kind == "load" else 0) / bytes_per_cycle
            head += 1
    per_core = [sum(float(wl.value("time") or 0) for wl in w) for w in cores.values()]
    peak = max((sum(t.value("size") for t in wl.buffer) for w in cores.values() for wl in w),
               default=0)
    return Metrics(int(sum(per_core)), int(max(per_core, default=0)),
                   max([*end.values(), *done.values(), 0.0]), peak,
                   sum(ld.value("size") for ld in loads.values()),
                   sum(producer[t][2].value("size") for t in stores if t in producer),
                   total)


# ---------------------------------------------------------------------------------------------
# Functional check
# ---------------------------------------------------------------------------------------------


@dataclass
class TileCheck:
    ok: bool
    max_abs_error: float
    workloads: int
    problem: str | None = None


def check_tiles(module: ModuleOp, seed: int = 0) -> TileCheck:
    """Run every workload on exactly the data its transfers deliver; compare with numpy."""
    graph = dnn.find_graph(module)
    schedule = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    reference = run_graph(graph, seed)
    layers = layer_table(graph)
    inputs = {op.input_name.data: reference[op.output] for op in graph.inputs}
    loads = {ld.value("transfer_id"): ld for ld in schedule.dram.loads}
    blocks: dict[int, tuple[gemini.WorkloadOp, gemini.OfmapOp]] = {}
    for wl in schedule.workloads():
        for ofmap in wl.ofmaps:
            blocks[ofmap.value("transfer_id")] = (wl, ofmap)
    computed: dict[gemini.WorkloadOp, Array] = {}
    stored: dict[str, Array] = {}
    worst = 0.0
    delivery = Delivery(layers, loads, blocks, computed, stored, inputs,
                        DramQueue(schedule, dram_orders(schedule)))
    for wl in workloads_in_order(schedule):
        layer = layers[wl.layer]
        args = []
        delivery.early = None
        received = [tid for ifmap in wl.ifmaps for tid in ifmap.transfer_ids]
        for index, value in enumerate(layer.inputs):
            if index < layer.ACTIVATIONS:
                args.append(delivery.input(received, value))
            else:
                args.append(_weights(wl, value, reference[value], loads))
        with np.errstate(all="ignore"):
            out = evaluate(layer, args).reshape(layer.out_type.nchw)
        box = _slices(wl.box)
        result = out[box]
        expected = reference[layer.output].reshape(layer.out_type.nchw)[box]
        if np.isnan(result).any() and delivery.early is not None:
            load, at, store, later = delivery.early
            return TileCheck(False, float("inf"), len(computed),
                             f"workload {wl.id} of core {wl.core.id} ({wl.layer}) reads DRAM "
                             f"load {load} at tensor_order {at}, before store {store} at "
                             f"{later} writes what it reads: the DRAM queue runs in "
                             "tensor_order, so the load gets what DRAM held before")
        if np.isnan(result).any():
            return TileCheck(False, float("inf"), len(computed),
                             f"workload {wl.id} of core {wl.core.id} ({wl.layer}) lacks input "
                             f"data: its ifmaps do not deliver its receptive field")
        worst = max(worst, float(np.max(np.abs(result - expected), initial=0.0)))
        computed[wl] = result
        for ofmap in wl.ofmaps:
            if any(d.to_dram for d in ofmap.destinations):
                image = stored.setdefault(wl.layer, np.full(layer.out_type.nchw, np.nan))
                lower = [a + b for a, b in zip(wl.box[0], ofmap.ints_of("lower"), strict=False)]
                upper = [a + b for a, b in zip(wl.box[0], ofmap.ints_of("upper"), strict=False)]
                image[_slices((lower, upper))] = out[_slices((lower, upper))]
    for output in graph.outputs:
        for src in sources(output.value):
            producer = src.owner
            if not isinstance(producer, dnn.LayerOp):
                continue
            image = stored.get(producer.name_)
            if image is None or np.isnan(image).any():
                return TileCheck(False, float("inf"), len(computed),
                                 f"network output {output.output_name.data} is not completely "
                                 f"stored to DRAM")
            want = reference[producer.output].reshape(image.shape)
            worst = max(worst, float(np.max(np.abs(image - want), initial=0.0)))
    return TileCheck(worst <= 1e-9, worst, len(computed),
                     None if worst <= 1e-9 else f"results differ by {worst:g}")


def _slices(box) -> tuple[slice, ...]:
    return tuple(slice(lo, hi + 1) for lo, hi in zip(*box, strict=True))


class DramQueue:
    """Which stored blocks DRAM holds when a load runs: those of stores ahead of it in the
    queue. Stores are kept per layer in queue order, so a load looks only at the stores of its
    source layer that come after it."""

    def __init__(self, schedule: gemini.ScheduleOp, orders: dict[tuple[str, int], int]):
        self.orders = orders
        self.stores: dict[str, list[tuple[int, int, list[int], list[int]]]] = defaultdict(list)
        for store in schedule.dram.stores if schedule.dram else []:
            order = orders.get(("store", store.value("transfer_id")))
            if order is not None:
                self.stores[store.value("layer_name")].append(
                    (order, store.value("transfer_id"), store.ints_of("lower"),
                     store.ints_of("upper")))
        for found in self.stores.values():
            found.sort()

    def later(self, load: gemini.DramLoadOp, layer: str):
        """(store, its position, the part of the load's box it writes) for each store of
        `layer` queued after `load` (none when the load has no position)."""
        order = self.orders.get(("load", load.value("transfer_id")))
        if order is None:
            return
        box = (load.ints_of("lower"), load.ints_of("upper"))
        found = self.stores.get(layer, [])
        for at, tid, lower, upper in found[bisect.bisect_left(found, (order + 1,)):]:
            common = ([max(a, b) for a, b in zip(box[0], lower, strict=False)],
                      [min(a, b) for a, b in zip(box[1], upper, strict=False)])
            if all(lo <= hi for lo, hi in zip(*common, strict=False)):
                yield tid, at, common


@dataclass
class Delivery:
    """What the transfers of a schedule deliver, as the tile-by-tile check replays it."""

    layers: dict[str, dnn.LayerOp]
    loads: dict[int, gemini.DramLoadOp]
    blocks: dict[int, tuple[gemini.WorkloadOp, gemini.OfmapOp]]
    computed: dict[gemini.WorkloadOp, Array]
    stored: dict[str, Array]
    inputs: dict[str, Array]
    queue: DramQueue | None = None
    early: tuple[int, int, int, int] | None = None
    """(load, its position, store, its position): the last load of the current workload that
    ran before a store of what it reads."""

    def input(self, received: list[int], value) -> Array:
        """The input feature map as the workload sees it: every source that holds part of it
        (several through a concatenation) NaN but for the blocks sent to the workload from
        that source, then the views between the sources and the layer."""
        held = {src: np.full(dnn.fmap(src).nchw, np.nan) for src in sources(value)}
        for tid in received:
            self._fill(tid, held)
        data = {src: full.reshape(dnn.fmap(src).shape_list) for src, full in held.items()}
        return _through_views(value, data)

    def _fill(self, tid: int, held: dict) -> None:
        if tid in self.loads:
            load = self.loads[tid]
            name = load.attributes.get(SOURCE_NAME)
            origin = next((src for src in held if name is not None and
                           _value_name(src) == name.data), None)
            if origin is None:
                return
            box = (load.ints_of("lower"), load.ints_of("upper"))
            data = self.stored.get(origin.owner.name_) \
                if isinstance(origin.owner, dnn.LayerOp) else \
                self.inputs[origin.owner.input_name.data].reshape(held[origin].shape)
            if data is not None:
                held[origin][_slices(box)] = data[_slices(box)]
                if self.queue is not None and isinstance(origin.owner, dnn.LayerOp):
                    self._unwritten(load, origin.owner.name_, held[origin])
            return
        producer, ofmap = self.blocks[tid]
        origin = self.layers[producer.layer].output
        if origin not in held or producer not in self.computed:
            return
        rel = (ofmap.ints_of("lower"), ofmap.ints_of("upper"))
        absolute = ([a + b for a, b in zip(producer.box[0], rel[0], strict=False)],
                    [a + b for a, b in zip(producer.box[0], rel[1], strict=False)])
        held[origin][_slices(absolute)] = self.computed[producer][_slices(rel)]


    def _unwritten(self, load: gemini.DramLoadOp, layer: str, held: Array) -> None:
        """NaN where the load reads blocks whose stores the queue runs after it."""
        order = self.queue.orders.get(("load", load.value("transfer_id")))
        for store, at, common in self.queue.later(load, layer):
            held[_slices(common)] = np.nan
            self.early = (load.value("transfer_id"), order, store, at)


def _value_name(value) -> str:
    owner = value.owner
    return owner.input_name.data if isinstance(owner, dnn.InputOp) else owner.name_


def _through_views(value, known: dict) -> Array:
    """`value` computed from `known` values through the views between (no recursion: chains
    of concatenations may be long)."""
    known = dict(known)
    stack = [value]
    while stack:
        top = stack[-1]
        if top in known:
            stack.pop()
            continue
        view = top.owner
        missing = [v for v in view.inputs if v not in known]
        if missing:
            stack += missing
            continue
        known[top] = evaluate(view, [known[v] for v in view.inputs])
        stack.pop()
    return known[value]


def _weights(wl: gemini.WorkloadOp, value, reference: Array, loads) -> Array:
    """The layer's weights with the output channels this workload did not load set to NaN."""
    weight = wl.weight
    if weight is None:
        return reference
    masked = np.full(reference.shape, np.nan)
    for tid in weight.transfer_ids:
        load = loads.get(tid)
        if load is not None:
            k0, k1 = load.ints_of("lower")[1], load.ints_of("upper")[1]
            masked[k0: k1 + 1] = reference[k0: k1 + 1]
    return masked


def simulate_schedule(module: ModuleOp, options: argparse.Namespace | None = None,
                      ) -> dict[str, Any]:
    """`planc simulate` on a Gemini schedule: metrics, and the functional check when the
    network is known (schedules planc just produced)."""
    schedule = next(op for op in module.ops if isinstance(op, gemini.ScheduleOp))
    bandwidth = getattr(options, "dram_bw", None)
    if bandwidth is None:
        bandwidth = model.GeminiHardware.dram_bytes_per_cycle
    else:
        model.check_bandwidth(bandwidth)
    report: dict[str, Any] = {"ok": True}
    report.update(schedule_metrics(schedule, bandwidth).as_dict(
        model.GeminiHardware.clock_hz))
    report["device_bytes"] = report["peak_l2_bytes"]
    if dnn.find_graph(module) is not None and not getattr(options, "cost_only", False):
        check = check_tiles(module, getattr(options, "seed", 0))
        report.update(ok=check.ok, max_abs_error=check.max_abs_error)
        if check.problem:
            report["problem"] = check.problem
    return report
