"""What each core's L2 buffer holds, and when: the tensors behind the IR's `buffer` snapshots.

`plan_tensors` derives them from a scheduled IR (after gemini-receptive-field):

* consumer-side input tensors, one per (source layer, core, batch group) assembled from the
  producer blocks, or one per fmap DRAM load; they enter L2 when the first producer block is
  computed (same step, on the consumer's core) or when the DRAM load lands (`gemini.issue`),
  and leave after their last reader;
* weights staged in L2 (layers whose weights are streamed to WL0 tile by tile, and the PE
  layers of a segment with several batch groups whose weights stay resident in L2 rather
  than in WL0), one per destination core, from the load's landing to the last user;
* staging copies ("ofmap") of outputs stored to DRAM, and on-chip copies ("ifmap" with this
  core as source) of outputs only other cores read, live during the producing workload.

`first_fit` is Gemini's address allocation, reconstructed from the public IRs (it reproduces
every address of the ResNet-34 IR): at each workload, free the tensors whose last listing was
the previous workload, then place the new ones in order of (last use descending, tensor id
descending) at the lowest address where they fit.
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from operator import add

from xdsl.dialects.builtin import ModuleOp

from dialects import dnn, gemini
from dialects.utils import walk_ops
from targets.gemini import model
from targets.gemini.model import Box, GeminiHardware
from targets.gemini.plan import (
    ISSUE,
    get_int,
    group_of,
    groups_of,
    wl0_resident,
    workload_step,
)


@dataclass
class L2Tensor:
    core: int
    kind: str
    """"ifmap", "weight" or "ofmap" (store staging), as in the IR."""
    size: int
    box: Box
    align: int
    bitwidth: int
    ready: int
    """Global step from which it may be in L2."""
    readers: set[int]
    """Positions on its core of the workloads that read it."""
    producer_position: int | None = None
    transfer_ids: list[int] = field(default_factory=list)
    pieces: list[tuple] = field(default_factory=list)
    """The blocks that form it: (core, layer, box, size, transfer id, "core" or "DRAM");
    `sources()` makes the IR's source attributes from them when the snapshot is written."""
    layer_name: str | None = None
    dram: tuple[str, int] | None = None
    """("load", id) or ("store", id) when it comes from or goes to DRAM."""
    first: int = 0
    """Position on its core where it enters L2."""
    last: int = 0
    """Position of its last listing."""
    tensor_id: int = -1
    address: int = -1

    def sources(self) -> list[gemini.SourceAttr]:
        return [_source(core, layer, (tuple(box[0]), tuple(box[1])), size, tid, kind)
                for core, layer, box, size, tid, kind in self.pieces]


def weight_in_l2(layer: dnn.LayerOp, k_range: int, hw: GeminiHardware) -> bool:
    """Are this layer's weights staged in L2 (rather than read straight into WL0)? Streamed
    layers, and the layers of a segment with several batch groups whose weights stay
    resident in L2 across the groups; those that gemini-batch-cut keeps resident in WL0
    (`wl0_resident`, as Gemini's batch-4 ResNet-50 IR keeps its first stages' weights in
    WL0, source DDR, in the second batch group) are read straight into WL0 once."""
    return model.streams_weights(layer, k_range, hw) or (
        groups_of(layer) > 1 and not wl0_resident(layer))


@dataclass
class CoreTimeline:
    """The workloads of one core and the position of each global step on it."""

    core: int
    workloads: list[gemini.WorkloadOp]

    def __post_init__(self) -> None:
        steps = [workload_step(wl) for wl in self.workloads]
        # Positions run in step order; the running maximum keeps a binary search exact for
        # the first position at or after a step even if an imported IR breaks that order.
        self.steps = steps
        self._reach = list(itertools.accumulate(steps, max))

    def position_at(self, step: int) -> int | None:
        """The first position whose workload runs at or after `step` (a binary search)."""
        position = bisect.bisect_left(self._reach, step)
        return position if position < len(self.steps) else None


def plan_tensors(schedule: gemini.ScheduleOp, layers: dict[str, dnn.LayerOp],
                 hw: GeminiHardware) -> dict[int, list[L2Tensor]]:
    """The L2 tensors of every core (positions set; DRAM loads land at `gemini.issue`, or at
    their first reader when not yet ordered)."""
    producer: dict[int, tuple[gemini.WorkloadOp, gemini.OfmapOp]] = {}
    grouped: dict[int, dict] = {}   # each workload's entries by kind, by id: one walk each
    for wl in schedule.workloads():
        entries = grouped[id(wl)] = wl.grouped()
        for ofmap in entries.get(gemini.OfmapOp, ()):
            producer[ofmap.value("transfer_id")] = (wl, ofmap)
    dram = schedule.dram
    loads = {load.value("transfer_id"): load for load in (dram.loads if dram else [])}
    stores = {s.value("transfer_id"): s for s in (dram.stores if dram else [])}
    tensors: dict[int, list[L2Tensor]] = {}
    facts: dict[int, tuple] = {}     # by id of the producing workload (ops hash in Python)
    groups: dict[int, tuple] = {}
    in_l2: dict[tuple[str, int], bool] = {}
    boxes: dict[int, tuple[tuple[list[int], list[int]], int]] = {}
    for core in schedule.cores:
        timeline = CoreTimeline(core.id, core.workloads)
        found: dict[tuple, L2Tensor] = {}
        blocks: dict[tuple, set[int]] = defaultdict(set)
        for position, wl in enumerate(timeline.workloads):
            entries = grouped[id(wl)]
            for ifmap in entries.get(gemini.IfmapOp, ()):
                ids = ifmap.transfer_ids
                if ids[0] in loads:
                    key = ("load", ids[0])
                    if key not in found:
                        found[key] = _load_tensor(core.id, wl, ifmap, loads[ids[0]])
                else:
                    first, _ = producer[ids[0]]
                    key = groups.get(id(first))
                    if key is None:   # a producer's blocks feed several ifmaps
                        key = groups[id(first)] = ("core", first.layer,
                                                   group_of(layers[first.layer], first.box))
                    if key not in found:
                        found[key] = L2Tensor(core.id, "ifmap", 0, ([], []),
                                              ifmap.value("align") or 8,
                                              ifmap.value("bitwidth") or 8, 0, set())
                    blocks[key].update(ids)
                found[key].readers.add(position)
            name = wl.layer
            layer = layers[name]
            weights = entries.get(gemini.WeightOp)
            if weights:
                weight = weights[0]
                k_range = weight.ints_of("upper")[1] - weight.ints_of("lower")[1] + 1
                kept = in_l2.get((name, k_range))
                if kept is None:    # the same few answers for every workload of a layer
                    kept = in_l2[(name, k_range)] = weight_in_l2(layer, k_range, hw)
                if kept:
                    tid = weight.transfer_ids[0]
                    key = ("weight", tid)
                    if key not in found:
                        found[key] = _weight_tensor(core.id, wl, weight, loads[tid])
                    found[key].readers.add(position)
            staged = _staging(core.id, position, wl, entries.get(gemini.OfmapOp, ()), stores,
                              layer.out_type.bits)
            if staged is not None:
                found[("ofmap", wl.id)] = staged
        for key, ids in blocks.items():
            _assemble(found[key], sorted(ids), producer, facts, boxes)
        for tensor in found.values():
            first = timeline.position_at(tensor.ready)
            earliest_reader = min(tensor.readers)
            tensor.first = earliest_reader if first is None else min(first, earliest_reader)
            tensor.last = max(tensor.readers)
        tensors[core.id] = list(found.values())
    return tensors


def land(tensors: dict[int, list[L2Tensor]], schedule: gemini.ScheduleOp,
         issues: dict[int, int]) -> None:
    """Move the DRAM-loaded tensors of `plan_tensors` to where loads issued at `issues`
    (transfer id -> step) land, as `plan_tensors` would place them after the issues are
    recorded (the other tensors do not depend on them)."""
    for core in schedule.cores:
        timeline = CoreTimeline(core.id, core.workloads)
        for tensor in tensors.get(core.id, []):
            if tensor.dram is None or tensor.dram[0] != "load" or tensor.dram[1] not in issues:
                continue
            tensor.ready = issues[tensor.dram[1]]
            first = timeline.position_at(tensor.ready)
            earliest = min(tensor.readers)
            tensor.first = earliest if first is None else min(first, earliest)


# ---------------------------------------------------------------------------------------------
# Handing a plan from gemini-dram-order to gemini-allocate-l2
# ---------------------------------------------------------------------------------------------


@dataclass
class _Handover:
    fingerprint: list
    hw: GeminiHardware
    tensors: dict[int, list[L2Tensor]]


_HANDED: list[_Handover] = []
"""At most one plan, from the last gemini-dram-order, until the next pass takes it or a later
gemini-dram-order replaces it (it keeps its IR alive meanwhile)."""


def fingerprint(module: ModuleOp) -> list:
    """Everything in `module` a plan can depend on: every op with its place (parent block),
    properties, attributes, operands and their types and result types. Attributes and types are
    immutable, so an unchanged IR gives an equal list (compared by identity first, which makes
    comparing cheap), and any edit of the IR changes it."""
    out: list = [module, module.properties.copy(), module.attributes.copy()]
    for op in walk_ops(module)[1:]:
        operands = op._operands  # noqa: SLF001 -- the tuple itself (`operands` makes a view)
        results = op.results
        if operands or results:
            out.append((op, op.parent, op.properties.copy(), op.attributes.copy(), operands,
                        tuple([v.type for v in operands]), tuple([r.type for r in results])))
        else:
            # (most ops have no attributes: None stands for the empty dict)
            out.append((op, op.parent, op.properties.copy(),
                        op.attributes.copy() if op.attributes else None))
    return out


def hand_over(module: ModuleOp, hw: GeminiHardware, tensors: dict[int, list[L2Tensor]]) -> None:
    """Keep `tensors` (what `plan_tensors` gives for `module` as it is now, numbered and
    allocated) for `take_over`: gemini-allocate-l2 then need not plan them again."""
    _HANDED[:] = [_Handover(fingerprint(module), hw, tensors)]


def take_over(module: ModuleOp, hw: GeminiHardware) -> dict[int, list[L2Tensor]] | None:
    """The tensors `hand_over` kept, numbered and allocated, if they were planned for this very
    IR (nothing in it changed since) with the same hardware; else None. Taken once."""
    if not _HANDED:
        return None
    handed = _HANDED.pop()
    if handed.hw != hw or handed.fingerprint != fingerprint(module):
        return None
    return handed.tensors


@functools.lru_cache(maxsize=1 << 14)
def _source(core: int, layer: str | None, box: tuple, size: int, tid: int,
            kind: str) -> gemini.SourceAttr:
    values = {"core_id": gemini.int_attr(core), "lower": gemini.ints_attr(box[0]),
              "upper": gemini.ints_attr(box[1]), "size": gemini.int_attr(size),
              "transfer_id": gemini.int_attr(tid), "kind": gemini.str_attr(kind)}
    if layer is not None:
        values["layer_name"] = gemini.str_attr(layer)
    return gemini.SourceAttr.from_fields(values)


def _load_tensor(core: int, wl: gemini.WorkloadOp, ifmap: gemini.IfmapOp,
                 load: gemini.DramLoadOp) -> L2Tensor:
    tid = load.value("transfer_id")
    box = (load.ints_of("lower"), load.ints_of("upper"))
    name = load.attributes.get("gemini.from")
    issue = get_int(load, ISSUE)
    piece = (-1, name.data if name else None, box, load.value("size"), tid, "DRAM")
    return L2Tensor(core, "ifmap", load.value("size"), box, ifmap.value("align") or 8,
                    ifmap.value("bitwidth") or 8,
                    issue if issue is not None else workload_step(wl), set(),
                    transfer_ids=[tid], pieces=[piece], dram=("load", tid))


def _assemble(tensor: L2Tensor, ids: list[int], producer: dict, facts: dict,
              boxes: dict) -> None:
    """A core-sourced tensor is the union of the blocks its readers list (`boxes`: each
    block's box in its layer and size, by transfer id, kept for the next tensor; nothing
    changes them; `facts`: by id of the producing workload)."""
    pieces = []
    for tid in ids:
        wl, ofmap = producer[tid]
        fact = facts.get(id(wl))
        if fact is None:
            fact = facts[id(wl)] = _producer_facts(wl)
        block = boxes.get(tid)
        if block is None:   # a block sent to several cores is a piece of a tensor on each
            origin = fact[0]
            block = boxes[tid] = ((list(map(add, origin, ofmap.ints_of("lower"))),
                                   list(map(add, origin, ofmap.ints_of("upper")))),
                                  ofmap.value("size"))
        pieces.append((block[0], fact, block[1]))
    if len(pieces) == 1:
        tensor.box = pieces[0][0]
    else:   # `model.union` of all the pieces, a coordinate at a time
        tensor.box = (list(map(min, *(piece[0] for piece, _, _ in pieces))),
                      list(map(max, *(piece[1] for piece, _, _ in pieces))))
    tensor.size = model.fmap_bytes(tensor.box, tensor.bitwidth)
    tensor.transfer_ids = ids
    tensor.pieces = [(fact[1], fact[2], piece, size, tid, "core")
                     for (piece, fact, size), tid in zip(pieces, ids, strict=False)]
    tensor.ready = min(fact[3] for _, fact, _ in pieces)


def _producer_facts(wl: gemini.WorkloadOp) -> tuple[list[int], int, str, int]:
    """What `_assemble` reads of a producing workload (box origin, core, layer, step), read
    once per `plan_tensors`: a workload's blocks feed many tensors, and nothing here changes
    the workload."""
    return wl.box[0], wl.core.id, wl.layer, workload_step(wl)


def _weight_tensor(core: int, wl: gemini.WorkloadOp, weight: gemini.WeightOp,
                   load: gemini.DramLoadOp) -> L2Tensor:
    box = (weight.ints_of("lower"), weight.ints_of("upper"))
    tid = weight.transfer_ids[0]
    issue = get_int(load, ISSUE)
    size = weight.value("size")
    return L2Tensor(core, "weight", size, box, 8, 8,
                    issue if issue is not None else workload_step(wl), set(),
                    transfer_ids=[tid], pieces=[(-1, None, box, size, tid, "DRAM")],
                    layer_name=wl.layer, dram=("load", tid))


def _staging(core: int, position: int, wl: gemini.WorkloadOp, ofmaps: list[gemini.OfmapOp],
             stores: dict[int, gemini.DramStoreOp], bits: int) -> L2Tensor | None:
    """The output tile (the workload's `ofmaps`), held while it is sent to DRAM or to other
    cores.

    Gemini's own IRs call an L2 entry "ofmap" only when it is the staging copy of a DRAM
    store, and its `tensor_order` is that store's place in the DRAM queue (seed 004; the
    ResNet IRs). An output that only goes to other cores stays on chip, so it is an "ifmap"
    entry whose sources are this core's blocks (the sentinel `tensor_order`, as every
    on-chip tensor)."""
    leaving = [o for o in ofmaps
               if any(d.to_dram or d.target[0] != core for d in o.destinations)]
    if not leaving:
        return None
    stored = next((o.value("transfer_id") for o in leaving
                   if o.value("transfer_id") in stores), None)
    lower, upper = wl.box
    if stored is None:
        return _kept_on_chip(core, position, wl, leaving, bits)
    local = ([0] * 4, [hi - lo for lo, hi in zip(lower, upper, strict=False)])
    size = model.fmap_bytes(local, bits)
    return L2Tensor(core, "ofmap", size, local, model.channel_align(bits), bits,
                    workload_step(wl), {position}, producer_position=position,
                    layer_name=wl.layer, dram=("store", stored))


def _kept_on_chip(core: int, position: int, wl: gemini.WorkloadOp,
                  leaving: list[gemini.OfmapOp], bits: int) -> L2Tensor:
    """The blocks of an output that other cores read and DRAM does not: an "ifmap" tensor
    whose sources are this core's blocks, absolute in the layer (as a consumer's tensor
    assembled from them would list them), live while the workload sends them."""
    origin = wl.box[0]
    blocks = [((list(map(add, origin, o.ints_of("lower"))),
                list(map(add, origin, o.ints_of("upper")))), o.value("size"),
               o.value("transfer_id")) for o in leaving]
    if len(blocks) == 1:
        box = blocks[0][0]
    else:
        box = (list(map(min, *(b[0][0] for b in blocks))),
               list(map(max, *(b[0][1] for b in blocks))))
    return L2Tensor(core, "ifmap", model.fmap_bytes(box, bits), box, model.channel_align(bits),
                    bits, workload_step(wl), {position}, producer_position=position,
                    transfer_ids=sorted(tid for *_, tid in blocks),
                    pieces=[(core, wl.layer, b, size, tid, "core")
                            for b, size, tid in sorted(blocks, key=lambda b: b[2])])


# ---------------------------------------------------------------------------------------------
# Allocation
# ---------------------------------------------------------------------------------------------


def allocate(core: gemini.CoreOp, tensors: list[L2Tensor], capacity: int,
             memory: str = "L2", unit: str = "bytes") -> None:
    """`first_fit`, with a failure reported at the workload where the tensor did not fit."""
    from targets.gemini.plan import error_at

    try:
        first_fit(tensors, capacity)
    except AllocationError as e:
        wl = core.workloads[e.position]
        raise error_at(wl, f"{memory} allocation failed at workload {wl.id} of core {core.id}: "
                           f"{e.tensor.kind} tensor of {e.tensor.size} {unit} does not fit "
                           f"(largest free hole {e.largest_hole} {unit}, {e.live} {unit} live)"
                       ) from None


class AllocationError(Exception):
    def __init__(self, tensor: L2Tensor, position: int, largest_hole: int, live: int):
        super().__init__()
        self.tensor, self.position = tensor, position
        self.largest_hole, self.live = largest_hole, live


def first_fit(tensors: Iterable[L2Tensor], capacity: int) -> None:
    """Assign `address` to every tensor of one core: lowest-address first fit at each
    workload boundary, new tensors by (last use descending, tensor id descending)."""
    by_first: dict[int, list[L2Tensor]] = defaultdict(list)
    for tensor in tensors:
        by_first[tensor.first].append(tensor)
    live: list[L2Tensor] = []
    for position in sorted(by_first):
        live = [t for t in live if t.last >= position]
        for tensor in sorted(by_first[position], key=lambda t: (-t.last, -t.tensor_id)):
            tensor.address = _lowest_hole(live, tensor.size, capacity, tensor, position)
            live.append(tensor)


def _lowest_hole(live: list[L2Tensor], size: int, capacity: int, tensor: L2Tensor,
                 position: int) -> int:
    address = 0
    largest = 0
    for other in sorted(live, key=lambda t: t.address):
        if address + size <= other.address:
            return address
        largest = max(largest, other.address - address)
        address = max(address, other.address + other.size)
    if address + size <= capacity:
        return address
    largest = max(largest, capacity - address)
    raise AllocationError(tensor, position, largest, sum(t.size for t in live))
