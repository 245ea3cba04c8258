"""How the Gemini scheduling passes record their decisions on the IR and read them back.

The passes work on a module holding a `dnn.graph` (the network) and, from `gemini-workloads` on,
a `gemini.schedule`. Decisions about layers are discardable attributes on the layer ops:

    gemini.segment    the layer group (segment) it belongs to; groups run one after another and
                      exchange feature maps through DRAM
    gemini.sub_batch  samples (of the network's batch) per batch group of its segment
    gemini.groups     how many batch groups its segment runs (a layer whose N is not the
                      network batch, e.g. attention heads, splits its N the same way)
    gemini.split      [pN, pK, pH, pW]: how its output is cut into parts
    gemini.cores      the core of each part (parts in N, K, H, W order)
    gemini.wl0_resident  1 on a PE layer of a segment with several batch groups whose weights
                      stay in WL0 from the first group to the last (read once, straight from
                      DRAM), rather than being staged in L2 and streamed into WL0 per group

and on the graph `gemini.mesh` = [xlen, ylen]. Decisions about the schedule are attributes on
gemini ops: `gemini.step` (a workload's position in the global emission order),
`gemini.issue` (the step before which a DRAM load lands), `gemini.order` (a DRAM transfer's
position in the DRAM queue) and `gemini.operand` (which activation of its layer an ifmap
delivers, or a piece of: a concatenated input comes as one ifmap per concatenated map).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from dialects import dnn, gemini
from dialects.locations import source_path
from ground.diagnostics import PlancError
from targets.gemini.model import Box, GeminiHardware

SEGMENT = "gemini.segment"
SUB_BATCH = "gemini.sub_batch"
GROUPS = "gemini.groups"
SPLIT = "gemini.split"
CORES = "gemini.cores"
MESH = "gemini.mesh"
STEP = "gemini.step"
ISSUE = "gemini.issue"
ORDER = "gemini.order"
OPERAND = "gemini.operand"
WL0_RESIDENT = "gemini.wl0_resident"
PART_ROOM = "gemini.part_room"
"""L2 bytes a layer's largest part may take, where gemini-batch-cut's plan leaves it more
than gemini-partition's own share (`WORKING_SET_SHARE`) and its whole part needs more."""


def error_at(op: Operation, message: str) -> PlancError:
    return PlancError(message, path=source_path(op))


class L2Overflow(PlancError):
    """What a workload needs does not fit L2. The layer groups were chosen by an estimate
    (gemini-group-layers), which the real cut over the cores can exceed, so the Gemini target
    plans again with a smaller budget (`backends.gemini.retry`)."""


def set_int(op: Operation, name: str, value: int) -> None:
    # One attribute per value (they are immutable): the passes set ~10k steps and orders.
    op.attributes[name] = gemini.int_attr(value)


def get_int(op: Operation, name: str, default: int | None = None) -> int | None:
    attr = op.attributes.get(name)
    return default if attr is None else attr.value.data


def set_ints(op: Operation, name: str, values: Sequence[int]) -> None:
    # One (immutable) array per value, without xDSL's generic `from_list` (gemini-partition
    # sets two per layer: ~10% of that pass).
    op.attributes[name] = gemini.ints_attr(values)


def get_ints(op: Operation, name: str) -> list[int] | None:
    attr = op.attributes.get(name)
    return None if attr is None else [int(v) for v in gemini.ints(attr)]


# ---------------------------------------------------------------------------------------------
# The network
# ---------------------------------------------------------------------------------------------


def graph_of(module: ModuleOp, who: str) -> dnn.GraphOp:
    graph = dnn.find_graph(module)
    if graph is None:
        raise PlancError(f"{who} needs a dnn.graph (a Gemini layer description, or an ARK model "
                         f"after dnn-from-ark)")
    return graph


def schedule_of(module: ModuleOp, who: str) -> gemini.ScheduleOp:
    for op in module.ops:
        if isinstance(op, gemini.ScheduleOp):
            return op
    raise PlancError(f"{who} needs a gemini.schedule (run gemini-workloads first)")


def source(value: SSAValue) -> SSAValue:
    """The value that holds the data of `value`, looking through views (reshapes, slices);
    through a concatenation, its first input (`sources` and `pieces` give all of them)."""
    while isinstance(value.owner, dnn.VIEW_CLASSES):
        value = value.owner.inputs[0]
    return value


def box_in_source(value: SSAValue, box: Box) -> tuple[Box, bool]:
    """The box of `source(value)` that holds `box` of `value`, and whether it is exact:
    slices shift it by their offsets; a reshape on the way changes coordinates, so then it is
    all of the source (not exact)."""
    while isinstance(value.owner, dnn.VIEW_CLASSES):
        view = value.owner
        if not isinstance(view, dnn.SliceOp):
            shape = dnn.fmap(source(value)).nchw
            return ([0] * len(shape), [d - 1 for d in shape]), False
        start = view.start
        box = ([lo + o for lo, o in zip(box[0], start, strict=True)],
               [hi + o for hi, o in zip(box[1], start, strict=True)])
        value = view.inputs[0]
    return box, True


def pieces(value: SSAValue, box: Box) -> list[tuple[SSAValue, Box, bool]]:
    """Where `box` of `value` lies, looking through views: (a value a layer or an input
    produces, the box of it, exact), in order along concatenation axes. A slice shifts the box;
    a concatenation cuts it at its inputs' offsets along its axis (Gemini's channel offsets:
    one piece per input the box meets); a reshape changes coordinates, so then the piece is
    all of the reshape's input (not exact)."""
    found = []
    stack = [(value, box, True)]
    while stack:
        value, box, exact = stack.pop()
        view = value.owner
        if isinstance(view, dnn.SliceOp):
            start = view.start
            stack.append((view.inputs[0], ([lo + o for lo, o in zip(box[0], start, strict=True)],
                                           [hi + o for hi, o in zip(box[1], start, strict=True)]),
                          exact))
        elif isinstance(view, dnn.ConcatOp):
            axis, parts = view.axis_index, []
            for operand, offset in zip(view.inputs, view.offsets, strict=True):
                size = dnn.fmap(operand).nchw[axis]
                lo, hi = max(box[0][axis], offset), min(box[1][axis], offset + size - 1)
                if lo <= hi:
                    lower, upper = list(box[0]), list(box[1])
                    lower[axis], upper[axis] = lo - offset, hi - offset
                    parts.append((operand, (lower, upper), exact))
            stack += reversed(parts)
        elif isinstance(view, dnn.VIEW_CLASSES):
            inner = view.inputs[0]
            shape = dnn.fmap(inner).nchw
            stack.append((inner, ([0] * len(shape), [d - 1 for d in shape]), False))
        else:
            found.append((value, box, exact))
    return found


def sources(value: SSAValue) -> list[SSAValue]:
    """Every value that holds data of `value` (through views; several through a
    concatenation), each once, in order."""
    found: dict[SSAValue, None] = {}
    seen: set[SSAValue] = set()
    stack = [value]
    while stack:
        value = stack.pop()
        if value in seen:
            continue
        seen.add(value)
        if isinstance(value.owner, dnn.VIEW_CLASSES):
            stack += reversed(list(value.owner.inputs))
        else:
            found[value] = None
    return list(found)


def through_view(value: SSAValue) -> bool:
    return source(value) is not value


def scheduled_layers(graph: dnn.GraphOp) -> list[dnn.LayerOp]:
    """The layers that run on the accelerator, in topological order (views excluded)."""
    layers = []
    for layer in graph.layers:
        if isinstance(layer, dnn.ConcatOp) and layer.axis_index == 0:
            raise error_at(layer, f"layer '{layer.name_}' concatenates along N (axis 0); "
                                  f"Gemini's batch groups cut N, so its layers read "
                                  f"concatenations along channels, rows or columns only")
        if isinstance(layer, dnn.VIEW_CLASSES):
            continue
        if layer.LAYER_TYPE is None:
            raise error_at(layer, f"layer '{layer.name_}': operation '{layer.op_name}' cannot "
                                  f"be scheduled on Gemini (no PE, vector or transfer "
                                  f"implementation)")
        layers.append(layer)
    if not layers:
        raise PlancError("the network has no layer to schedule")
    return layers


def layer_table(graph: dnn.GraphOp) -> dict[str, dnn.LayerOp]:
    return {layer.name_: layer for layer in graph.layers}


def consumers(layer: dnn.LayerOp) -> Iterator[tuple[dnn.LayerOp, int]]:
    """(consumer, operand index) of `layer`'s output, looking through views."""
    pending = [layer.output]
    while pending:
        value = pending.pop()
        for use in value.uses:
            user = use.operation
            if isinstance(user, dnn.VIEW_CLASSES):
                pending.append(user.output)
            elif isinstance(user, dnn.LayerOp):
                yield user, use.index


def is_network_output(layer: dnn.LayerOp) -> bool:
    pending = [layer.output]
    while pending:
        value = pending.pop()
        for use in value.uses:
            if isinstance(use.operation, dnn.OutputOp):
                return True
            if isinstance(use.operation, dnn.VIEW_CLASSES):
                pending.append(use.operation.output)
    return False


def batch_of(graph: dnn.GraphOp) -> int:
    """The network's batch: the N every layer's samples are a multiple of."""
    return math.gcd(*(layer.out_type.nchw[0] for layer in scheduled_layers(graph)))


def groups_of(layer: dnn.LayerOp) -> int:
    return get_int(layer, GROUPS, 1)


def wl0_resident(layer: dnn.LayerOp) -> bool:
    """Does this layer keep its weights in WL0 across its segment's batch groups?"""
    return get_int(layer, WL0_RESIDENT, 0) == 1


def group_size(layer: dnn.LayerOp) -> int:
    """Samples of this layer's N per batch group."""
    return layer.out_type.nchw[0] // groups_of(layer)


def group_of(layer: dnn.LayerOp, box: Box) -> int:
    return box[0][0] // group_size(layer)


def group_samples(layer: dnn.LayerOp, group: int) -> tuple[int, int]:
    size = group_size(layer)
    return group * size, (group + 1) * size - 1


def mesh_of(graph: dnn.GraphOp) -> tuple[int, int]:
    mesh = get_ints(graph, MESH)
    return (mesh[0], mesh[1]) if mesh else (1, 1)


def parse_mesh(text: str) -> tuple[int, int]:
    parts = text.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise PlancError(f"mesh must be XxY with positive integers (e.g. 2x2), got '{text}'")
    return int(parts[0]), int(parts[1])


def hardware(buffer_size: int, dram_bw: float, l2_budget: int = 0) -> GeminiHardware:
    if buffer_size <= 0 or dram_bw <= 0 or l2_budget < 0:
        raise PlancError("buffer-size and dram-bw must be positive, l2-budget not negative")
    if l2_budget:
        return GeminiHardware(buffer_bytes=buffer_size, dram_bytes_per_cycle=dram_bw,
                              l2_plan=l2_budget / buffer_size)
    return GeminiHardware(buffer_bytes=buffer_size, dram_bytes_per_cycle=dram_bw)


@dataclass(frozen=True)
class HardwarePass(ModulePass):
    """A Gemini pass that plans against the L2 size and DRAM bandwidth (its options)."""

    buffer_size: int = GeminiHardware.buffer_bytes
    dram_bw: float = GeminiHardware.dram_bytes_per_cycle
    l2_budget: int = 0
    """L2 bytes per core to plan for (0: the `l2_plan` share of the buffer)."""

    @property
    def hw(self) -> GeminiHardware:
        return hardware(self.buffer_size, self.dram_bw, self.l2_budget)


def segments(graph: dnn.GraphOp, need: str = SEGMENT) -> dict[int, list[dnn.LayerOp]]:
    """The scheduled layers of each segment, in topological order; every layer must carry
    `need` (the decision of an earlier pass)."""
    found: dict[int, list[dnn.LayerOp]] = {}
    for layer in scheduled_layers(graph):
        if get_int(layer, SEGMENT) is None or get_int(layer, need) is None:
            raise error_at(layer, f"layer '{layer.name_}' has no {need} (run "
                                  f"gemini-group-layers and gemini-batch-cut first)")
        found.setdefault(get_int(layer, SEGMENT), []).append(layer)
    return dict(sorted(found.items()))


# ---------------------------------------------------------------------------------------------
# Parts of a layer
# ---------------------------------------------------------------------------------------------


def cut(size: int, parts: int) -> list[tuple[int, int]]:
    """`size` cut into `parts` contiguous, nearly equal inclusive ranges."""
    bounds = [size * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1] - 1) for i in range(parts)]


@dataclass(frozen=True)
class Part:
    box: Box
    core: int


def layer_parts(layer: dnn.LayerOp, batch_range: tuple[int, int]) -> list[Part]:
    """The output boxes of `layer` for samples batch_range (inclusive) and their cores."""
    split = get_ints(layer, SPLIT) or [1, 1, 1, 1]
    cores = get_ints(layer, CORES) or [0]
    n0, n1 = batch_range
    _, k, h, w = layer.out_type.nchw
    parts = []
    index = 0
    for na, nb in cut(n1 - n0 + 1, split[0]):
        for ka, kb in cut(k, split[1]):
            for ha, hb in cut(h, split[2]):
                for wa, wb in cut(w, split[3]):
                    parts.append(Part(([n0 + na, ka, ha, wa], [n0 + nb, kb, hb, wb]),
                                      cores[index % len(cores)]))
                    index += 1
    return parts


def snake_cores(xlen: int, ylen: int) -> list[int]:
    """Core ids along a snake through the mesh, so that neighbours in the list are adjacent."""
    order = []
    for y in range(ylen):
        xs = range(xlen) if y % 2 == 0 else range(xlen - 1, -1, -1)
        order += [y * xlen + x for x in xs]
    return order


def workload_step(wl: gemini.WorkloadOp) -> int:
    step = get_int(wl, STEP)
    if step is not None:
        return step
    core = wl.core.id if wl.core is not None else 0
    return wl.id * 4096 + core


def workloads_in_order(schedule: gemini.ScheduleOp) -> list[gemini.WorkloadOp]:
    """All workloads in their global emission order."""
    return sorted(schedule.workloads(), key=workload_step)
