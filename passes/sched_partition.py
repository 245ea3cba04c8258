"""`sched-partition`: spread the tiles of tiled kernels over the device's processors.

Kernels are put in phases by dependency depth: a kernel runs in the phase after the last of
the kernels it depends on, so the kernels of one phase are independent of each other and a
barrier between phases orders everything else. Within a phase:

* one kernel runs on all processors (on as many as it has tiles);
* independent kernels (the Q/K/V projections of an attention block, the two halves of a
  split-K matmul) either run concurrently on disjoint processor ranges, sized so that the
  slowest finishes first (`concurrency=ranges`), or one after another on all processors,
  where ARK's processor rotation lets each start where the last stopped
  (`concurrency=sequence`); `auto` picks the faster by the cost model.

Every launch uses as many concurrent tiles (slots) per processor as its kernel's warps and
shared memory allow within the device's plan width; `granularity` sets how many consecutive
tiles a processor takes at a time.

With `split-k`, a lone matmul kernel (one or more matmuls of one K that read nothing the kernel
computes, and element-wise operators) whose tiles leave processors idle is cut along K into
parts that run concurrently on disjoint processor ranges: the first writes the outputs, the
others partial buffers, and an element-wise kernel (next phase) adds the partials into the
outputs in place and runs the element-wise operators. The candidates (`split_shapes`) are up
to `MAX_PARTS` parts of one wave each (one tile per processor, or every slot of a processor
busy) plus, optionally, a part on the processors left over with a smaller share of K; the cost
model picks the fastest, counting the device's bandwidth shared by all parts, the barrier and
the summing kernel, and the cut is taken only when it is 5% faster than the kernel uncut, the
static-distribution roofline (`targets.ark.static_roofline`, waves quantised) also finds it
faster than the kernel uncut (`StaticCut`), and its partial buffers fit in `SPLIT_K_MEMORY` of
the model's bytes.

Finally kernels are renumbered in execution order and the block is reordered to match, so that
a plan's TaskInfo ids are the positions of its TaskInfos (as ARK's code generator expects).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from devices.hardware import GpuDevice, gpu_device
from dialects import ark, sched
from dialects.plan import Range
from passes.sched_graph import (
    Operands,
    kernel_dependencies,
    levels,
    operand_table,
    operator_dependencies,
)
from passes.sched_tables import Launch, ScheduleTables, Signatures
from passes.sched_tile import Tiler, cached_signature, slots
from targets.ark import static_roofline
from targets.ark.cost_model import KernelEstimate, kernel_estimate

CONCURRENCY = ("auto", "ranges", "sequence")


@dataclass
class Kernel:
    op: sched.KernelOp
    ops: list[ark.ArkOp]
    estimate: KernelEstimate
    slots: int
    tiles: int = 0
    warps: int = 0
    sram: int = 0
    """The kernel op's tiling, read when the `Kernel` was made."""


class Estimates:
    """Kernel estimates, shared by kernels of equal structure and configuration."""

    def __init__(self, device: GpuDevice, signatures: Signatures | None = None):
        self.device = device
        self.cache: dict[tuple, tuple[list, KernelEstimate]] = {}
        """(signature, *`id`s of configs, tiles, warps, slots) -> (the configs, estimate)."""
        self.signatures = signatures
        self.kernels: dict[tuple, tuple[tuple, Kernel]] = {}
        """`id`s of (kernel op, *operators) -> ((tiling, configs) it was made for, the
        `Kernel`, which keeps the ops, so that no other op has their `id`s)."""

    def kernel(self, kernel: sched.KernelOp, ops: Sequence[ark.ArkOp]) -> Kernel:
        # A kernel asked for again (split-K's search, then the phases) with the same tiling
        # and configs gets its `Kernel` again. (Properties read from the ops' dictionaries:
        # the descriptors cost more than the rest of the lookup.)
        tiling = kernel.properties
        configs = [op.properties.get("config") for op in ops]
        made_for = (tiling.get("num_tiles"), tiling.get("num_warps"), tiling.get("sram_bytes"),
                    *configs)
        key = (id(kernel), *map(id, ops))
        found = self.kernels.get(key)
        if found is not None and all(a is b for a, b in zip(found[0], made_for, strict=True)):
            return found[1]
        made = self._kernel(kernel, ops, configs)
        self.kernels[key] = (made_for, made)
        return made

    def _kernel(self, kernel: sched.KernelOp, ops: Sequence[ark.ArkOp],
                configs: list) -> Kernel:
        tiles, warps, sram = kernel.tiles, kernel.warps, kernel.sram
        count = max(slots(warps, sram, self.device), 1)
        # (By `id`s of the configs: the entry keeps them, so no other has their `id`s; equal
        # configs that are not the same attribute only make another, equal, estimate.)
        key = (cached_signature(kernel.kind_name, ops, self.signatures), *map(id, configs),
               tiles, warps, count)
        found = self.cache.get(key)
        if found is None:
            estimate = kernel_estimate(ops, [op.config_value() for op in ops], tiles, warps,
                                       count, self.device)
            found = self.cache[key] = (configs, estimate)
        return Kernel(kernel, list(ops), found[1], count, tiles, warps, sram)


def estimate_kernel(kernel: sched.KernelOp, ops: Sequence[ark.ArkOp],
                    device: GpuDevice) -> Kernel:
    return Estimates(device).kernel(kernel, ops)


# ---------------------------------------------------------------------------------------------
# Processor ranges
# ---------------------------------------------------------------------------------------------


def balanced_ranges(kernels: Sequence[Kernel], processors: int) -> list[int] | None:
    """Processors per kernel minimising the slowest kernel's time (None if they do not fit):
    each processor goes to the kernel that is currently slowest; then every kernel gives back
    the processors it does not need for its time."""
    if len(kernels) > processors:
        return None
    share = [1] * len(kernels)
    times = [k.estimate.on(1) for k in kernels]
    for _ in range(processors - len(kernels)):
        open_ = [i for i in range(len(kernels)) if share[i] < max(kernels[i].estimate.tasks, 1)]
        if not open_:
            break
        slowest = max(open_, key=times.__getitem__)
        share[slowest] += 1
        times[slowest] = kernels[slowest].estimate.on(share[slowest])
    for i, kernel in enumerate(kernels):
        while share[i] > 1 and kernel.estimate.on(share[i] - 1) <= times[i]:
            share[i] -= 1
    return share


def sequence_seconds(kernels: Sequence[Kernel], processors: int) -> float:
    """All kernels one after another on all processors, each starting where the last stopped:
    roughly one pool of work plus one partial wave."""
    pooled = sum(k.estimate.tasks * k.estimate.task_seconds / (processors * k.slots)
                 for k in kernels)
    return max(pooled + max(k.estimate.task_seconds for k in kernels),
               max(k.estimate.on(processors) for k in kernels))


def launch(kernel: Kernel, units: Range, granularity: int,
           resources: tuple[int, int] | None = None) -> Launch:
    """A launch of all tiles of `kernel` on `units`, with its slots' warps and shared memory
    (or `resources` = (warps, sram), when several launches share their processors)."""
    warps, sram = resources or (kernel.slots * kernel.warps, kernel.slots * kernel.sram)
    return Launch(kernel.op.kernel_id, Range(0, kernel.tiles), units, Range(0, warps),
                  Range(0, sram), granularity)


def phase_launches(kernels: Sequence[Kernel], device: GpuDevice, concurrency: str,
                   granularity: int) -> list[Launch]:
    processors = device.processors
    if len(kernels) == 1:
        (kernel,) = kernels
        units = Range(0, max(1, min(processors, kernel.tiles)))
        return [launch(kernel, units, granularity)]
    share = balanced_ranges(kernels, processors) if concurrency != "sequence" else None
    if share is not None and concurrency == "auto":
        busy = sum(share)
        ranges_time = max(k.estimate.on(p, busy) for k, p in zip(kernels, share, strict=True))
        if sequence_seconds(kernels, processors) <= ranges_time:
            share = None
    if share is None:
        # One resource group on all processors: ARK rotates the first processor from one
        # task group to the next, so the kernels pack like one.
        resources = (max(k.slots * k.warps for k in kernels),
                     max(k.slots * k.sram for k in kernels))
        return [launch(k, Range(0, processors), granularity, resources) for k in kernels]
    launches, first = [], 0
    for kernel, count in zip(kernels, share, strict=True):
        launches.append(launch(kernel, Range(first, first + count), granularity))
        first += count
    return launches


# ---------------------------------------------------------------------------------------------
# Split-K
# ---------------------------------------------------------------------------------------------


class Ids:
    """Fresh tensor and buffer ids for tensors the pass creates."""

    def __init__(self, block: Block):
        tensors = [r.type for op in block.ops for r in op.results
                   if isinstance(r.type, ark.TensorType)]
        self.tensor = max((t.tensor_id for t in tensors), default=-1) + 1
        self.buffer = max((t.buffer_id for t in tensors), default=-1) + 1

    def next_tensor(self) -> int:
        self.tensor += 1
        return self.tensor - 1

    def next_buffer(self) -> int:
        self.buffer += 1
        return self.buffer - 1


def _k_axis(value: SSAValue, operand: int, transposed: bool) -> int:
    """The dimension of a matmul operand that runs along K."""
    rank = len(value.type.shape_list)
    last = rank - 1
    if operand == 0:
        return last - 1 if transposed else last
    return last if transposed else last - 1


def _k_slice(value: SSAValue, axis: int, begin: int, end: int, ids: Ids) -> ark.ViewOp:
    t = value.type
    shape, offsets = t.shape_list, t.offsets_list
    shape[axis] = end - begin
    offsets[axis] += begin
    view = ark.ViewOp(ark.TensorType.get(ids.next_tensor(), t.data_type, shape, t.buffer,
                                         strides=t.strides_list, offsets=offsets), value)
    view.result.name_hint = f"t{view.result.type.tensor_id}"
    return view


MAX_PARTS = 32
"""The most parts a kernel's K is cut into (a bound on the search; each part beyond the first
costs a partial buffer and an add)."""


SPLIT_K_MEMORY = 0.07
"""The partial buffers of one cut may take this fraction of the bytes of the buffers the
schedule's operators read or write (what ARK's default plan allocates). Cuts run one after
another, so the partials of different cuts can share memory; the bound keeps split-K from
undoing the memory reuse (issue 3: activations at most 0.6x ARK's default on the FFNs: 0.07
keeps the tutorial FFN on mi300x at 0.58x, where 0.15 gives 1.19x)."""


def model_bytes(schedule: sched.ScheduleOp,
                operators: Sequence[ark.ArkOp] | None = None,
                operands: Sequence[Operands] | None = None) -> int:
    """Bytes of the distinct buffers the schedule's operators read or write (inputs, weights
    and activations: what ARK's default plan allocates). (`operands`: the operators'
    `Operands`, when known.)"""
    if operands is None:
        operands = operand_table(operators if operators is not None else schedule.operators())
    sizes: dict[int, int] = {}
    get = sizes.get
    for _, _, read_regions, write_regions, _ in operands:
        for regions in (read_regions, write_regions):
            for region in regions:
                buffer = region.buffer
                size = region.layout.size_bytes
                if size > get(buffer, 0):
                    sizes[buffer] = size
                elif buffer not in sizes:
                    sizes[buffer] = 0
    return sum(sizes.values())


def splittable_matmuls(kernel: Kernel) -> list[ark.MatmulOp] | None:
    """The matmuls of a kernel that can be cut along K, or None: a matmul kernel of matmuls
    of one K and output shape that read nothing the kernel computes, and element-wise operators
    (which can run after the parts are summed)."""
    if kernel.op.kind_name != "matmul":
        return None
    matmuls = [op for op in kernel.ops if isinstance(op, ark.MatmulOp)]
    if not matmuls or not all(isinstance(op, (ark.MatmulOp, ark.UnaryOp, ark.BinaryOp))
                              for op in kernel.ops):
        return None
    first = matmuls[0]
    if any(mm.problem_mnk()[2] != first.problem_mnk()[2]
           or mm.outputs[0].shape_list != first.outputs[0].shape_list
           or mm.config != first.config for mm in matmuls):
        return None
    computed = {v for op in kernel.ops for v in (*op.result_tensors, *op.operand_groups()[1])}
    if any(_source(v) in computed for mm in matmuls for v in mm.read_tensors):
        return None
    return matmuls


def _source(value: SSAValue) -> SSAValue:
    """The value a chain of aliasing views starts from."""
    while isinstance(value.owner, ark.ViewOp) and value.owner.source is not None:
        value = value.owner.source
    return value


def k_parts(depth: int, step: int, weights: Sequence[float],
            rounding=round) -> list[int] | None:
    """`depth` cut into parts proportional to `weights`, each a positive multiple of `step`
    (the first takes what `rounding` leaves), or None when there are too few steps."""
    steps = depth // step
    if steps < len(weights):
        return None
    total = sum(weights)
    counts = [max(1, rounding(steps * w / total)) for w in weights[1:]]
    for _ in range(sum(counts) - steps + 1):
        # Rounding up left the first part no step: take them back from the largest parts.
        largest = max(range(len(counts)), key=counts.__getitem__)
        counts[largest] -= 1
    first = steps - sum(counts)
    parts = [first * step, *(c * step for c in counts)]
    parts[0] += depth - steps * step
    return parts


@dataclass(frozen=True)
class SplitK:
    """A cut of a kernel's K into `parts` that run concurrently on `processors` each."""

    parts: tuple[int, ...]
    processors: tuple[int, ...]
    seconds: float
    """Modeled: the parts (with the device's bandwidth shared among all of them), the barrier
    and the kernel summing them (which runs the epilogue)."""
    whole: float
    """Modeled: the kernel uncut on all processors."""


def split_shapes(tiles: int, slots: int, processors: int,
                 limit: int) -> Iterator[tuple[list[int], list[float]]]:
    """Candidate (processors, K weights) per part for a kernel of `tiles` tiles and `slots`
    slots per processor: up to `limit` parts of one wave each, with one tile per processor or
    with every slot busy, optionally plus a part on the processors left over, whose share of K
    is as many times smaller as it runs tiles per processor (or waves) more."""
    for width in sorted({tiles, math.ceil(tiles / slots)}):
        per = math.ceil(tiles / width)
        for count in range(1, min(limit, processors // width) + 1):
            ranges, weights = [width] * count, [1.0] * count
            left = processors - count * width
            if count > 1:
                yield ranges, weights
            if left < 1 or count >= limit:
                continue
            for weight in sorted({per / math.ceil(tiles / left),
                                  1 / math.ceil(tiles / (left * slots))}):
                yield [*ranges, left], [*weights, weight]


def _part_estimate(kernel: Kernel, matmuls: Sequence[ark.MatmulOp],
                   fraction: float) -> KernelEstimate:
    """The matmuls of `kernel` over `fraction` of K: the K-long work (FLOPs, operand loads)
    shrinks, the output tile stays."""
    est = kernel_estimate(matmuls, [mm.config_value() for mm in matmuls], kernel.op.tiles,
                          kernel.op.warps, kernel.slots, kernel.estimate.device)
    out = matmuls[0].outputs[0]
    tm, tn = matmuls[0].config_value()["TileShapeMNK"][:2]
    written = len(matmuls) * min(tm, out.shape_list[-2]) * min(tn, out.shape_list[-1]) * \
        out.element_bytes
    matmul, vector, l2, dram = est.work
    work = (matmul * fraction, vector, written + (l2 - written) * fraction,
            written + (dram - written) * fraction)
    return replace(est, work=work)


def _sum_estimate(kernel: Kernel, matmuls: Sequence[ark.MatmulOp], count: int,
                  device: GpuDevice) -> KernelEstimate:
    """The kernel that adds the `count - 1` partial outputs of every matmul into the first's
    and runs the epilogue, as tiles of 1 / #processors of the output each (an estimate: the
    tiling pass picks its real tiling after the cut)."""
    out = matmuls[0].outputs[0]
    per_task = out.num_elements / device.processors
    nbytes = per_task * out.element_bytes * len(matmuls)
    adds = count - 1
    # Per matmul: the first part's output once, every partial once, every running sum written.
    dram = nbytes * (1 + 2 * adds)
    l2 = nbytes * 3 * adds
    n_ops = len(matmuls) * adds + len(kernel.ops) - len(matmuls)
    warps = min(device.warps_to_saturate_memory, device.plan_warps_per_processor)
    return KernelEstimate(device.processors, 1, warps, n_ops,
                          (0.0, per_task * len(matmuls) * adds, l2, dram),
                          kernel.estimate.dtype, device)


def split_plan(kernel: Kernel, device: GpuDevice,
               partial_bytes: float = math.inf) -> SplitK | None:
    """The fastest cut of a lone kernel's K into parts on disjoint processor ranges (see
    `split_shapes`) whose partial buffers take at most `partial_bytes`, by the cost model, or
    None when no cut is 5% faster than the kernel uncut on all processors.

    A cut must also be faster than the kernel uncut under the static-distribution roofline
    (`targets.ark.static_roofline`, the planner's second opinion: ARK's task distribution with
    waves quantised, no per-task or latency term of the cost model): a cut that adds a round of
    partial sums and a barrier without removing a wave or putting idle processors to work loses
    there, whatever the cost model's assumptions say."""
    matmuls = splittable_matmuls(kernel)
    cuts = cut_candidates(kernel, device, partial_bytes)
    if matmuls is None or not cuts:
        return None
    _, _, depth = matmuls[0].problem_mnk()
    whole = kernel.estimate.on(device.processors)
    static = StaticCut(kernel, matmuls, device)
    best: SplitK | None = None
    estimates: dict[int, KernelEstimate] = {}
    for ranges, parts in cuts:
        busy = sum(min(r, kernel.op.tiles) for r in ranges)
        for k in parts:
            if k not in estimates:
                estimates[k] = _part_estimate(kernel, matmuls, k / depth)
        parts_s = max(estimates[k].on(r, busy) for k, r in zip(parts, ranges, strict=True))
        seconds = parts_s + device.barrier_s + \
            _sum_estimate(kernel, matmuls, len(parts), device).seconds
        if (best is None or seconds < best.seconds) and \
                static.cut_seconds(parts, ranges) < static.whole:
            best = SplitK(tuple(parts), tuple(ranges), seconds, whole)
    return best if best is not None and best.seconds < 0.95 * whole else None


def cut_candidates(kernel: Kernel, device: GpuDevice, partial_bytes: float = math.inf
                   ) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """The (processors, K) per part of every cut `split_plan` weighs for a lone kernel, in
    order (`split_shapes` with each way of rounding K to whole steps), within `partial_bytes`
    of partial buffers; empty when the kernel cannot be cut."""
    matmuls = splittable_matmuls(kernel)
    if matmuls is None:
        return []
    _, _, depth = matmuls[0].problem_mnk()
    step = matmuls[0].config_value()["TileShapeMNK"][2]
    out = matmuls[0].outputs[0]
    per_part = len(matmuls) * out.num_elements * out.element_bytes
    fit = 1 + int(partial_bytes // per_part) if math.isfinite(partial_bytes) else MAX_PARTS
    limit = min(MAX_PARTS, depth // step, fit)
    if limit < 2:
        return []
    shapes = split_shapes(kernel.op.tiles, kernel.slots, device.processors, limit)
    return sorted({(tuple(ranges), tuple(parts)) for ranges, weights in shapes
                   for rounding in (round, math.floor)
                   if (parts := k_parts(depth, step, weights, rounding)) is not None})


class StaticCut:
    """A kernel and its K cuts under the static-distribution roofline (`split_plan`'s second
    opinion): the parts on their processor ranges, a barrier, and the kernel adding the
    partials as `_sum_estimate` assumes it is tiled (one tile per processor)."""

    def __init__(self, kernel: Kernel, matmuls: Sequence[ark.MatmulOp], device: GpuDevice):
        self.device = device
        self.tiles = max(kernel.op.tiles, 1)
        self.slots, self.warps = kernel.slots, kernel.warps
        self.dtype = static_roofline.dtype_of(matmuls)
        self.work = static_roofline.ops_work(kernel.ops).scaled(1 / self.tiles)
        self.depth = matmuls[0].problem_mnk()[2]
        out = matmuls[0].outputs[0]
        self.output_bytes = len(matmuls) * out.num_elements * out.element_bytes
        self.whole = static_roofline.launch_seconds(
            self.tiles, self.work, device.processors, self.slots, self.warps, device,
            self.dtype)

    def cut_seconds(self, parts: Sequence[int], ranges: Sequence[int]) -> float:
        device, tiles = self.device, self.tiles
        busy = sum(min(r, tiles) for r in ranges)
        parts_s = 0.0
        for k, r in zip(parts, ranges, strict=True):
            # A part reads k / K of the operands and writes a whole output (or partial) tile.
            fraction = k / self.depth
            tile_out = self.output_bytes / tiles
            work = static_roofline.Work(self.work.matmul * fraction, self.work.vector,
                                        tile_out + (self.work.bytes - tile_out) * fraction)
            parts_s = max(parts_s, static_roofline.launch_seconds(
                tiles, work, r, self.slots, self.warps, device, self.dtype, busy))
        # The sum: every partial read once, the output read and written once.
        p = device.processors
        summed = static_roofline.Work(0.0, self.output_bytes * (len(parts) - 1) / p,
                                      self.output_bytes * (len(parts) + 1) / p)
        sum_s = static_roofline.launch_seconds(p, summed, p, 1, device.plan_warps_per_processor,
                                               device, self.dtype)
        return parts_s + static_roofline.BARRIER_S + sum_s


def split_k(kernel: Kernel, parts: Sequence[int], ids: Ids, tiler: Tiler,
            new_kernels: Sequence[int]) -> None:
    """Cut the matmuls of a kernel along K into `parts`: part 0 keeps the kernel and writes the
    outputs, part i (kernel `new_kernels[i - 1]`) writes partial buffers, and a last kernel
    (`new_kernels[-1]`) adds the partials into the outputs in place and runs the epilogue."""
    first_kernel = kernel.op
    part_kernels = [first_kernel]
    for kernel_id in new_kernels[:-1]:
        part = sched.KernelOp(kernel_id, "matmul")
        part.set_tiling(first_kernel.tiles, first_kernel.warps, first_kernel.sram)
        part_kernels.append(part)
    sum_kernel = sched.KernelOp(new_kernels[-1], "elementwise")
    bounds = [0]
    for k in parts:
        bounds.append(bounds[-1] + k)
    summing: list[ark.ArkOp] = []
    placed_kernels = False
    for op in kernel.ops:
        if not isinstance(op, ark.MatmulOp):
            op.task = sum_kernel.id
            summing.append(op)
            continue
        new, adds = _split_matmul(op, bounds, part_kernels, sum_kernel, ids)
        if not placed_kernels:
            # Declare the new kernels before their first operators.
            new = [*part_kernels[1:], sum_kernel, *new]
            placed_kernels = True
        for created in new:
            created.location = op.location
        Rewriter.insert_op(new, InsertPoint.before(op))
        (result,) = op.result_tensors
        final = adds[-1].result_tensors[0]
        result.replace_all_uses_with(final)
        final.name_hint = result.name_hint
        op.detach()
        op.erase()
        summing.extend(adds)
    tiler.tile(sum_kernel, summing)


def _split_matmul(mm: ark.MatmulOp, bounds: Sequence[int], part_kernels: Sequence[sched.KernelOp],
                  sum_kernel: sched.KernelOp, ids: Ids) -> tuple[list[Operation], list[ark.AddOp]]:
    """The operators replacing one matmul cut at K `bounds`: per part the K slices of its
    operands and the part's matmul (part 0 into the matmul's output, the others into fresh
    partial buffers), then the in-place adds of the partials (the last of which yields the
    matmul's result type)."""
    a, b = mm.read_tensors
    (out,) = mm.write_tensors
    (result,) = mm.result_tensors
    axes = (_k_axis(a, 0, mm.trans_input), _k_axis(b, 1, mm.trans_other))
    args = {k: v for k, v in (("transpose_input", mm.transpose_input),
                              ("transpose_other", mm.transpose_other)) if v is not None}
    label, config, o = mm.label.data, mm.config, out.type
    new: list[Operation] = []
    results: list[SSAValue] = []
    for i, (lo, hi) in enumerate(zip(bounds, bounds[1:], strict=False)):
        views = [_k_slice(v, axis, lo, hi, ids) for v, axis in zip((a, b), axes, strict=True)]
        new.extend(views)
        if i == 0:
            target = out
        else:
            partial = ark.ViewOp(ark.TensorType.get(ids.next_tensor(), o.data_type,
                                                    o.shape_list,
                                                    ark.BufferAttr.get(ids.next_buffer())))
            new.append(partial)
            target = partial.result
        part = ark.MatmulOp(label if i == 0 else f"{label}_k{i}",
                            [views[0].result, views[1].result], [target],
                            [target.type.with_id(ids.next_tensor())], args=args,
                            task=part_kernels[i].kernel_id, config=config)
        new.append(part)
        results.append(part.result_tensors[0])
    adds: list[ark.AddOp] = []
    running = results[0]
    for i, partial_sum in enumerate(results[1:], start=1):
        in_place = ark.ViewOp(o.with_id(ids.next_tensor()), running)
        last = i == len(results) - 1
        add = ark.AddOp(f"{label}_sum" if i == 1 else f"{label}_sum{i}",
                        [running, partial_sum], [in_place.result],
                        [result.type if last else o.with_id(ids.next_tensor())],
                        task=sum_kernel.kernel_id)
        new.extend((in_place, add))
        adds.append(add)
        running = add.result_tensors[0]
    for created in new:
        for value in created.results:
            if not value.name_hint:
                value.name_hint = f"t{value.type.tensor_id}"
    return new, adds


# ---------------------------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------------------------


def _topological(order: list[int], deps: dict[int, set[int]]) -> list[int]:
    """`order` with every kernel after its dependencies (depth first, without recursion: a
    model may chain thousands of kernels)."""
    done: set[int] = set()
    out: list[int] = []
    for root in order:
        if root in done:
            continue
        done.add(root)
        stack = [(root, iter(sorted(deps[root])))]
        while stack:
            k, pending = stack[-1]
            d = next((d for d in pending if d not in done), None)
            if d is None:
                stack.pop()
                out.append(k)
            else:
                done.add(d)
                stack.append((d, iter(sorted(deps[d]))))
    return out


def phases_of(schedule: sched.ScheduleOp,
              tables: ScheduleTables | None = None) -> list[list[int]]:
    """Kernels grouped by dependency depth, in order."""
    tables = tables or ScheduleTables(schedule)
    operators = tables.kernel_operators()
    position = tables.positions()
    kernel_of: list[int | None] = [None] * len(position)
    for k, ops in operators.items():
        for op in ops:
            kernel_of[position[id(op)]] = k
    deps = kernel_dependencies(kernel_of, tables.dependencies(operator_dependencies))
    order = list(tables.kernels())
    level = levels(deps, _topological(order, deps))
    grouped: dict[int, list[int]] = {}
    for k in order:
        grouped.setdefault(level[k], []).append(k)
    return [grouped[d] for d in sorted(grouped)]


def renumber_and_reorder(schedule: sched.ScheduleOp, order: list[int],
                         tables: ScheduleTables | None = None) -> None:
    """Give kernels ids 0, 1, ... in `order` and put their declarations in that order: each
    right before its first operator when the operators already come in that order, else
    rebuild the block: each kernel's declaration, its operators, each after its views.
    (Launches are made after, with the new ids.)"""
    tables = tables or ScheduleTables(schedule)
    kernels = tables.kernels()
    operators = tables.kernel_operators()
    # Operators keep their relative order in the block: their places among the operators
    # order their kernels.
    position = tables.positions()
    tables.set_kernels({i: kernels[old] for i, old in enumerate(order)},
                       {i: operators[old] for i, old in enumerate(order)})
    new_id = {old: i for i, old in enumerate(order)}
    block = schedule.graph
    firsts = [position[id(operators[k][0])] for k in order if operators[k]]
    if all(operators[k] for k in order) and firsts == sorted(firsts):
        for old in order:
            kernel, first = kernels[old], operators[old][0]
            if new_id[old] == old and kernel.next_op is first:
                continue  # its id, its operators' and its place are right already
            kernel.id = attr = sched.int_attr(new_id[old])
            for op in operators[old]:
                op.properties["task"] = attr  # (`op.task = attr`, without the descriptor)
            kernel.detach()
            block.insert_op_before(kernel, first)
        return
    _rebuild(schedule, order, new_id, kernels, operators)
    tables.reordered()


def _rebuild(schedule: sched.ScheduleOp, order: list[int], new_id: dict[int, int],
             kernels: dict[int, sched.KernelOp], operators: dict[int, list[ark.ArkOp]]) -> None:
    block = schedule.graph
    rest = [op for op in block.ops if not isinstance(op, (ark.ArkOp, sched.KernelOp,
                                                           ark.ViewOp))]
    views = [op for op in block.ops if isinstance(op, ark.ViewOp)]
    unassigned = [op for op in block.ops if isinstance(op, ark.ArkOp) and op.task_id is None]
    for op in list(block.ops):
        op.detach()
    placed: set[Operation] = set()

    def place(op: Operation) -> None:
        if op in placed:
            return
        for operand in op.operands:
            if isinstance(operand.owner, ark.ViewOp):
                place(operand.owner)
        placed.add(op)
        block.add_op(op)

    for old in order:
        kernel = kernels[old]
        kernel.id = sched.int_attr(new_id[old])
        block.add_op(kernel)
        placed.add(kernel)
        for op in operators[old]:
            op.task = kernel.id
            place(op)
    for op in [*unassigned, *views, *rest]:
        place(op)


@dataclass(frozen=True)
class SchedPartitionPass(ModulePass):
    name = "sched-partition"

    concurrency: str = "auto"
    split_k: bool = True
    granularity: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        self.check_options()
        for schedule in sched.schedules(op):
            self.partition(schedule)

    def partition(self, schedule: sched.ScheduleOp, tables: ScheduleTables | None = None
                  ) -> None:
        tables = tables or ScheduleTables(schedule)
        device = gpu_device(schedule.device_name)
        estimates = Estimates(device, tables.signatures)
        for phase in [] if tables.planning else schedule.phases():
            phase.detach()
            phase.erase()
        phases = phases_of(schedule, tables)
        if self.split_k and self.split_lone_matmuls(schedule, phases, estimates, tables):
            tables.forget()
            phases = phases_of(schedule, tables)
        operators = tables.kernel_operators()
        kernels = tables.kernels()
        order: list[int] = []
        planned: list[list[Launch]] = []
        for members in phases:
            phase_kernels = [estimates.kernel(kernels[k], operators[k]) for k in members]
            planned.append(phase_launches(phase_kernels, device, self.concurrency,
                                          self.granularity))
            order.extend(members)
        renumber_and_reorder(schedule, order, tables)
        new_id = {old: i for i, old in enumerate(order)}
        planned = [[Launch(new_id[launch.kernel_id], *launch[1:]) for launch in phase]
                   for phase in planned]
        tables.set_phases(planned)
        if not tables.planning:  # (`ark-plan` lowers the plain phases to the plan directly)
            schedule.graph.add_ops(sched.PhaseOp([launch.op() for launch in phase])
                                   for phase in planned)

    def check_options(self) -> None:
        if self.concurrency not in CONCURRENCY:
            from ground.diagnostics import UsageError

            raise UsageError(f"sched-partition: concurrency must be one of "
                             f"{', '.join(CONCURRENCY)}, got '{self.concurrency}'")

    def run(self, schedule: sched.ScheduleOp, tables: ScheduleTables) -> None:
        """The pass on one schedule (for `ark-plan`)."""
        self.check_options()
        self.partition(schedule, tables)

    def split_lone_matmuls(self, schedule: sched.ScheduleOp, phases: list[list[int]],
                           estimates: Estimates, tables: ScheduleTables | None = None) -> bool:
        """Split the lone matmul kernels of `phases` where it pays; did any split?"""
        tables = tables or ScheduleTables(schedule)
        device = estimates.device
        ids: Ids | None = None
        tiler = Tiler(device, tables.signatures)
        operators = tables.kernel_operators()
        kernels = tables.kernels()
        next_id = max(kernels, default=-1) + 1
        budget = SPLIT_K_MEMORY * model_bytes(schedule, tables.operators(), tables.operands())
        cuts: dict[tuple, SplitK | None] = {}  # kernels of equal structure share their cut
        for members in phases:
            if len(members) != 1 or kernels[members[0]].kind_name != "matmul":
                continue
            op, ops = kernels[members[0]], operators[members[0]]
            kernel = estimates.kernel(op, ops)
            # (By `id`s of the configs, which the ops keep: equal configs that are not the
            # same attribute only plan another, equal, cut.)
            key = (cached_signature(op.kind_name, ops, tables.signatures),
                   *map(id, (o.properties.get("config") for o in ops)), kernel.tiles,
                   kernel.warps, kernel.slots)
            if key not in cuts:
                cuts[key] = split_plan(kernel, device, budget)
            cut = cuts[key]
            if cut is not None:
                ids = ids or Ids(schedule.graph)
                count = len(cut.parts)
                split_k(kernel, cut.parts, ids, tiler, range(next_id, next_id + count))
                next_id += count
        return ids is not None
