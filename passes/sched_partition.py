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

With `split-k`, a lone matmul whose tiles fill less than one wave of the device is split along
K into two matmuls over disjoint processor ranges: the first writes the output, the second a
partial buffer, and an element-wise add (next phase) sums them in place. The cut balances the
two halves (the first runs in one wave; the second gets the processors left over) and is taken
only when the cost model says it pays for the add and the extra barrier.

Finally kernels are renumbered in execution order and the block is reordered to match, so that
a plan's TaskInfo ids are the positions of its TaskInfos (as ARK's code generator expects).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from compiler.cost_model import KernelEstimate, kernel_estimate
from compiler.hardware import GpuDevice, gpu_device
from dialects import ark, sched
from dialects.plan import Range
from passes.sched_graph import kernel_dependencies, levels, operator_dependencies
from passes.sched_tile import Tiler, signature, slots

CONCURRENCY = ("auto", "ranges", "sequence")


@dataclass
class Kernel:
    op: sched.KernelOp
    ops: list[ark.ArkOp]
    estimate: KernelEstimate
    slots: int


class Estimates:
    """Kernel estimates, shared by kernels of equal structure and configuration."""

    def __init__(self, device: GpuDevice):
        self.device = device
        self.cache: dict[tuple, KernelEstimate] = {}

    def kernel(self, kernel: sched.KernelOp, ops: Sequence[ark.ArkOp]) -> Kernel:
        count = max(slots(kernel.warps, kernel.sram, self.device), 1)
        key = (signature(kernel.kind_name, ops), tuple(op.config for op in ops),
               kernel.tiles, kernel.warps, count)
        estimate = self.cache.get(key)
        if estimate is None:
            configs = [op.config_value() for op in ops]
            estimate = self.cache[key] = kernel_estimate(ops, configs, kernel.tiles,
                                                         kernel.warps, count, self.device)
        return Kernel(kernel, list(ops), estimate, count)


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
           resources: tuple[int, int] | None = None) -> sched.LaunchOp:
    """A launch of all tiles of `kernel` on `units`, with its slots' warps and shared memory
    (or `resources` = (warps, sram), when several launches share their processors)."""
    op = kernel.op
    warps, sram = resources or (kernel.slots * op.warps, kernel.slots * op.sram)
    return sched.LaunchOp(op.kernel_id, Range(0, op.tiles), units, Range(0, warps),
                          Range(0, sram), granularity)


def phase_launches(kernels: Sequence[Kernel], device: GpuDevice, concurrency: str,
                   granularity: int) -> list[sched.LaunchOp]:
    processors = device.processors
    if len(kernels) == 1:
        (kernel,) = kernels
        units = Range(0, max(1, min(processors, kernel.op.tiles)))
        return [launch(kernel, units, granularity)]
    share = balanced_ranges(kernels, processors) if concurrency != "sequence" else None
    if share is not None and concurrency == "auto":
        ranges_time = max(k.estimate.on(p) for k, p in zip(kernels, share, strict=True))
        if sequence_seconds(kernels, processors) <= ranges_time:
            share = None
    if share is None:
        # One resource group on all processors: ARK rotates the first processor from one
        # task group to the next, so the kernels pack like one.
        resources = (max(k.slots * k.op.warps for k in kernels),
                     max(k.slots * k.op.sram for k in kernels))
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


def splittable_matmul(kernel: Kernel) -> ark.MatmulOp | None:
    """The matmul of a kernel made of one matmul and element-wise operators on its output
    (which can run after the halves are summed), or None."""
    matmuls = [op for op in kernel.ops if isinstance(op, ark.MatmulOp)]
    if kernel.op.kind_name != "matmul" or len(matmuls) != 1 or kernel.ops[0] is not matmuls[0]:
        return None
    if not all(isinstance(op, (ark.UnaryOp, ark.BinaryOp)) for op in kernel.ops[1:]):
        return None
    return matmuls[0]


def split_cut(kernel: Kernel, device: GpuDevice) -> tuple[int, int, float] | None:
    """(K of the first half, processors of the first half, modeled seconds saved) for a lone
    matmul kernel that fills less than one wave, or None when splitting does not pay."""
    mm = splittable_matmul(kernel)
    if mm is None:
        return None
    _, _, depth = mm.problem_mnk()
    step = mm.config_value()["TileShapeMNK"][2]
    tiles, per_proc = kernel.op.tiles, kernel.slots
    first_procs = math.ceil(tiles / per_proc)
    rest = device.processors - first_procs
    if rest < 1 or depth < 4 * step:
        return None
    rest_waves = math.ceil(tiles / (rest * per_proc))
    second = max(step, (depth // (1 + rest_waves)) // step * step)
    first = depth - second
    whole = kernel.estimate.on(device.processors)
    split = max(kernel.estimate.scaled(first / depth).on(first_procs),
                kernel.estimate.scaled(second / depth).on(rest))
    out = mm.outputs[0]
    add = (3 * out.num_elements * out.element_bytes / device.memory_bandwidth
           + device.memory_latency_s * 2 + device.barrier_s)
    saved = whole - split - add
    return (first, first_procs, saved) if saved > 0.05 * whole else None


def split_k(schedule: sched.ScheduleOp, kernel: Kernel, first: int, ids: Ids,
            tiler: Tiler, new_kernels: tuple[int, int]) -> None:
    """Replace a lone matmul kernel by two half-K matmuls (the first keeps the kernel and
    writes the output, the second, kernel `new_kernels[0]`, a partial buffer) and an in-place
    add of the two (kernel `new_kernels[1]`), which the matmul's epilogue joins."""
    mm, epilogue = kernel.ops[0], kernel.ops[1:]
    a, b = mm.read_tensors
    (out,) = mm.write_tensors
    (result,) = mm.result_tensors
    _, _, depth = mm.problem_mnk()
    axes = (_k_axis(a, 0, mm.trans_input), _k_axis(b, 1, mm.trans_other))
    views = [_k_slice(v, axis, lo, hi, ids)
             for lo, hi in ((0, first), (first, depth))
             for v, axis in zip((a, b), axes, strict=True)]
    o = out.type
    partial = ark.ViewOp(ark.TensorType.get(ids.next_tensor(), o.data_type, o.shape_list,
                                            ark.BufferAttr.get(ids.next_buffer())))
    args = {k: v for k, v in (("transpose_input", mm.transpose_input),
                              ("transpose_other", mm.transpose_other)) if v is not None}
    label, config = mm.label.data, mm.config
    first_mm = ark.MatmulOp(label, [views[0].result, views[1].result], [out],
                            [o.with_id(ids.next_tensor())], args=args, task=mm.task_id,
                            config=config)
    second_mm = ark.MatmulOp(f"{label}_k1", [views[2].result, views[3].result],
                             [partial.result], [partial.result.type.with_id(ids.next_tensor())],
                             args=args, task=new_kernels[0], config=config)
    in_place = ark.ViewOp(o.with_id(ids.next_tensor()), first_mm.result_tensors[0])
    add = ark.AddOp(f"{label}_sum", [first_mm.result_tensors[0], second_mm.result_tensors[0]],
                    [in_place.result], [result.type], task=new_kernels[1])
    second_kernel = sched.KernelOp(new_kernels[0], "matmul")
    second_kernel.set_tiling(kernel.op.tiles, kernel.op.warps, kernel.op.sram)
    add_kernel = sched.KernelOp(new_kernels[1], "elementwise")
    new = [*views, partial, first_mm, second_kernel, second_mm, in_place, add_kernel, add]
    for op in new:
        op.location = mm.location
    Rewriter.insert_op(new, InsertPoint.before(mm))
    for value in (*(v.result for v in views), partial.result, in_place.result,
                  *first_mm.result_tensors, *second_mm.result_tensors):
        value.name_hint = f"t{value.type.tensor_id}"
    result.replace_all_uses_with(add.result_tensors[0])
    add.result_tensors[0].name_hint = result.name_hint
    mm.detach()
    mm.erase()
    for op in epilogue:
        op.task = add.task
    tiler.tile(add_kernel, [add, *epilogue])


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


def phases_of(schedule: sched.ScheduleOp) -> list[list[int]]:
    """Kernels grouped by dependency depth, in order."""
    operators = schedule.kernel_operators()
    kernel_of = {op: k for k, ops in operators.items() for op in ops}
    deps = kernel_dependencies(kernel_of, operator_dependencies(schedule.operators()))
    order = list(schedule.kernels())
    level = levels(deps, _topological(order, deps))
    grouped: dict[int, list[int]] = {}
    for k in order:
        grouped.setdefault(level[k], []).append(k)
    return [grouped[d] for d in sorted(grouped)]


def renumber_and_reorder(schedule: sched.ScheduleOp, order: list[int]) -> None:
    """Give kernels ids 0, 1, ... in `order` and put their declarations in that order: each
    right before its first operator when the operators already come in that order, else
    rebuild the block: each kernel's declaration, its operators, each after its views."""
    kernels = schedule.kernels()
    operators = schedule.kernel_operators()
    new_id = {old: i for i, old in enumerate(order)}
    block = schedule.graph
    for phase in schedule.phases():
        for lop in phase.launches():
            lop.kernel = sched.int_attr(new_id[lop.kernel_id])
    position = {op: i for i, op in enumerate(block.ops)}
    firsts = [position[operators[k][0]] for k in order if operators[k]]
    if all(operators[k] for k in order) and firsts == sorted(firsts):
        for old in order:
            kernel = kernels[old]
            kernel.id = sched.int_attr(new_id[old])
            for op in operators[old]:
                op.task = kernel.id
            kernel.detach()
            block.insert_op_before(kernel, operators[old][0])
        return
    _rebuild(schedule, order, new_id, kernels, operators)


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
        if self.concurrency not in CONCURRENCY:
            from compiler.diagnostics import UsageError

            raise UsageError(f"sched-partition: concurrency must be one of "
                             f"{', '.join(CONCURRENCY)}, got '{self.concurrency}'")
        for schedule in sched.schedules(op):
            self.partition(schedule)

    def partition(self, schedule: sched.ScheduleOp) -> None:
        device = gpu_device(schedule.device_name)
        estimates = Estimates(device)
        for phase in schedule.phases():
            phase.detach()
            phase.erase()
        phases = phases_of(schedule)
        if self.split_k and self.split_lone_matmuls(schedule, phases, estimates):
            phases = phases_of(schedule)
        operators = schedule.kernel_operators()
        kernels = schedule.kernels()
        order: list[int] = []
        for members in phases:
            phase_kernels = [estimates.kernel(kernels[k], operators[k]) for k in members]
            schedule.graph.add_op(sched.PhaseOp(phase_launches(
                phase_kernels, device, self.concurrency, self.granularity)))
            order.extend(members)
        renumber_and_reorder(schedule, order)

    def split_lone_matmuls(self, schedule: sched.ScheduleOp, phases: list[list[int]],
                           estimates: Estimates) -> bool:
        """Split the lone matmul kernels of `phases` where it pays; did any split?"""
        device = estimates.device
        ids: Ids | None = None
        tiler = Tiler(device)
        operators = schedule.kernel_operators()
        kernels = schedule.kernels()
        next_id = max(kernels, default=-1) + 1
        for members in phases:
            if len(members) != 1 or kernels[members[0]].kind_name != "matmul":
                continue
            kernel = estimates.kernel(kernels[members[0]], operators[members[0]])
            cut = split_cut(kernel, device)
            if cut is not None:
                ids = ids or Ids(schedule.graph)
                split_k(schedule, kernel, cut[0], ids, tiler, (next_id, next_id + 1))
                next_id += 2
        return ids is not None
