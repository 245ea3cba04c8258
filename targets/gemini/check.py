"""Gemini scheduler IRs: the whole-document rules of `planc check` on what the workloads
compute (the verifier has checked every record and transfer first).

* `gemini.layer-coverage` (error): the workloads of a layer compute each element of its
  output exactly once. Two workloads whose boxes overlap compute some samples, channels or
  rows twice (a batch group computing samples 1-2 where 2-3 were due), and the stores and
  transfers of the later one overwrite the earlier's; a part that no workload computes is
  never written, and its readers see whatever the buffer held: a wrong result either way.
  The layer's output is its shape in the network when the module holds it, else the
  bounding box of its workloads (a gap at the edge is then invisible; one inside is not).
* `gemini.tile-input` (error): each intra-core tile reads its input rows, columns and channels
  from the workload's input tensor in L2 (`ifmap`, or the second one of a two-input tile); a
  tile whose input box is larger than that tensor in some dimension reads past what was
  loaded or sent (the receptive field cut one row short): a wrong result. Tile boxes and
  `ifmap` boxes are compared by extent, since Gemini's IRs place them in different frames
  (ResNet-50's Conv_109: tile rows 4-6 of an ifmap written as rows 0-2).

* `gemini.dram-read-after-write` (error): a DRAM load that reads back a map stored to DRAM
  (its `related_ifmap` names the store) comes after that store in the DRAM queue. All cores
  share one DRAM channel whose transfers run one after another in `tensor_order`; a load
  queued before the store it reads gets what DRAM held before the store: a wrong result
  (planc's gemini-dram-order once queued reloads by when L2 had room, ahead of their stores).

The first two are decided on boxes, one pass over each layer's workloads sorted by their first
sample (a layer of Gemini's IRs has at most a few hundred); the third on the queue positions
the snapshots give, one look per `related_ifmap` entry.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from dialects import gemini
from dialects.findings import ERROR, Finding, at_op

Box = tuple[list[int], list[int]]


def check(module: ModuleOp, options: Any = None) -> list[Finding]:
    schedule = next((op for op in module.ops if isinstance(op, gemini.ScheduleOp)), None)
    if schedule is None:
        return []
    return [*coverage_findings(schedule, _layer_shapes(module)), *tile_findings(schedule),
            *read_after_write_findings(schedule)]


def _layer_shapes(module: ModuleOp) -> dict[str, list[int]]:
    """NCHW output shapes of the network's layers, when the module holds the network."""
    from dialects import dnn

    graph = dnn.find_graph(module)
    if graph is None:
        return {}
    return {layer.name_: layer.out_type.nchw for layer in graph.layers}


def _volume(box: Box) -> int:
    volume = 1
    for lo, hi in zip(*box, strict=False):
        volume *= hi - lo + 1
    return volume


def _overlap(a: Box, b: Box) -> Box | None:
    lower = [max(x, y) for x, y in zip(a[0], b[0], strict=False)]
    upper = [min(x, y) for x, y in zip(a[1], b[1], strict=False)]
    return (lower, upper) if all(lo <= hi for lo, hi in zip(lower, upper, strict=False)) \
        else None


def coverage_findings(schedule: gemini.ScheduleOp, shapes: dict[str, list[int]],
                      ) -> list[Finding]:
    by_layer: dict[str, list[tuple[int, int, gemini.WorkloadOp]]] = defaultdict(list)
    for core in schedule.cores:
        for position, wl in enumerate(core.workloads):
            by_layer[wl.layer].append((position, core.id, wl))
    findings = []
    for layer, workloads in by_layer.items():
        found = _layer_coverage(layer, workloads, shapes.get(layer))
        if found is not None:
            findings.append(found)
    return findings


def _layer_coverage(layer: str, workloads: list, shape: list[int] | None) -> Finding | None:
    """The first overlap of two workloads of `layer` (reported at the later one in its core's
    order), else a part of the output no workload computes."""
    boxes = sorted(((wl.box, core, position, wl) for position, core, wl in workloads),
                   key=lambda entry: (entry[0][0][0], entry[1], entry[2]))
    active: list[tuple[Box, int, int, gemini.WorkloadOp]] = []
    for entry in boxes:
        box = entry[0]
        active = [other for other in active if other[0][1][0] >= box[0][0]]
        for other in active:
            common = _overlap(box, other[0])
            if common is None:
                continue
            later, earlier = (entry, other) if (entry[1], entry[2]) > (other[1], other[2]) \
                else (other, entry)
            return at_op(
                later[3], "gemini.layer-coverage", ERROR,
                f"workload {later[3].id} of core {later[1]} computes {common[0]}..{common[1]} "
                f"of layer {layer}, which workload {earlier[3].id} of core {earlier[1]} "
                "computes too: each part of a layer's output is computed once", "workload")
        active.append(entry)
    extent = ([0] * 4, [d - 1 for d in shape]) if shape else (
        [min(b[0][0][i] for b in boxes) for i in range(4)],
        [max(b[0][1][i] for b in boxes) for i in range(4)])
    computed = sum(_volume(b[0]) for b in boxes)
    if computed < _volume(extent):
        last = boxes[-1]
        return at_op(last[3], "gemini.layer-coverage", ERROR,
                     f"the workloads of layer {layer} compute {computed} of the "
                     f"{_volume(extent)} elements of its output {extent[0]}..{extent[1]}: the "
                     "rest is never written", "workload")
    return None


def tile_findings(schedule: gemini.ScheduleOp) -> list[Finding]:
    findings = []
    for wl in schedule.workloads():
        ifmaps = [(op.ints_of("lower"), op.ints_of("upper")) for op in wl.ifmaps]
        if not ifmaps:
            continue
        extents = [[hi - lo + 1 for lo, hi in zip(*box, strict=False)] for box in ifmaps]
        for tile in wl.children(gemini.TileOp):
            for suffix in ("", "2"):
                lower, upper = tile.ints_of(f"ifmap_lower{suffix}"), \
                    tile.ints_of(f"ifmap_upper{suffix}")
                if not lower or not upper:
                    continue
                need = [hi - lo + 1 for lo, hi in zip(lower, upper, strict=False)]
                if any(all(n <= e for n, e in zip(need, extent, strict=False))
                       for extent in extents):
                    continue
                findings.append(at_op(
                    tile, "gemini.tile-input", ERROR,
                    f"tile reads an input box of {need} (N, C, H, W) but no ifmap of workload "
                    f"{wl.id} is that large ({', '.join(map(str, extents))}): it reads past "
                    "what was loaded or sent", f"ifmap_upper{suffix}"))
                break
    return findings


def read_after_write_findings(schedule: gemini.ScheduleOp) -> list[Finding]:
    """Each DRAM load queued before a store it reads back (the latest such store), at the
    load's `related_ifmap` entry naming it. Queue positions are those the verifier read from
    the L2 and WL0 snapshots; a transfer no snapshot orders (an IR without snapshots) has no
    position, and nothing is said about it."""
    dram = schedule.dram
    if dram is None or not any(load.ints_of("related_ifmap") for load in dram.loads):
        return []
    position = gemini.TensorOrderCheck.positions(schedule)
    findings = []
    for load in dram.loads:
        tid = load.value("transfer_id")
        mine = position.get(("load", tid))
        if mine is None:
            continue
        later = [(position[("store", store)], i, store)
                 for i, store in enumerate(load.ints_of("related_ifmap"))
                 if position.get(("store", store), -1) > mine]
        if later:
            order, i, store = max(later)
            findings.append(at_op(
                load, "gemini.dram-read-after-write", ERROR,
                f"DRAM load {tid} reads back store {store} (related_ifmap) but is queued at "
                f"tensor_order {mine}, before the store at {order}: the DRAM queue runs in "
                "tensor_order, so the load reads what DRAM held before the store",
                "related_ifmap", i))
    return findings
