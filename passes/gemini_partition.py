"""gemini-partition: cut each layer's output over the xlen x ylen mesh of cores.

For every layer the pass considers all cut factors (pN, pK, pH, pW) whose product divides the
number of cores (pN within the segment's sub-batch; layers that need their whole input, such as
transposes, stay on one core) and keeps the cheapest by

    cycles of the largest part + bytes the parts read (ifmap halos, replicated weights) / (64 B
    per cycle per core),

Gemini's trade-off between parallelism and on-chip traffic. Parts are numbered N-major and
placed on the cores along a snake through the mesh, in the same order for every layer, so that
consecutive layers cut the same way keep their data on the same core. A part whose inputs,
output and staged weights would take more than 40% of L2, or than the room the segment's plan
leaves it beside what lives with it if that is more, is cut further (`refine`); the extra
parts run one after another on the same cores. Records `gemini.split` and `gemini.cores`.

Before anything is scheduled the pass refuses budgets that cannot work: a layer whose smallest
part still needs more L2 than the buffer holds (its inputs and output must all be in L2 while
it runs), and a network that would be cut into more than `MAX_WORKLOADS` workloads. Both
errors name the layer and say what to change, instead of a search over every workload.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dialects import dnn
from targets.gemini import model
from targets.gemini.model import Box
from targets.gemini.plan import (
    CORES,
    MESH,
    PART_ROOM,
    SPLIT,
    error_at,
    get_int,
    get_ints,
    graph_of,
    group_size,
    groups_of,
    mesh_of,
    parse_mesh,
    scheduled_layers,
    set_ints,
    snake_cores,
)

NOC_BYTES_PER_CYCLE = 64


def candidates(layer: dnn.LayerOp, sub_batch: int, cores: int) -> list[tuple[int, ...]]:
    if not model.is_local(layer):
        return [(1, 1, 1, 1)]
    _, k, h, w = layer.out_type.nchw
    dims = (sub_batch, k, h, w)
    if isinstance(layer, dnn.MatmulOp):
        dims = (sub_batch, k, h, 1)
    if isinstance(layer, dnn.ReduceOp):
        dims = tuple(1 if d == layer.axis_index else size for d, size in enumerate(dims))
    divisors = [d for d in range(1, cores + 1) if cores % d == 0]
    found = []
    for split in itertools.product(*([p for p in divisors if p <= d] for d in dims)):
        product = split[0] * split[1] * split[2] * split[3]
        if product in divisors:
            found.append(split)
    return found


def first_part(sizes: tuple[int, ...], split: tuple[int, ...]) -> Box:
    """The box of the first part of an output of `sizes` cut `split` ways: `cut(size,
    parts)[0]` along every dim, which is (0, size // parts - 1), without the other ranges
    (asked for every candidate split of every layer)."""
    upper = [size // parts - 1 for size, parts in zip(sizes, split, strict=False)]
    return [0] * len(upper), upper


def cost_facts(layer: dnn.LayerOp) -> tuple:
    """What `part_cost` reads of the layer whatever the split (read once per layer: every
    candidate split of it is priced)."""
    return (layer.out_type.nchw, [dnn.fmap(layer.inputs[i]).bits
                                  for i in range(len(layer.activations))],
            layer.out_type.bits, bool(model.weight_geometry(layer)), model.input_facts(layer))


def part_cost(layer: dnn.LayerOp, split: tuple[int, ...], sub_batch: int,
              facts: tuple | None = None) -> float:
    nchw, in_bits, out_bits, has_weights, inputs = cost_facts(layer) if facts is None else facts
    _, k, h, w = nchw
    count = split[0] * split[1] * split[2] * split[3]
    box = first_part((sub_batch, k, h, w), split)
    in_bytes = 0
    for i, bits in enumerate(in_bits):
        need, _ = model.input_box(layer, i, box, inputs)
        in_bytes += model.fmap_bytes(need, bits)
    out_bytes = model.fmap_bytes(box, out_bits)
    if layer.LAYER_TYPE == "pe":
        cycles = model.pe_cycles(layer, box, 0, 0)
        weights = model.weight_bytes(layer, box[1][1] - box[0][1] + 1) \
            if has_weights else 0
    elif layer.LAYER_TYPE == "vp":
        cycles, weights = model.vp_cycles(layer, in_bytes, out_bytes), 0
    else:
        cycles, weights = model.dt_cycles(in_bytes), 0
    traffic = count * (in_bytes + weights)
    return cycles + traffic / (NOC_BYTES_PER_CYCLE * count)


def working_set(layer: dnn.LayerOp, split: tuple[int, ...], group: int,
                hw: model.GeminiHardware, inputs: tuple | None = None) -> int:
    """L2 bytes the largest part needs at once: its inputs, its output, staged weights
    (`inputs`: `model.input_facts(layer)`, when the caller has them)."""
    if inputs is None:
        inputs = model.input_facts(layer)
    _, k, h, w = layer.out_type.nchw
    box = first_part((group, k, h, w), split)
    total = model.fmap_bytes(box, layer.out_type.bits)
    for i in range(len(layer.activations)):
        need, _ = model.input_box(layer, i, box, inputs)
        total += model.fmap_bytes(need, dnn.fmap(layer.inputs[i]).bits)
    k_part = box[1][1] - box[0][1] + 1
    if model.weight_geometry(layer) and model.streams_weights(layer, k_part, hw):
        total += model.weight_bytes(layer, k_part)
    return total


def refine(layer: dnn.LayerOp, split: tuple[int, ...], group: int,
           hw: model.GeminiHardware, inputs: tuple | None = None) -> tuple[int, ...]:
    """Cut further (more parts than cores, run one after another) until the largest part
    leaves room in L2 for its neighbours, in `_refine_order`: samples first where the part
    holds several (ResNet-34's first max-pool at batch 4 was cut by rows, reading a halo
    twice; ResNet-50's strided 1x1 convolutions by output channels, each part reading the
    whole input), output channels first for a PE layer that streams its weights. The part
    may take `WORKING_SET_SHARE` of L2, or the room gemini-batch-cut's plan leaves the layer
    beside what lives with it (`gemini.part_room`), if more: a cut only adds cycles (a PE
    fill, a vector workload's fixed cycles, a halo), so a part that fits there stays whole
    (ResNet-34's first max-pool and adds at batch 4, 4.0 MB each, were cut in two for 16 to
    18 cycles each with nothing else in L2 beside them)."""
    limit = max(WORKING_SET_SHARE * hw.buffer_bytes * hw.l2_fill, get_int(layer, PART_ROOM, 0))
    _, k, h, w = layer.out_type.nchw
    split = list(split)
    if inputs is None:
        inputs = model.input_facts(layer)
    while working_set(layer, tuple(split), group, hw, inputs) > limit and model.is_local(layer):
        sizes = [group // split[0], k // split[1], h // split[2], w // split[3]]
        order = _refine_order(layer, k, hw)
        dims = [d for d in order if sizes[d] >= (2 * hw.pe_k_lanes if d == 1 and
                                                  layer.LAYER_TYPE == "pe" else 2)]
        if not dims:
            break
        split[dims[0]] *= 2
    return tuple(split)


def _refine_order(layer: dnn.LayerOp, k: int, hw: model.GeminiHardware) -> list[int]:
    """The dims `refine` halves, first to last (0 samples, 1 channels, 2 rows, 3 columns).
    Samples first: every other cut reads input twice (a window's halo rows for a row cut,
    the whole input again for each part of output channels). A PE layer that streams its
    weights through L2 is cut by output channels first instead, which also splits the
    weights (a sample cut would stream them whole for every part)."""
    if layer.LAYER_TYPE != "pe":
        return [0, 2, 3, 1]
    if model.weight_geometry(layer) and model.streams_weights(layer, k, hw):
        return [1, 2, 3, 0]
    return [0, 1, 2, 3]


WORKING_SET_SHARE = 0.4
"""Largest share of L2 one part may take (the rest holds neighbours and prefetches), unless
gemini-batch-cut's plan leaves the layer more (`gemini.part_room`)."""

MAX_WORKLOADS = 200_000
"""The most workloads planc schedules for one network. Every pass is linear in the workloads
(bench/scale.py: the per-operator cost of `-t gemini` does not grow from 1k to 100k
operators), so the bound is what the whole IR costs to hold and write: ~45 KB of memory and
~5 KB of written IR per workload (a generated model of 100k operators is 110,000 workloads),
i.e. ~9 GB of memory, a 1 GB IR and some 10 CPU minutes at the cap. A budget that cuts a
network finer than this (hundreds of thousands of tiles of a few bytes) does not suit it."""


def refuse_unfit(parts: list[tuple[dnn.LayerOp, tuple[int, ...], int]],
                 hw: model.GeminiHardware) -> None:
    """The lower bound: while a part runs, its inputs and output are all in L2, so a layer
    whose smallest part needs more than the planned L2 can never be scheduled. Reports the
    layer that needs the most, so that the suggested buffer size is the real minimum."""
    budget = int(hw.buffer_bytes * hw.l2_fill)
    needs = [(working_set(layer, split, group, hw), i) for i, (layer, split, group)
             in enumerate(parts)]
    need, index = max(needs, default=(0, -1))
    if need <= budget:
        return
    layer, split, _ = parts[index]
    unfit = sum(1 for n, _ in needs if n > budget)
    smallest = int(-(-need // hw.l2_fill))
    raise error_at(layer, f"layer '{layer.name_}' ({layer.op_name}) does not fit the L2 "
                          f"buffer: its smallest part {list(split)} needs {need} bytes (inputs, "
                          f"output and staged weights, all in L2 while it runs), more than the "
                          f"{budget} planned of the {hw.buffer_bytes}-byte buffer ({unfit} of "
                          f"{len(parts)} layers do not fit); use --buffer-size {smallest} or "
                          f"more, a smaller --batch or more cores")


def refuse_too_many(graph_layers: list[dnn.LayerOp], hw: model.GeminiHardware) -> None:
    counts = [(math.prod(get_ints(layer, SPLIT)) * groups_of(layer), layer)
              for layer in graph_layers]
    total = sum(count for count, _ in counts)
    if total > MAX_WORKLOADS:
        count, layer = max(counts, key=lambda c: c[0])
        raise error_at(layer, f"the {hw.buffer_bytes}-byte L2 buffer cuts the network into "
                              f"{total} workloads ({count} of them for layer '{layer.name_}' "
                              f"({layer.op_name})), more than the {MAX_WORKLOADS} planc "
                              f"schedules; use a larger --buffer-size")


@dataclass(frozen=True)
class GeminiPartitionPass(ModulePass):
    """Cut every layer over the core mesh; records `gemini.split` and `gemini.cores`."""

    name = "gemini-partition"

    mesh: str = ""
    """XxY; empty: the mesh gemini-group-layers recorded (or 1x1)."""
    buffer_size: int = model.GeminiHardware.buffer_bytes

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        xlen, ylen = parse_mesh(self.mesh) if self.mesh else mesh_of(graph)
        set_ints(graph, MESH, [xlen, ylen])
        order = snake_cores(xlen, ylen)
        hw = model.GeminiHardware(buffer_bytes=self.buffer_size)
        decided = []
        for layer in scheduled_layers(graph):
            sub_batch = group_size(layer)
            options = candidates(layer, sub_batch, xlen * ylen)
            facts = cost_facts(layer)
            split = min(options, key=lambda s: (part_cost(layer, s, sub_batch, facts), -s[0],
                                                -s[2]))
            cores = split[0] * split[1] * split[2] * split[3]
            split = refine(layer, split, sub_batch, hw, facts[4])
            decided.append((layer, split, sub_batch))
            set_ints(layer, SPLIT, split)
            set_ints(layer, CORES, order[:cores])
        refuse_unfit(decided, hw)
        refuse_too_many([layer for layer, _, _ in decided], hw)
