"""A second, plain model of ARK plans: ARK's static task distribution on a roofline.

planc's cost model (`targets.ark.cost_model`) charges per-task and per-operator latencies and
saturation curves that are assumptions; a planner tuned against them alone could win only
under them. This model shares none of those terms and no constant fitted to planc's plans. It
is the planner's second opinion (`sched-partition` takes a split-K cut only when both models
find it faster; `sched-tile` weighs matmul tilings under both) and the independent model
`bench/plan_quality.py` and `planc tune` report.

What it counts:

* **Static distribution.** Tasks run where ARK's `task_seq` puts them (`plan.distribute`:
  block-cyclic over the resource group's processors, the first processor rotating from one
  task group to the next); each processor has its own clock. A processor with two tasks takes
  twice as long as one with one: waves are quantised.
* **Work of a task.** A TaskInfo's N tasks each do 1/N of its operators' matmul FLOPs
  (2 M N K), vector FLOPs (one per output element, one per reduced element) and *compulsory*
  DRAM bytes: every distinct tensor region its operators read or write, once (values that
  alias the same memory count once; an ideal cache within the TaskInfo; a tensor read by
  several TaskInfos is read by each).
* **Rates of a processor.** Compute: the device's matmul and vector rates divided among its
  processors (`GpuDevice.matmul_rate`, which holds the device's documented matmul
  efficiency). Memory: the smaller of its share of HBM bandwidth among the processors the
  processor group keeps busy and what its active warps can keep in flight by Little's law:
  warps x `BYTES_IN_FLIGHT_PER_THREAD` x warp size / `DRAM_LATENCY_S`. Active warps are the
  warps of the tasks it runs at once (`min(tasks, slots) x warps per task`).
* A processor's time for a task group: max(compute, bytes / bandwidth) of all its tasks.
* **Barriers.** Every grid barrier `plan.barriers` places costs `BARRIER_S`.

Assumptions (stated, not fitted): `DRAM_LATENCY_S` 600 ns on every GPU (microbenchmarks of
A100, H100 and MI300X report 450-800 ns for a load that misses L2); each thread keeps
`BYTES_IN_FLIGHT_PER_THREAD` = 64 bytes in flight (four independent 16-byte loads, what an
unrolled vectorised copy issues); `BARRIER_S` 2 us per grid barrier; compute and memory
overlap perfectly within a processor; tasks of one TaskInfo do equal work (edge tiles are not
smaller).

`bound` is the lower bound of any plan of the same operators: all FLOPs at the whole device's
rates and every model input and output moved once at full HBM bandwidth, no barrier.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from devices.hardware import GpuDevice
from dialects import ark, plan

DRAM_LATENCY_S = 600e-9
"""Latency of a load that misses L2 (an assumption, see the module docstring)."""

BYTES_IN_FLIGHT_PER_THREAD = 64
"""Bytes one thread keeps in flight (an assumption, see the module docstring)."""

BARRIER_S = 2e-6
"""One grid barrier (an assumption, see the module docstring)."""


@dataclass(frozen=True)
class Work:
    """Matmul FLOPs, vector FLOPs and compulsory DRAM bytes."""

    matmul: float = 0.0
    vector: float = 0.0
    bytes: float = 0.0

    def scaled(self, fraction: float) -> Work:
        return Work(self.matmul * fraction, self.vector * fraction, self.bytes * fraction)

    def __add__(self, other: Work) -> Work:
        return Work(self.matmul + other.matmul, self.vector + other.vector,
                    self.bytes + other.bytes)


def op_flops(op: ark.ArkOp) -> tuple[float, float]:
    """(matmul FLOPs, vector FLOPs) of a whole operator."""
    if isinstance(op, (ark.NoopOp, ark.TensorOp, ark.ReshapeOp)) or not op.outputs:
        return 0.0, 0.0
    if isinstance(op, ark.MatmulOp):
        m, n, k = op.problem_mnk()
        batch = math.prod(plan.output_shape(op)) // (m * n)
        return 2.0 * batch * m * n * k, 0.0
    if isinstance(op, ark.ReduceOp):
        return 0.0, float(op.inputs[0].num_elements)
    return 0.0, float(math.prod(plan.output_shape(op)))


def region(value) -> tuple:
    """What a tensor value occupies: its buffer, offsets, shape and strides (values that alias
    the same memory, such as an operator's output operand and its result, are one region)."""
    t = value.type
    return (t.buffer_id, tuple(t.offsets_list), tuple(t.shape_list), tuple(t.strides_list),
            t.num_elements * t.element_bytes)


def ops_work(ops: Iterable[ark.ArkOp]) -> Work:
    """The work of operators run together: their FLOPs and each distinct tensor region they
    read or write once."""
    matmul = vector = 0.0
    regions: set = set()
    for op in ops:
        mm, vec = op_flops(op)
        matmul += mm
        vector += vec
        reads, writes = op.operand_groups()
        regions.update(map(region, reads))
        regions.update(map(region, writes))
    return Work(matmul, vector, float(sum(r[-1] for r in regions)))


def dtype_of(ops: Iterable[ark.ArkOp]) -> str:
    """The input type of the first matmul (its rate), else FP32."""
    for op in ops:
        if isinstance(op, ark.MatmulOp):
            return op.inputs[0].data_type
    return "FP32"


def bandwidth(device: GpuDevice, busy: int, warps: int) -> float:
    """Bytes per second one processor draws from DRAM while `busy` processors share HBM and it
    has `warps` warps active (Little's law)."""
    share = device.memory_bandwidth / max(1, min(busy, device.processors))
    in_flight = warps * device.warp_size * BYTES_IN_FLIGHT_PER_THREAD
    return min(share, in_flight / DRAM_LATENCY_S)


def tasks_seconds(count: int, task: Work, device: GpuDevice, dtype: str, busy: int,
                  warps: int) -> float:
    """One processor running `count` tasks of work `task` with `warps` warps active."""
    if count <= 0:
        return 0.0
    p = device.processors
    compute = task.matmul / (device.matmul_rate(dtype) / p) + \
        task.vector / (device.vector_rate(dtype) / p)
    return count * max(compute, task.bytes / bandwidth(device, busy, max(warps, 1)))


def launch_seconds(tasks: int, task: Work, processors: int, slots: int, slot_warps: int,
                   device: GpuDevice, dtype: str, busy: int | None = None) -> float:
    """`tasks` equal tasks spread round-robin over `processors` (granularity 1, as planc's
    launches): the processor with the most tasks sets the time (`busy`: the processors
    sharing HBM, these by default)."""
    if tasks <= 0:
        return 0.0
    active = min(processors, tasks)
    most = math.ceil(tasks / active)
    return tasks_seconds(most, task, device, dtype, busy or active,
                         min(most, max(slots, 1)) * slot_warps)


def per_processor_counts(processors: int, tasks: int, granularity: int,
                         first: int) -> list[tuple[int, int]]:
    """(processor number, task count) for `plan.distribute`'s distribution, computed from
    its formula without enumerating tasks: block b of `granularity` tasks goes to processor
    number (first + b) % P; the last block may be short."""
    if tasks <= 0 or processors <= 0:
        return []
    blocks = math.ceil(tasks / granularity)
    short = blocks * granularity - tasks
    counts = []
    for q in range(min(processors, blocks)):
        n = (blocks // processors + (q < blocks % processors)) * granularity
        if q == (blocks - 1) % processors:
            n -= short
        counts.append(((first + q) % processors, n))
    return counts


def plan_seconds(p: plan.PlanOp, device: GpuDevice) -> float:
    """The plan's time: processor groups in order on per-processor clocks, with barriers."""
    clock: dict[int, float] = {}
    tasks = p.tasks()
    operators = p.task_operators()
    work = {t: (ops_work(ops).scaled(1 / max(p.num_tasks(t), 1)), dtype_of(ops))
            for t, ops in operators.items()}
    groups = p.processor_groups()
    for pg, syncs in zip(groups, plan.barriers(groups), strict=True):
        for sync in syncs:
            start = max((clock.get(q, 0.0) for q in sync), default=0.0) + BARRIER_S
            for q in sync:
                clock[q] = start
        runs = []
        for rg in pg.resource_groups():
            procs = list(rg.processors)
            for tg, first in plan.task_group_starts(rg):
                if tg.task not in work or not operators[tg.task]:
                    continue
                layout = plan.slot_layout(rg, tasks[tg.task])
                for number, count in per_processor_counts(len(procs), len(tg.tasks),
                                                          tg.gran, first):
                    runs.append((procs[number], count, tg.task, layout))
        busy = len({q for q, *_ in runs})
        for q, count, task, layout in runs:
            task_work, dtype = work[task]
            warps = min(count, max(layout.num_slots, 1)) * layout.slot_warps
            clock[q] = clock.get(q, 0.0) + tasks_seconds(count, task_work, device, dtype,
                                                         busy, warps)
    return max(clock.values(), default=0.0)


def bound(ops: Sequence[ark.ArkOp], device: GpuDevice) -> float:
    """A lower bound for any plan of `ops` on `device` (see the module docstring)."""
    matmul = sum(op_flops(op)[0] for op in ops)
    vector = sum(op_flops(op)[1] for op in ops)
    read = {v for op in ops for v in op.operand_groups()[0]}
    results = {v for op in ops for v in op.result_tensors}
    written = {region(v) for op in ops for v in (*op.operand_groups()[1], *op.result_tensors)}
    inputs = {region(v) for v in read} - written
    outputs = {region(v) for v in results - read}  # results no operator reads
    moved = sum(r[-1] for r in inputs | outputs)
    dtype = dtype_of(ops)
    compute = matmul / device.matmul_rate(dtype) + vector / device.vector_rate(dtype)
    return max(compute, moved / device.memory_bandwidth)


def plan_bound(p: plan.PlanOp, device: GpuDevice) -> float:
    """`bound` of the plan's operators."""
    return bound([op for ops in p.task_operators().values() for op in ops], device)


def module_seconds(module, arch: str | None = None) -> float:
    """The plans of `module` one after another, each on `arch` (or the GPU its Architecture
    names, else the default GPU)."""
    from devices.hardware import gpu_device, gpu_for_architecture, resolve_gpu

    total = 0.0
    for op in module.ops:
        if isinstance(op, plan.PlanOp):
            device = (gpu_device(arch) if arch else gpu_for_architecture(op.arch_name)
                      or resolve_gpu(None))
            total += plan_seconds(op, device)
    return total
