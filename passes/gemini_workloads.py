"""gemini-workloads: emit one workload per part of every layer, in Gemini's execution order.

Creates the `gemini.schedule` (L2 `buffersize`, the mesh, one `gemini.core` per core) from the
decisions on the `dnn` graph. Execution order follows Gemini's RA tree: segments one after
another; inside a segment batch groups outer and layers inner (a T-cut); each layer contributes
one workload per part, on the part's core. Workload ids count per core from 0; the global
position is recorded as `gemini.step`. A workload's box is its part of the layer's output for
the samples of the batch group; ifmaps, transfers and memory come in later passes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from dialects import gemini
from targets.gemini import model
from targets.gemini.plan import (
    GROUPS,
    STEP,
    graph_of,
    group_samples,
    groups_of,
    layer_parts,
    mesh_of,
    segments,
    set_int,
)


@dataclass(frozen=True)
class GeminiWorkloadsPass(ModulePass):
    """Create the gemini.schedule: one workload per (segment, batch group, layer, part)."""

    name = "gemini-workloads"

    buffer_size: int = model.GeminiHardware.buffer_bytes

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        for existing in [o for o in op.ops if isinstance(o, gemini.ScheduleOp)]:
            existing.detach()
            existing.erase()
        xlen, ylen = mesh_of(graph)
        per_core: dict[int, list[gemini.WorkloadOp]] = defaultdict(list)
        step = 0
        for layers in segments(graph, GROUPS).values():
            for group in range(groups_of(layers[0])):
                for layer in layers:
                    for part in layer_parts(layer, group_samples(layer, group)):
                        core = per_core[part.core]
                        wl = gemini.WorkloadOp.new(len(core), layer.name_, layer.LAYER_TYPE,
                                                   *part.box)
                        wl.ofmap_size = gemini.int_attr(
                            model.fmap_bytes(part.box, layer.out_type.bits))
                        set_int(wl, STEP, step)
                        step += 1
                        core.append(wl)
        schedule = gemini.ScheduleOp.new(self.buffer_size, xlen, ylen)
        schedule.body.block.add_op(gemini.DramOp.new())
        for core_id in range(xlen * ylen):
            schedule.body.block.add_op(gemini.CoreOp.new(core_id, per_core.get(core_id, [])))
        op.body.block.add_op(schedule)
