"""gemini-group-layers: cut the network into layer groups (segments) that stay on chip.

Inside a segment feature maps go from layer to layer through L2 (or core to core); between
segments they are stored to DRAM and read back. Like Gemini's `DP_search`, the pass runs a
dynamic program over segment end points in topological order: each candidate segment is
evaluated with the best batch cut that fits the planned L2 budget (`--l2-budget`, by default
55% of the buffer; `evaluate_segment`, shared with gemini-batch-cut), costing max(compute
cycles, DRAM cycles) for the whole batch; the cheapest sequence of feasible segments wins
(fewer segments on ties). Compute counts what batch groups pay again: a segment of several
groups keeps its weights in L2 and streams them into WL0 tile by tile in every group, each
tile reading the group's input again (`grouped_cycles`; ResNet-50 at batch 4 ran its first
two stages in four one-sample groups at 1.05x the time of whole-batch workloads). A segment
that runs in several batch groups keeps its weights resident across the groups: in WL0,
read once straight from DRAM, as many layers' as fit `wl0_resident_units` in layer order
(`wl0_residents`; each group then runs such a layer as one tile, `resident_cycles`), as
Gemini's batch-4 ResNet-50 IR does; the others in L2, where they count against the buffer.
A single-group segment streams its weights layer by layer.

Records `gemini.segment` on every layer (views take their source's segment).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from dialects import dnn
from dialects.locations import source_path
from ground.diagnostics import PlancError
from targets.gemini import model
from targets.gemini.model import GeminiHardware
from targets.gemini.plan import (
    MESH,
    SEGMENT,
    HardwarePass,
    batch_of,
    consumers,
    error_at,
    graph_of,
    is_network_output,
    parse_mesh,
    scheduled_layers,
    set_int,
    set_ints,
    source,
    sources,
)

MAX_SEGMENT_LAYERS = 96
"""Longest segment the search considers: the search grows at most this many segments from
each start, so it is linear in the number of layers."""


@dataclass
class LayerFacts:
    """What the segment search needs to know about one layer."""

    index: int
    layer: dnn.LayerOp
    out_bytes: int
    """Bytes of the whole output (all samples)."""
    l2_weight_bytes: int
    """Weight bytes that pass through L2 when streamed (0 for weights read straight to WL0)."""
    weight_bytes: int
    inputs: list[tuple[int, int]]
    """(producer layer index or -1 for a network input, bytes) per activation input."""
    users: list[int]
    """Indices of the layers that read the output."""
    leaves: bool
    """Is the output a network output?"""
    cycles: float
    """Compute cycles for all samples on one core."""
    by_groups: dict[int, float] = field(default_factory=dict)
    """Compute cycles of all samples run in that many batch groups (more than one), where
    they differ from `cycles`, with the weights resident in L2: see `grouped_cycles`."""
    wl0_units: int | None = None
    """WL0 units of the whole weights read straight from DRAM (None: no weights, or weights
    streamed through L2 whatever the cut)."""
    resident_by_groups: dict[int, float] = field(default_factory=dict)
    """Like `by_groups`, with the weights resident in WL0: see `resident_cycles`."""

    def group_cycles(self, groups: int, in_wl0: bool = False) -> float:
        """Compute cycles of all samples run in `groups` batch groups (`in_wl0`: weights
        resident in WL0 across the groups, else in L2)."""
        if in_wl0:
            return self.resident_by_groups.get(groups, self.cycles)
        return self.by_groups.get(groups, self.cycles)


def layer_facts(layers: list[dnn.LayerOp], hw: GeminiHardware) -> list[LayerFacts]:
    index = {layer: i for i, layer in enumerate(layers)}
    facts = []
    for i, layer in enumerate(layers):
        out_box = model.whole(layer.out_type.nchw)
        out_bytes = model.fmap_bytes(out_box, layer.out_type.bits)
        inputs = []
        in_bytes = 0
        for src in (s for value in layer.activations for s in sources(value)):
            ftype = dnn.fmap(src)
            size = model.fmap_bytes(model.whole(ftype.nchw), ftype.bits)
            in_bytes += size
            inputs.append((index.get(src.owner, -1), size))
        users = [index[c] for c, _ in consumers(layer) if c in index]
        geometry = model.weight_geometry(layer)
        weight_bytes = model.weight_bytes(layer) if geometry else 0
        streamed = bool(geometry) and model.streams_weights(layer, geometry[0], hw)
        direct = bool(geometry) and layer.LAYER_TYPE == "pe" and not streamed
        facts.append(LayerFacts(i, layer, out_bytes, weight_bytes if streamed else 0,
                                weight_bytes, inputs, sorted(users), is_network_output(layer),
                                quick_cycles(layer, in_bytes, out_bytes),
                                grouped_cycles(layer, in_bytes, hw),
                                model.wl0_direct_units(layer, geometry[0]) if direct else None,
                                resident_cycles(layer, in_bytes, weight_bytes)
                                if direct else {}))
    return facts


def wl0_residents(segment: list[LayerFacts], hw: GeminiHardware) -> list[bool]:
    """Which layers of a segment of several batch groups keep their weights in WL0 across
    the groups: in layer order, each whose weights go straight to WL0 while they fit what
    the earlier ones left of `wl0_resident_units`. Gemini's batch-4 ResNet-50 IR runs its
    first two stages in two batch groups with their weights in WL0 (source DDR, time one
    tile); staged in L2 instead, every group streams them tile by tile and each tile reads
    the group's input again (ResNet-50's first stages at batch 4: 1.03x Gemini's time)."""
    room = hw.wl0_resident_units
    kept = []
    for fact in segment:
        fits = fact.wl0_units is not None and fact.wl0_units <= room
        if fits:
            room -= fact.wl0_units
        kept.append(fits)
    return kept


def quick_cycles(layer: dnn.LayerOp, in_bytes: int, out_bytes: int) -> float:
    out = model.whole(layer.out_type.nchw)
    if layer.LAYER_TYPE == "pe":
        return model.pe_cycles(layer, out, 0, 0)
    if layer.LAYER_TYPE == "vp":
        return model.vp_cycles(layer, in_bytes, out_bytes)
    return model.dt_cycles(in_bytes)


def _group_counts(layer: dnn.LayerOp) -> list[int]:
    """The batch group counts g > 1 that divide the layer's samples."""
    batch = layer.out_type.nchw[0]
    return [g for g in range(2, batch + 1) if batch % g == 0]


def resident_cycles(layer: dnn.LayerOp, in_bytes: int, weight_bytes: int,
                    ) -> dict[int, float]:
    """{groups: cycles} of a PE layer whose weights stay in WL0 across g > 1 batch groups:
    g workloads of batch/g samples, each one tile that reads its group's input and its
    weights straight from DRAM (gemini-cycles' time of such a workload)."""
    found = {}
    for groups in _group_counts(layer):
        samples = layer.out_type.nchw[0] // groups
        box = ([0, 0, 0, 0], [samples - 1, *(d - 1 for d in layer.out_type.nchw[1:])])
        found[groups] = groups * model.pe_cycles(layer, box, in_bytes // groups, weight_bytes)
    return found


def grouped_cycles(layer: dnn.LayerOp, in_bytes: int, hw: GeminiHardware) -> dict[int, float]:
    """{groups: cycles} of a PE layer with weights run in each batch group count g > 1 that
    divides the batch. Several groups keep the weights resident in L2, so every group streams
    them into WL0 tile by tile (`weight_in_l2`), and each tile of output channels reads the
    group's whole input again: g times the time of one group's workload as gemini-cycles
    times it. A strided 1x1 convolution of ResNet-50 so costs 2.8x its whole-batch time in
    four one-sample groups, which `quick_cycles` does not see."""
    geometry = model.weight_geometry(layer) if layer.LAYER_TYPE == "pe" else None
    if not geometry:
        return {}
    batch, k = layer.out_type.nchw[0], geometry[0]
    tile_k = model.stream_tile_channels(layer, k, hw)
    slices = model.stream_slices(layer, tile_k, hw)
    units = -(-model.wl0_stream_units(layer, tile_k, hw) // slices)
    found = {}
    for groups in _group_counts(layer):
        samples = batch // groups
        lower, upper = [0, 0, 0, 0], [samples - 1, *(d - 1 for d in layer.out_type.nchw[1:])]
        tiles = []
        for start in range(0, k, tile_k):
            lower[1], upper[1] = start, min(start + tile_k, k) - 1
            cycles = model.pe_cycles(layer, (lower, upper), in_bytes // groups, 0) / slices
            tiles.extend([cycles] * slices)
        found[groups] = groups * model.stream_time(tiles, units)
    return found


MAX_FMAP_BYTES = 4 << 30
"""The largest feature map planc schedules on Gemini (its IR's sizes are byte counts of
transfers in a DRAM of a few GB; a larger map is a model that does not fit the machine)."""


def _refuse_oversized(graph: dnn.GraphOp) -> None:
    for op in graph.body.block.ops:
        for value in op.results:
            fmap = value.type
            size = fmap.elements * fmap.bits // 8 if isinstance(fmap, dnn.FmapType) else 0
            if size > MAX_FMAP_BYTES:
                name = op.properties.get("layer_name") or op.properties.get("input_name")
                raise PlancError(f"feature map {fmap.shape_list} {fmap.dtype_name} of "
                                 f"'{name.data}' holds {size / 1e9:.3g} GB, more than the "
                                 f"{MAX_FMAP_BYTES / 1e9:.3g} GB planc schedules on Gemini",
                                 path=source_path(op))


def _refuse_too_many_layers(layers: list[dnn.LayerOp]) -> None:
    """Every layer is at least one workload, so a network of more layers than gemini-partition
    schedules workloads is refused before the search rather than after it (20,000 layers took
    minutes to reach that refusal)."""
    from passes.gemini_partition import MAX_WORKLOADS

    if len(layers) > MAX_WORKLOADS:
        raise error_at(layers[MAX_WORKLOADS],
                       f"the network has {len(layers)} layers to schedule, each at least one "
                       f"workload: more than the {MAX_WORKLOADS} workloads planc schedules")


@dataclass(frozen=True)
class SegmentPlan:
    sub_batch: int
    peak_bytes: float
    cycles: float
    whole: bool = False
    """Does the plan run the whole batch over the planned budget, where workloads hold
    nothing but their own inputs and output (`choose_plan`)?"""


def choose_plan(length: int, sub_batches: list[int], peaks: list[float], besides: list[float],
                waits: list[float], cycles: list[float], l2_weights: int, hw: GeminiHardware,
                whole: bool) -> SegmentPlan | None:
    """The plan of a segment from each sub-batch's (in decreasing order) peak L2, peak L2 at
    the layers that hold something beside their own inputs and output (`besides`), cycles
    its workloads over the budget keep the loads after them waiting (`waits`, see
    `over_budget_waits`), and cycles. The largest
    sub-batch that fits the planned budget; with `whole` (gemini-batch-cut, on the segments
    the search chose within the budget), the whole batch as one group instead where its
    peak goes over the budget only at workloads that hold nothing else (no live map, no
    weights resident or prefetched), fits the buffer's `fill_l2_bytes`, and costs strictly
    less. The budget keeps room for prefetches and for what lives beside a workload; a
    workload whose own inputs and output exceed it can have that room only by a cut, and
    every cut costs (a PE fill, a vector workload's fixed cycles): at batch 4 ResNet's 7x7
    convolution holds 4.8 MB, over the 4.6 MB budget, and ran in two sample halves, 200
    cycles more than Gemini's batch-4 schedule, which runs it whole. What a workload over
    the budget costs besides: nothing is prefetched while it runs, so the loads after it up
    to the next segment's first layer (weights, maps read back from DRAM) wait
    (`over_budget_waits`; without them ResNet-50 at batch 4 ran its 16-bit adds whole,
    which made it 11% slower, and at batch 16 its last stage). Several groups over the
    budget are not taken: each is a cut of the batch that the budget's room was kept for
    (ResNet-50 at batch 16 so held 6.4 MB, 1.3x Gemini's peak). A single layer that fits no
    cut keeps `unfit_sub_batch` unless running the whole batch is cheaper."""
    fallback = None
    for j, sub_batch in enumerate(sub_batches):
        if peaks[j] <= hw.planned_l2_bytes:
            fallback = SegmentPlan(sub_batch, peaks[j], cycles[j])
            break
    if fallback is None and length == 1:
        sub_batch = unfit_sub_batch(l2_weights, sub_batches[0], hw)
        j = sub_batches.index(sub_batch)
        fallback = SegmentPlan(sub_batch, peaks[j], cycles[j])
    if not whole or (fallback is not None and sub_batches[0] <= fallback.sub_batch):
        return fallback
    # The whole batch (sub_batches[0]) as one group over the budget.
    cost = cycles[0] + waits[0]
    if peaks[0] <= hw.fill_l2_bytes and besides[0] <= hw.planned_l2_bytes and \
            (fallback is None or cost < fallback.cycles):
        return SegmentPlan(sub_batches[0], peaks[0], cost, True)
    return fallback


def evaluate_segment(facts: list[LayerFacts], start: int, end: int, batch: int, cores: int,
                     hw: GeminiHardware, whole: bool = False) -> SegmentPlan | None:
    """The best batch cut of layers [start, end) that fits the planned L2 budget, or None.
    A single layer always has a plan (`unfit_sub_batch` when no cut fits: gemini-partition
    cuts it further or refuses it). `whole`: see `choose_plan`."""
    segment = facts[start:end]
    in_wl0 = wl0_residents(segment, hw)
    l2_weights = sum(f.weight_bytes for f, kept in zip(segment, in_wl0, strict=True)
                     if not kept)
    sub_batches = sorted((d for d in range(1, batch + 1) if batch % d == 0), reverse=True)
    peaks, besides, waits = [], [], []
    cycles = [_cycles(facts, start, end, cores, batch // sub_batch, hw, in_wl0)
              for sub_batch in sub_batches]
    for sub_batch, total in zip(sub_batches, cycles, strict=True):
        groups = batch // sub_batch
        peak, beside, over = _peak_fmaps(segment, start, end, sub_batch / batch / cores,
                                         streaming=groups == 1, budget=hw.planned_l2_bytes)
        weights = l2_weights if groups > 1 else 0
        peaks.append(weights + peak)
        besides.append(weights + peak if weights else beside)
        waits.append(over_budget_waits(facts, start, end, over, total, cores, hw))
    return choose_plan(end - start, sub_batches, peaks, besides, waits, cycles, l2_weights,
                       hw, whole)


def over_budget_waits(facts: list[LayerFacts], start: int, end: int, over: list[int],
                      total: float, cores: int, hw: GeminiHardware) -> float:
    """Cycles a whole-batch run of [start, end) whose workloads at positions `over` exceed
    the budget adds to its `total` (`_cycles`): nothing is prefetched while they run, so the
    loads after the first of them, up to the next segment's first layer, start when the last
    one ends. The layer right after it waits for its own loads (the segment ends no earlier
    than `total` plus those at the DRAM rate); the rest stream while the layers after it
    compute, and the segment ends no earlier than the last one's end plus all of them at the
    DRAM rate. Where the last layer is the one over the budget and the segment is bound by
    its compute, that is what was charged before: every load after it in full. Charging
    them in full on top of `total` wherever it stands made a long segment that starts with
    such a workload (ResNet-34's 7x7 convolution at batch 4, then the whole network) pay
    for all its weights twice. On a mesh they are still charged in full: the peak estimate
    assumes each layer's maps spread evenly over the cores, which gemini-partition does not
    always do, and a whole plan near the fill has no room for that (charged less, ResNet-34
    at batch 8 on 1x2 ran a segment whole that overflowed L2)."""
    if not over:
        return 0.0
    rate = hw.dram_bytes_per_cycle
    waiting = sum(_loads(facts, k, start) for k in range(start + over[0] + 1, end + 1))
    if cores > 1:
        return waiting / rate
    through = sum(f.cycles for f in facts[start:start + over[-1] + 1]) / cores
    first = _loads(facts, start + over[-1] + 1, start)
    return max(total + first / rate, through + waiting / rate) - total


def unfit_sub_batch(weight_bytes: int, batch: int, hw: GeminiHardware) -> int:
    """The batch cut of a single layer that fits no cut (gemini-partition then cuts it into
    parts that fit, or refuses it). Sub-batch 1 keeps its feature maps smallest; but several
    batch groups keep the layer's weights resident in L2 from the first group to the last,
    which no cut of the layer can shrink, so a layer whose weights alone exceed the budget
    runs as one group and streams them part by part (AlexNet's 38 MB dense layer at batch 4
    was cut into 4 groups and overflowed L2)."""
    return batch if weight_bytes > hw.planned_l2_bytes else 1


def _positions(segment: list[LayerFacts], start: int, end: int):
    """Per layer of the segment: the map bytes in L2 while it runs (outputs live from their
    producer to their last consumer inside the segment, inputs from outside while their
    consumer runs), its own inputs and output, and the streamed weight bytes (its own and the
    next layer's, prefetched beside it)."""
    delta = [0] * (len(segment) + 1)
    for pos, fact in enumerate(segment):
        last = max((u for u in fact.users if u < end), default=start + pos) - start
        delta[pos] += fact.out_bytes
        delta[last + 1] -= fact.out_bytes
    live, own, streamed = [], [], []
    running = 0
    for pos, fact in enumerate(segment):
        running += delta[pos]
        live.append(running + sum(size for producer, size in fact.inputs
                                  if not start <= producer < end))
        own.append(fact.out_bytes + sum(size for _, size in fact.inputs))
        streamed.append(fact.l2_weight_bytes + (segment[pos + 1].l2_weight_bytes
                                                if pos + 1 < len(segment) else 0))
    return live, own, streamed


def _peak_fmaps(segment: list[LayerFacts], start: int, end: int, share: float,
                streaming: bool, budget: float) -> tuple[float, float, list[int]]:
    """Largest L2 use at any layer of the segment (maps scaled by `share`, and with
    `streaming` the weights streamed for the current and the next layer), the largest at
    the layers that hold anything beside their own inputs, output and weights (0 if none),
    and the positions that take more than `budget`."""
    peak = beside = 0.0
    over = []
    for pos, (live, own, weights) in enumerate(zip(*_positions(segment, start, end),
                                                   strict=True)):
        weights = weights if streaming else 0
        bytes_ = live * share + weights
        peak = max(peak, bytes_)
        if live > own or (streaming and weights > segment[pos].l2_weight_bytes):
            beside = max(beside, bytes_)
        if bytes_ > budget:
            over.append(pos)
    return peak, beside, over


def _loads(facts: list[LayerFacts], index: int, start: int) -> int:
    """Bytes layer `index` loads from DRAM that a segment starting at `start` could prefetch:
    its weights, maps made before the segment (0 past the end)."""
    if index >= len(facts):
        return 0
    fact = facts[index]
    return fact.weight_bytes + sum(size for producer, size in fact.inputs if producer < start)


def part_rooms(facts: list[LayerFacts], start: int, end: int, plan: SegmentPlan, batch: int,
               cores: int, hw: GeminiHardware, share_bytes: float) -> list[float]:
    """Per layer of a segment run as `plan`: the L2 bytes its largest part may take where
    that is more than gemini-partition's own `share_bytes` and its whole part needs more
    (else 0, the share stands). Two cases, both where a cut costs cycles and buys nothing:

    - a workload of a `whole` plan that holds nothing beside its own maps and needs more than
      the budget: the buffer's `fill_l2_bytes` (the plan was costed whole);
    - a vector layer of a one-group segment whose inputs are made in the segment and whose
      output stays in it: the budget less what lives beside it and the next layer's loads
      (a prefetch in flight). A cut of it costs a vector workload's fixed cycles and
      overlaps no DRAM transfer; a cut of a layer that loads its input or stores its output
      pipelines that transfer with its compute (ResNet-34's input quantize at batch 4 whole:
      0.9% more latency), and a PE layer's parts can overlap its weight streaming."""
    segment = facts[start:end]
    groups = batch // plan.sub_batch
    share = plan.sub_batch / batch / cores
    rooms = []
    for fact, live, own, streamed in zip(segment, *_positions(segment, start, end),
                                         strict=True):
        need = own * share + (fact.l2_weight_bytes if groups == 1 else 0)
        beside = (live - own) * share + (streamed - fact.l2_weight_bytes if groups == 1 else 0)
        room = 0.0
        if plan.whole and beside <= 0 and need > hw.planned_l2_bytes:
            room = hw.fill_l2_bytes
        elif groups == 1 and _on_chip(fact, start, end) and fact.layer is not None and \
                fact.layer.LAYER_TYPE == "vp":
            room = hw.planned_l2_bytes - max(0.0, beside) - _loads(facts, fact.index + 1, start)
        rooms.append(room if room > share_bytes and need > share_bytes else 0.0)
    return rooms


def _on_chip(fact: LayerFacts, start: int, end: int) -> bool:
    """Are all the layer's inputs made in the segment [start, end), and is its output read
    only there?"""
    return all(start <= producer < end for producer, _ in fact.inputs) and \
        not fact.leaves and all(user < end for user in fact.users)


def _cycles(facts: list[LayerFacts], start: int, end: int, cores: int, groups: int,
            hw: GeminiHardware, in_wl0: list[bool]) -> float:
    segment = facts[start:end]
    compute = sum(f.group_cycles(groups, kept)
                  for f, kept in zip(segment, in_wl0, strict=True)) / cores
    dram = sum(f.weight_bytes for f in segment)
    dram += sum(size for f in segment for producer, size in f.inputs
                if not start <= producer < end)
    dram += sum(f.out_bytes for f in segment if f.leaves or any(u >= end for u in f.users))
    return max(compute, dram / hw.dram_bytes_per_cycle)


class SegmentGrowth:
    """`evaluate_segment` of [start, end) for one start and every end in turn, each step in
    time proportional to what the new layer changes rather than to the segment's length.

    Layer by layer the quantities `evaluate_segment` computes only grow: a new last layer adds
    its output and loaded inputs at its own position, extends the live range of the outputs
    it reads (a suffix of positions), and streams its weights beside the previous layer. So
    the largest L2 use is kept as a running maximum over the positions that changed (exact:
    every position's bytes are integers, and scaling by a positive share keeps the order of
    floats), the sums of compute cycles and DRAM bytes run in the order `_cycles` adds them,
    and the plans are the ones `evaluate_segment` returns, to the bit
    (tests/gemini/test_group_layers.py compares them on generated networks). Growth is
    monotone in every sub-batch, so once a segment fits no cut, no longer one from the same
    start does: `grow` stops there."""

    def __init__(self, facts: list[LayerFacts], batch: int, cores: int, hw: GeminiHardware):
        self.facts, self.batch, self.cores, self.hw = facts, batch, cores, hw
        self.sub_batches = sorted((d for d in range(1, batch + 1) if batch % d == 0),
                                  reverse=True)
        # The layers each layer reads, and those it is the last reader of (from end e + 1
        # on, their output no longer leaves the segment unless it is a network output).
        self.reads: list[list[int]] = [[] for _ in facts]
        self.last_read_by: list[list[int]] = [[] for _ in facts]
        for f in facts:
            for user in sorted(set(f.users)):
                self.reads[user].append(f.index)
            if f.users:
                self.last_read_by[max(f.users)].append(f.index)
        # Read once rather than at each of the ~96 ends every layer is a part of: each
        # layer's compute cycles per candidate sub-batch (its groups pay their weight loads),
        # and the L2 budget and DRAM rate (properties of the hardware).
        groups = [batch // sub_batch for sub_batch in self.sub_batches]
        self.group_cycles = [[f.group_cycles(count) for count in groups] for f in facts]
        self.wl0_cycles = [[f.group_cycles(count, True) for count in groups] for f in facts]
        self.budget = hw.planned_l2_bytes
        self.dram_rate = hw.dram_bytes_per_cycle

    def grow(self, start: int, limit: int):
        """Yield (end, plan) for end = start + 1, ... up to `limit` while a cut fits."""
        for end, sub_batch, bytes_, cycles in self.steps(start, limit):
            yield end, SegmentPlan(sub_batch, bytes_, cycles)

    def steps(self, start: int, limit: int):
        """Yield (end, sub-batch, peak bytes, cycles) for end = start + 1, ... up to `limit`
        while a cut fits: the fields of `grow`'s plans, which the search does not build."""
        facts, cores, batch = self.facts, self.cores, self.batch
        reads, last_read_by = self.reads, self.last_read_by
        group_cycles, wl0_cycles = self.group_cycles, self.wl0_cycles
        budget, dram_rate = self.budget, self.dram_rate
        sub_batches = self.sub_batches
        # Per sub-batch: None for the one run as a single group (weights streamed, peak
        # `most_streaming`), else the share of the live bytes one core holds.
        shares = [None if sub_batch == batch else sub_batch / batch / cores
                  for sub_batch in sub_batches]
        streaming_share = 1 / cores         # the one sub-batch run as a single group
        live: list[int] = []                # bytes in L2 at each position (live + loaded)
        streamed: list[int] = []            # streamed weight bytes at each position
        last: dict[int, int] = {}           # layer -> position of its last reader so far
        most_live = 0
        most_streaming = 0.0
        l2_weights = dram_bytes = 0
        wl0_room = self.hw.wl0_resident_units   # as `wl0_residents` fills it
        compute = [0.0] * len(sub_batches)
        first_fit = 0       # sub-batches before it fit no longer segment from this start
        for end in range(start + 1, limit + 1):
            e = end - 1
            fact = facts[e]
            pos = e - start
            loaded = 0
            for producer, size in fact.inputs:
                if not start <= producer < end:
                    loaded += size
            live.append(fact.out_bytes + loaded)
            streamed.append(fact.l2_weight_bytes)
            changed = [pos]
            if pos:
                streamed[pos - 1] += fact.l2_weight_bytes
                changed.append(pos - 1)
            for producer in reads[e]:
                if producer >= start:           # its output now lives up to this layer
                    since = last.get(producer, producer - start) + 1
                    out_bytes = facts[producer].out_bytes
                    for q in range(since, pos + 1):
                        live[q] += out_bytes
                    if since < pos:             # (pos itself is listed already)
                        changed.extend(range(since, pos))
                    last[producer] = pos
            # Running maxima (as `max` keeps them: the values only grow, and equal floats
            # are the same number whichever is kept).
            for q in changed:
                here = live[q]
                if here > most_live:
                    most_live = here
                here = here * streaming_share + streamed[q]
                if here > most_streaming:
                    most_streaming = here
            in_wl0 = fact.wl0_units is not None and fact.wl0_units <= wl0_room
            if in_wl0:
                wl0_room -= fact.wl0_units
                cycles = wl0_cycles[e]
            else:
                l2_weights += fact.weight_bytes
                cycles = group_cycles[e]
            for j in range(len(compute)):
                compute[j] += cycles[j]
            dram_bytes += fact.weight_bytes + loaded
            if fact.leaves or fact.users:
                dram_bytes += fact.out_bytes
            for producer in last_read_by[e]:
                if producer >= start and not facts[producer].leaves:
                    dram_bytes -= facts[producer].out_bytes
            # The largest sub-batch that fits. Every peak only grows with the segment (the
            # weights in L2 too: a layer's weights go to WL0 or to L2, never leave), so a
            # sub-batch that did not fit a shorter segment is not tried again.
            for j in range(first_fit, len(shares)):
                share = shares[j]
                bytes_ = 0 + max(0.0, most_streaming) if share is None else \
                    l2_weights + max(0.0, most_live * share)
                if bytes_ <= budget:
                    first_fit = j
                    yield (end, sub_batches[j], bytes_,
                           max(compute[j] / cores, dram_bytes / dram_rate))
                    break
            else:
                if end - start > 1:
                    return
                sub_batch = unfit_sub_batch(l2_weights, batch, self.hw)
                j = sub_batches.index(sub_batch)
                share = shares[j]
                bytes_ = 0 + max(0.0, most_streaming) if share is None else \
                    l2_weights + max(0.0, most_live * share)
                yield end, sub_batch, bytes_, max(compute[j] / cores, dram_bytes / dram_rate)
                first_fit = len(shares)


def best_segmentation(facts: list[LayerFacts], batch: int, cores: int,
                      hw: GeminiHardware) -> list[tuple[int, int]]:
    """Segment boundaries [(start, end)] minimising total cycles (then segment count; on a
    tie the earliest start). Starts are taken in order, so a start's own best is final when
    its segments are grown."""
    n = len(facts)
    best: list[tuple[float, int, int] | None] = [None] * (n + 1)
    best[0] = (0.0, 0, -1)
    growth = SegmentGrowth(facts, batch, cores, hw)
    for start in range(n):
        if best[start] is None:
            continue
        before, count = best[start][0], best[start][1] + 1
        for end, _, _, cycles in growth.steps(start, min(n, start + MAX_SEGMENT_LAYERS)):
            # (total, count) < best[end][:2], without building the tuples at every step.
            total, found = before + cycles, best[end]
            if found is None or total < found[0] or (total == found[0] and count < found[1]):
                best[end] = (total, count, start)
    bounds = []
    end = n
    while end > 0:
        start = best[end][2]
        bounds.append((start, end))
        end = start
    return bounds[::-1]


def merge_whole_runs(facts: list[LayerFacts], bounds: list[tuple[int, int]], batch: int,
                     cores: int, hw: GeminiHardware) -> list[tuple[int, int]]:
    """`bounds` with each segment that gemini-batch-cut runs whole over the budget
    (`choose_plan`) merged with the segments after it while the merged one also runs whole
    and costs less than the two apart plus the round trip of the maps between them.

    The search keeps every segment within the budget, so a workload over it ends a segment
    that the batch cut then runs whole; and it costs each segment as the larger of its
    compute and its DRAM time, which hides the maps it stores under its compute. A map the
    segment's last workload stores and the next one's first reads back is not hidden: the
    load reads what the store writes (`related_ifmap`), so the reader waits for both.
    ResNet-34 at batch 4 so stored its 7x7 convolution's 3.2 MB output and read it back for
    the first max-pool (350k cycles of latency, 7%); Gemini's batch-4 IR runs that segment
    through the whole network, which the merged segment does. Batch 1 has no whole plan.
    A merged segment is at most `MAX_SEGMENT_LAYERS` long, as the search's are (each merge
    evaluates it: bounded, so the pass stays linear in the layers). One core only: on a mesh
    gemini-partition does not spread every layer's maps evenly over the cores as the peak
    estimate assumes, and a whole plan near the fill has no room for that (merged, ResNet-50
    at batch 4 on 1x2 needed 8.0 MB at a workload and overflowed L2; see
    `over_budget_waits`)."""
    if cores > 1:
        return bounds
    merged = list(bounds[:1])
    rate = hw.dram_bytes_per_cycle
    plans: dict[tuple[int, int], SegmentPlan | None] = {}

    def plan(a: int, b: int) -> SegmentPlan | None:
        # (kept: a segment not merged is the next one's `before`, a merged one its own)
        if (a, b) not in plans:
            plans[(a, b)] = evaluate_segment(facts, a, b, batch, cores, hw, whole=True)
        return plans[(a, b)]

    for start, end in bounds[1:]:
        first, last = merged[-1]
        before = plan(first, last) if end - first <= MAX_SEGMENT_LAYERS else None
        if before is not None and before.whole:
            both = plan(first, end)
            after = plan(start, end)
            trip = 2 * sum(f.out_bytes for f in facts[first:last]
                           if not f.leaves and any(u >= last for u in f.users)
                           and all(u < end for u in f.users)) / rate
            if both is not None and both.whole and after is not None and \
                    both.cycles < before.cycles + after.cycles + trip:
                merged[-1] = (first, end)
                continue
        merged.append((start, end))
    return merged


@dataclass(frozen=True)
class GeminiGroupLayersPass(HardwarePass):
    """Cut the network into segments (layer groups) by dynamic programming over L2 fit and
    cost; records `gemini.segment` on each layer."""

    name = "gemini-group-layers"

    mesh: str = "1x1"
    """The core mesh XxY (recorded on the graph as gemini.mesh for the later passes)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        _refuse_oversized(graph)
        hw = self.hw
        xlen, ylen = parse_mesh(self.mesh)
        set_ints(graph, MESH, [xlen, ylen])
        layers = scheduled_layers(graph)
        _refuse_too_many_layers(layers)
        facts = layer_facts(layers, hw)
        cores = xlen * ylen
        batch = batch_of(graph)
        bounds = merge_whole_runs(facts, best_segmentation(facts, batch, cores, hw), batch,
                                  cores, hw)
        for segment, (start, end) in enumerate(bounds):
            for fact in facts[start:end]:
                set_int(fact.layer, SEGMENT, segment)
        for layer in graph.layers:
            if isinstance(layer, dnn.VIEW_CLASSES):
                producer = source(layer.output).owner
                set_int(layer, SEGMENT, producer.attributes[SEGMENT].value.data
                        if SEGMENT in producer.attributes else 0)
