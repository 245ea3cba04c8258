"""gemini-batch-cut: choose how many samples each layer group processes at a time.

A segment runs its layers for one batch group (sub-batch) after another: batch groups outer,
layers inner, as Gemini's T-cuts do. Larger groups mean fewer, larger workloads (better PE use,
fewer per-workload overheads) but more feature-map bytes in L2, and a segment with more than one
group must keep all its weights resident. The pass picks, per segment, the largest divisor of
the batch whose L2 peak fits (`gemini-group-layers`' evaluation) and records it as
`gemini.sub_batch` on the segment's layers, and `gemini.wl0_resident` on those of a
several-group segment whose weights stay in WL0 across the groups (`wl0_residents`), and
`gemini.part_room` where the plan leaves a layer more L2 than gemini-partition's own share of
it and its whole part needs more (`part_rooms`): the part is then cut no further than it must.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from dialects import dnn
from passes.gemini_group_layers import (
    evaluate_segment,
    layer_facts,
    part_rooms,
    wl0_residents,
)
from passes.gemini_partition import WORKING_SET_SHARE
from targets.gemini.plan import (
    GROUPS,
    PART_ROOM,
    SUB_BATCH,
    WL0_RESIDENT,
    HardwarePass,
    batch_of,
    error_at,
    get_int,
    graph_of,
    mesh_of,
    scheduled_layers,
    segments,
    set_int,
    source,
)


@dataclass(frozen=True)
class GeminiBatchCutPass(HardwarePass):
    """Pick each segment's sub-batch (the largest that fits L2); records `gemini.sub_batch`."""

    name = "gemini-batch-cut"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        hw = self.hw
        layers = scheduled_layers(graph)
        facts = layer_facts(layers, hw)
        xlen, ylen = mesh_of(graph)
        index = {layer: i for i, layer in enumerate(layers)}
        batch = batch_of(graph)
        for segment, members in segments(graph).items():
            members = [index[layer] for layer in members]
            start, end = members[0], members[-1] + 1
            if members != list(range(start, end)):
                raise error_at(layers[members[0]], f"segment {segment} is not contiguous in "
                                                   f"topological order")
            plan = evaluate_segment(facts, start, end, batch, xlen * ylen, hw, whole=True)
            sub_batch = plan.sub_batch if plan is not None else 1
            in_wl0 = wl0_residents(facts[start:end], hw)
            rooms = part_rooms(facts, start, end, plan, batch, xlen * ylen, hw,
                               WORKING_SET_SHARE * hw.fill_l2_bytes) if plan is not None else []
            for i in members:
                set_int(layers[i], SUB_BATCH, sub_batch)
                set_int(layers[i], GROUPS, batch // sub_batch)
                if sub_batch < batch and in_wl0[i - start]:
                    set_int(layers[i], WL0_RESIDENT, 1)
                if rooms and rooms[i - start]:
                    set_int(layers[i], PART_ROOM, int(rooms[i - start]))
        for layer in graph.layers:
            if isinstance(layer, dnn.VIEW_CLASSES):
                producer = source(layer.output).owner
                set_int(layer, SUB_BATCH, get_int(producer, SUB_BATCH, batch))
                set_int(layer, GROUPS, get_int(producer, GROUPS, 1))
