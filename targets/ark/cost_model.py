"""A roofline cost model of ARK plans on a GPU (a `GpuDevice`).

The unit of work is a task: one task index of a TaskInfo, i.e. one output tile of each of its
operators, run by one slot (a group of warps) of one processor. For every task it counts

* matmul FLOPs (tensor cores) and vector FLOPs (element-wise math, computed in float);
* bytes moved between the processor and L2 (every global load and store of the tile);
* bytes moved between L2 and device memory: stores, loads of tensors the task did not just
  write itself (fused operators read their predecessor's tile from cache), and for operands
  every task shares (matmul inputs, broadcast inputs) their size divided among the tasks.

A task on a slot takes `task_overhead + n_ops * memory_latency` (each operator waits for its
first loads; ARK runs tasks one after another without prefetching across them) plus the
longest of its compute and L2 streaming times at the rate its warps can draw. A processor runs
its slots concurrently but shares its rates among them: 1 / #processors of the device's
compute, and of its L2 and memory bandwidth a share among the processors busy at the time, up
to what one processor can move (`processor_bandwidth`). How much of that a processor reaches
grows with its active warps (`warps_to_saturate_*`). So a processor's time for a task group is
the larger of its slowest slot's serial time and its total work at the processor's rates.

`plan_cost` runs processor groups in plan order on per-processor clocks: a processor group first
waits at the barriers `plan.barriers` places (all processors of a synchronised range wait for
the slowest, plus `barrier_s`), then each processor runs its resource groups' task groups in
order. Concurrent groups on disjoint processors overlap. The modeled time is the last clock.

The same per-tile formulas (`op_work`) serve the tiling pass, which asks what a candidate
configuration would cost before any plan exists (`kernel_estimate`). That asks about one task
(task 0), so it runs them in plain Python floats and ints (`first_task_work`), with numpy's
operation order and number types, so that compiling neither imports numpy (~0.07 s) nor pays
its per-call cost on 1-element arrays; `tests/test_cost_model_scalar.py` checks the two agree
bit for bit. numpy is imported by the functions that use it (the simulator's path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xdsl.ir import SSAValue

from devices.hardware import GpuDevice
from dialects import ark, plan

if TYPE_CHECKING:
    import numpy as np

VECTOR_FLOPS_PER_ELEMENT: dict[type[ark.ArkOp], float] = {
    ark.ExpOp: 4, ark.SigmoidOp: 5, ark.GeluOp: 8, ark.RsqrtOp: 4, ark.SqrtOp: 4,
    ark.DivOp: 4, ark.RopeOp: 3,
}
"""FLOPs per output element beyond the default 1 (special functions cost several)."""


@dataclass
class Work:
    """What a set of tasks does, one entry per task."""

    matmul_flops: np.ndarray
    vector_flops: np.ndarray
    l2_bytes: np.ndarray
    dram_bytes: np.ndarray

    @staticmethod
    def zeros(n: int) -> Work:
        import numpy as np

        return Work(*(np.zeros(n) for _ in range(4)))

    def add(self, other: Work) -> None:
        self.matmul_flops += other.matmul_flops
        self.vector_flops += other.vector_flops
        self.l2_bytes += other.l2_bytes
        self.dram_bytes += other.dram_bytes


def _pad4(shape: Sequence[int]) -> list[int]:
    return [1] * (4 - len(shape)) + list(shape)


def tile_extents(shape: Sequence[int], unit: Sequence[int], indices: np.ndarray) -> np.ndarray:
    """Extents (n x 4) of the output tiles `indices` of a `shape` cut into `unit` tiles,
    clipped at the edges (task indices run row-major over the tiles, as `plan.task_tile`)."""
    import numpy as np

    shape4, unit4 = np.array(_pad4(shape)), np.array(unit)
    counts = -(-shape4 // unit4)
    coords = np.stack(np.unravel_index(indices, counts), axis=1)
    return np.minimum(unit4, shape4 - coords * unit4)


def tile_count(shape: Sequence[int], unit: Sequence[int]) -> int:
    return math.prod(math.ceil(s / u) for s, u in zip(_pad4(shape), unit, strict=True))


def _region(input_shape: Sequence[int], out4: Sequence[int], ext: np.ndarray) -> np.ndarray:
    """Elements of a (broadcast) input that output tiles of extents `ext` read."""
    import numpy as np

    in4 = _pad4(input_shape)
    cols = [ext[:, d] if in4[d] == out4[d] else np.ones(len(ext)) for d in range(4)]
    return np.prod(np.stack(cols, axis=1), axis=1)


def op_work(op: ark.ArkOp, config: dict, indices: np.ndarray, local: set[SSAValue],
            total_tasks: int) -> Work:
    """The work of `op`'s tiles `indices` under `config`; `local` are the values an earlier
    operator of the same task wrote (read from cache, not device memory)."""
    import numpy as np

    n = len(indices)
    work = Work.zeros(n)
    if isinstance(op, (ark.NoopOp, ark.TensorOp, ark.ReshapeOp)) or not op.outputs:
        return work
    out = op.outputs[0]
    out4 = _pad4(plan.output_shape(op))
    ext = tile_extents(out4, plan.unit_shape(op, config), indices)
    elems = np.prod(ext, axis=1).astype(float)
    work.l2_bytes += elems * out.element_bytes
    work.dram_bytes += elems * out.element_bytes
    if isinstance(op, ark.MatmulOp):
        _matmul_work(op, ext, work, total_tasks)
        return work
    if isinstance(op, ark.ReduceOp):
        axis_len = op.inputs[0].shape_list[op.axis_index]
        read = elems * axis_len
        _read(work, op.read_tensors[0], read, local)
        work.vector_flops += read
        return work
    if isinstance(op, ark.EmbeddingOp):
        indices_t, weight = op.read_tensors
        _read(work, weight, elems, local)
        _read(work, indices_t, np.ones(n), local)
        return work
    if isinstance(op, ark.TransposeOp):
        _read(work, op.read_tensors[0], elems, local)
        return work
    for value in op.operand_groups()[0]:
        region = _region(value.type.shape_list, out4, ext)
        if np.all(region < elems) and region.size:
            # A broadcast operand: every task rereads it from cache.
            work.l2_bytes += region * value.type.element_bytes
            work.dram_bytes += value.type.num_elements * value.type.element_bytes / total_tasks
        else:
            _read(work, value, region, local)
    work.vector_flops += elems * VECTOR_FLOPS_PER_ELEMENT.get(type(op), 1)
    return work


def _read(work: Work, value: SSAValue, elems: np.ndarray, local: set[SSAValue]) -> None:
    nbytes = elems * value.type.element_bytes
    work.l2_bytes += nbytes
    if value not in local:
        work.dram_bytes += nbytes


def _matmul_work(op: ark.MatmulOp, ext: np.ndarray, work: Work, total_tasks: int) -> None:
    _, _, k = op.problem_mnk()
    a, b = op.inputs
    batch = ext[:, 0] * ext[:, 1]
    rows, cols = ext[:, 2], ext[:, 3]
    work.matmul_flops += 2.0 * batch * rows * cols * k
    work.l2_bytes += batch * k * (rows * a.element_bytes + cols * b.element_bytes)
    operands = a.num_elements * a.element_bytes + b.num_elements * b.element_bytes
    work.dram_bytes += operands / total_tasks


def task_work(ops: Sequence[ark.ArkOp], configs: Sequence[dict], indices: np.ndarray,
              total_tasks: int) -> Work:
    """The work of task `indices` of a task made of `ops` (run in order per task)."""
    work = Work.zeros(len(indices))
    local: set[SSAValue] = set()
    for op, config in zip(ops, configs, strict=True):
        work.add(op_work(op, config, indices, local, total_tasks))
        local.update(op.result_tensors)
        local.update(op.operand_groups()[1])
    return work


# ---------------------------------------------------------------------------------------------
# Time
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rates:
    """Per-processor throughputs of a device (its totals divided among processors)."""

    matmul: float
    vector: float
    l2: float
    dram: float

    @staticmethod
    def of(device: GpuDevice, dtype: str, active: int | None = None) -> Rates:
        """Rates of one processor while `active` processors (all, by default) are busy: each
        has its own compute, and a share of the bandwidths up to what one processor moves."""
        p = device.processors
        share = max(1, min(active or p, p))
        return Rates(device.matmul_rate(dtype) / p, device.vector_rate("FP32") / p,
                     min(device.l2_bandwidth / share, device.processor_bandwidth),
                     min(device.memory_bandwidth / share, device.processor_bandwidth))


def _saturation(warps: np.ndarray | float, full: int) -> np.ndarray | float:
    import numpy as np

    return np.minimum(1.0, np.asarray(warps, dtype=float) / full)


def task_seconds(work: Work, n_ops: int, slot_warps: int, rates: Rates,
                 device: GpuDevice) -> np.ndarray:
    """Serial time of each task on one slot of `slot_warps` warps."""
    import numpy as np

    compute = _saturation(slot_warps, device.warps_to_saturate_compute)
    memory = _saturation(slot_warps, device.warps_to_saturate_memory)
    busy = np.maximum.reduce([
        work.matmul_flops / (rates.matmul * compute),
        work.vector_flops / (rates.vector * compute),
        work.l2_bytes / (rates.l2 * memory),
        work.dram_bytes / (rates.dram * memory),
    ])
    return device.task_overhead_s + n_ops * device.memory_latency_s + busy


def processor_seconds(work: Work, serial: np.ndarray, processors: np.ndarray,
                      slots: np.ndarray, num_slots: int, slot_warps: int, rates: Rates,
                      device: GpuDevice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(processor ids, time, active warps) of a task group's processors: the slowest slot's
    serial time or the processor's total work at its shared rates, whichever is longer."""
    import numpy as np

    ids, where = np.unique(processors, return_inverse=True)
    per_slot = np.zeros((len(ids), max(num_slots, 1)))
    np.add.at(per_slot, (where, slots), serial)
    counts = np.bincount(where, minlength=len(ids))
    warps = np.minimum(counts, num_slots) * slot_warps
    compute = _saturation(warps, device.warps_to_saturate_compute)
    memory = _saturation(warps, device.warps_to_saturate_memory)

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(where, weights=values, minlength=len(ids))

    time = np.maximum.reduce([
        per_slot.max(axis=1),
        total(work.matmul_flops) / (rates.matmul * compute),
        total(work.vector_flops) / (rates.vector * compute),
        total(work.l2_bytes) / (rates.l2 * memory),
        total(work.dram_bytes) / (rates.dram * memory),
    ])
    return ids, time, warps


def kernel_dtype(ops: Sequence[ark.ArkOp]) -> str:
    """The data type that sets a task's matmul rate (its first matmul's, else its first op's)."""
    for op in ops:
        if isinstance(op, ark.MatmulOp):
            return op.outputs[0].data_type
    for op in ops:
        if op.outputs:
            return op.outputs[0].data_type
    return "FP32"


@dataclass(frozen=True)
class KernelEstimate:
    """What the tasks of one kernel cost when they have `processors` processors to
    themselves, every task costing a full tile (planners compare candidates with it; the
    simulator uses the exact per-task model)."""

    tasks: int
    slots: int
    slot_warps: int
    n_ops: int
    work: tuple[float, float, float, float]
    """One task's matmul FLOPs, vector FLOPs, L2 bytes and memory bytes."""
    dtype: str
    device: GpuDevice

    def serial(self, active: int) -> float:
        """One task's time on one slot while `active` processors are busy (`task_seconds`
        for one task)."""
        device = self.device
        rates = Rates.of(device, self.dtype, active)
        compute = min(1.0, self.slot_warps / device.warps_to_saturate_compute)
        memory = min(1.0, self.slot_warps / device.warps_to_saturate_memory)
        matmul, vector, l2, dram = self.work
        return self.fixed_seconds + max(matmul / (rates.matmul * compute),
                                        vector / (rates.vector * compute),
                                        l2 / (rates.l2 * memory), dram / (rates.dram * memory))

    @property
    def fixed_seconds(self) -> float:
        """The part of a task's time that does not grow with its work."""
        return self.device.task_overhead_s + self.n_ops * self.device.memory_latency_s

    @property
    def task_seconds(self) -> float:
        return self.serial(self.device.processors)

    def on(self, processors: int, busy: int | None = None) -> float:
        """Modeled seconds of all tasks spread round-robin over `processors` processors, while
        `busy` processors of the device (these and those of concurrent kernels; by default only
        these) share its bandwidth."""
        if self.tasks == 0:
            return 0.0
        active = max(1, min(processors, self.tasks))
        sharing = max(active, busy or 0)
        per_proc = math.ceil(self.tasks / active)
        per_slot = math.ceil(per_proc / max(self.slots, 1))
        warps = min(per_proc, self.slots) * self.slot_warps
        compute = saturation(warps, self.device.warps_to_saturate_compute)
        memory = saturation(warps, self.device.warps_to_saturate_memory)
        rates = Rates.of(self.device, self.dtype, sharing)
        matmul, vector, l2, dram = self.work
        throughput = per_proc * max(matmul / (rates.matmul * compute),
                                    vector / (rates.vector * compute),
                                    l2 / (rates.l2 * memory), dram / (rates.dram * memory))
        return max(per_slot * self.serial(sharing), throughput)

    @property
    def seconds(self) -> float:
        return self.on(self.device.processors)

    def scaled(self, fraction: float) -> KernelEstimate:
        """The same tasks doing `fraction` of the work each (e.g. part of a matmul's K)."""
        return KernelEstimate(self.tasks, self.slots, self.slot_warps, self.n_ops,
                              tuple(w * fraction for w in self.work), self.dtype, self.device)


def kernel_estimate(ops: Sequence[ark.ArkOp], configs: Sequence[dict], num_tasks: int,
                    slot_warps: int, num_slots: int, device: GpuDevice,
                    memo: dict | None = None) -> KernelEstimate:
    """The cost of a kernel's `num_tasks` tasks with `num_slots` slots per processor.

    `memo` (optional, one per list of `ops`): task 0's work by the configs' tile shapes and
    the task count, all it depends on (`plan.unit_shape` reads nothing else of a config), so
    candidates differing only in warps or shared memory (a planner tries up to four warp
    counts per tile) compute it once."""
    total_tasks = max(num_tasks, 1)
    if memo is None:
        totals = _first_task_totals(ops, configs, total_tasks)
    else:
        key = (total_tasks, *map(_tile_key, configs))
        totals = memo.get(key)
        if totals is None:
            totals = memo[key] = _first_task_totals(ops, configs, total_tasks)
    return KernelEstimate(num_tasks, num_slots, slot_warps, len(ops), totals,
                          kernel_dtype(ops), device)


def _tile_key(config: dict) -> tuple:
    """What `plan.unit_shape` reads of `config`: TileShapeMNK's M and N, and Tile, with the
    types of their values (1 and 1.0 are equal keys but not the same numbers)."""
    mnk = config.get("TileShapeMNK")
    tile = config.get("Tile", _NO_TILE)
    return (None if mnk is None else tuple(mnk[:2]),
            None if mnk is None else tuple(map(type, mnk[:2])),
            tile if tile is _NO_TILE else tuple(tile),
            tile if tile is _NO_TILE else tuple(map(type, tile)))


_NO_TILE = ("no Tile",)


def _first_task_totals(ops: Sequence[ark.ArkOp], configs: Sequence[dict],
                       total_tasks: int) -> tuple[float, float, float, float]:
    try:
        return first_task_work(ops, configs, total_tasks)
    except _NumpyOnly:
        return first_task_work_numpy(ops, configs, total_tasks)


def first_task_work_numpy(ops: Sequence[ark.ArkOp], configs: Sequence[dict],
                          total_tasks: int) -> tuple[float, float, float, float]:
    """Task 0's (matmul FLOPs, vector FLOPs, L2 bytes, memory bytes) by `task_work`."""
    import numpy as np

    work = task_work(ops, configs, np.zeros(1, dtype=np.int64), total_tasks)
    return (float(work.matmul_flops[0]), float(work.vector_flops[0]),
            float(work.l2_bytes[0]), float(work.dram_bytes[0]))


# ---------------------------------------------------------------------------------------------
# Task 0 in plain Python numbers
# ---------------------------------------------------------------------------------------------
#
# `first_task_work` is `first_task_work_numpy` without numpy: every value is computed with the
# operations, in the order and in the number type (int64 or float64) numpy uses for a
# 1-element task. Where an int64 would overflow (numpy wraps), a tile count exceeds what
# `np.unravel_index` accepts, a shape or tile is not positive ints of 4 dims, or a float
# product's order could matter, it raises `_NumpyOnly` and `kernel_estimate` asks numpy
# instead (which then also raises whatever numpy raised before).

_INT64 = 1 << 63
_EXACT = 1 << 53
"""Integers below this are exact doubles (so products of them below it do not depend on order)."""


class _NumpyOnly(Exception):
    """The plain-Python path cannot promise numpy's result here."""


def _i64(value: int) -> int:
    """`value` as numpy's int64 arithmetic leaves it (which it does only inside the range)."""
    if -_INT64 <= value < _INT64:
        return value
    raise _NumpyOnly


def saturation(warps: int, full: int) -> float:
    """`float(_saturation(warps, full))` for a number of warps: np.minimum keeps a NaN."""
    if not full:
        return float(_saturation(warps, full))   # numpy's inf/nan and its warning
    share = float(warps) / full
    return 1.0 if share >= 1.0 else share


def _first_tile(shape4: Sequence[int], unit: Sequence[int]) -> list[int]:
    """`tile_extents(shape4, unit, [0])[0]`: tile 0 starts at the origin, so its extents are
    the unit clipped to the shape."""
    if len(shape4) != 4 or len(unit) != 4:
        raise _NumpyOnly
    tiles = 1
    for s, u in zip(shape4, unit, strict=True):
        if type(s) is not int or type(u) is not int or not (0 < s < _INT64 and 0 < u < _INT64):
            raise _NumpyOnly
        tiles *= -(-s // u)
    if tiles >= _INT64:
        raise _NumpyOnly      # np.unravel_index refuses dimensions this large
    return [min(u, s) for s, u in zip(shape4, unit, strict=True)]


def _first_region(input_shape: Sequence[int], out4: Sequence[int],
                  ext: list[int]) -> int | float:
    """`_region(...)[0]`: an int64 where no dimension broadcasts (numpy stacks ints), else a
    float64 (the stack holds np.ones)."""
    in4 = _pad4(input_shape)
    kept = [in4[d] == out4[d] for d in range(4)]
    exact = math.prod(e for e, keep in zip(ext, kept, strict=True) if keep)
    if all(kept):
        return _i64(exact)
    if exact >= _EXACT:
        raise _NumpyOnly
    return float(exact)


def _read_bytes(elems: int | float, value: SSAValue) -> float:
    """`_read`'s bytes: elems x element size, in int64 for an int64 count."""
    if type(elems) is int:
        return float(_i64(elems * value.type.element_bytes))
    return elems * value.type.element_bytes


def _op_first_work(op: ark.ArkOp, config: dict, local: set[SSAValue],
                   total_tasks: int) -> list[float]:
    """`op_work(op, config, [0], local, total_tasks)` as [matmul, vector, l2, dram]."""
    work = [0.0, 0.0, 0.0, 0.0]
    if isinstance(op, (ark.NoopOp, ark.TensorOp, ark.ReshapeOp)) or not op.outputs:
        return work
    out = op.outputs[0]
    out4 = _pad4(plan.output_shape(op))
    ext = _first_tile(_pad4(out4), plan.unit_shape(op, config))
    elems = float(_i64(math.prod(ext)))
    work[2] += elems * out.element_bytes
    work[3] += elems * out.element_bytes

    def read(value: SSAValue, count: int | float) -> None:
        nbytes = _read_bytes(count, value)
        work[2] += nbytes
        if value not in local:
            work[3] += nbytes

    if isinstance(op, ark.MatmulOp):
        _, _, k = op.problem_mnk()
        a, b = op.inputs
        batch = _i64(ext[0] * ext[1])
        rows, cols = ext[2], ext[3]
        work[0] += 2.0 * batch * rows * cols * k
        per_k = _i64(_i64(rows * a.element_bytes) + _i64(cols * b.element_bytes))
        work[2] += float(_i64(_i64(batch * _i64(k)) * per_k))
        operands = a.num_elements * a.element_bytes + b.num_elements * b.element_bytes
        work[3] += operands / total_tasks
        return work
    if isinstance(op, ark.ReduceOp):
        axis_len = op.inputs[0].shape_list[op.axis_index]
        count = elems * axis_len
        read(op.read_tensors[0], count)
        work[1] += count
        return work
    if isinstance(op, ark.EmbeddingOp):
        indices_t, weight = op.read_tensors
        read(weight, elems)
        read(indices_t, 1.0)
        return work
    if isinstance(op, ark.TransposeOp):
        read(op.read_tensors[0], elems)
        return work
    for value in op.operand_groups()[0]:
        region = _first_region(value.type.shape_list, out4, ext)
        if float(region) < elems:      # numpy compares an int64 with a float64 as doubles
            work[2] += _read_bytes(region, value)
            work[3] += value.type.num_elements * value.type.element_bytes / total_tasks
        else:
            read(value, region)
    work[1] += elems * VECTOR_FLOPS_PER_ELEMENT.get(type(op), 1)
    return work


def first_task_work(ops: Sequence[ark.ArkOp], configs: Sequence[dict],
                    total_tasks: int) -> tuple[float, float, float, float]:
    """`first_task_work_numpy` in plain Python numbers (raises `_NumpyOnly` where it cannot
    promise the same bits)."""
    totals = [0.0, 0.0, 0.0, 0.0]
    local: set[SSAValue] = set()
    for op, config in zip(ops, configs, strict=True):
        work = _op_first_work(op, config, local, total_tasks)
        for i in range(4):
            totals[i] += work[i]
        local.update(op.result_tensors)
        local.update(op.operand_groups()[1])
    return (totals[0], totals[1], totals[2], totals[3])


# ---------------------------------------------------------------------------------------------
# Whole plans
# ---------------------------------------------------------------------------------------------


@dataclass
class TaskGroupCost:
    task: int
    processor_group: int
    seconds: float
    """From the first processor starting it to the last finishing it."""
    tasks: int


@dataclass
class Span:
    """When the processors running one task group do so (for timelines and traces)."""

    task: int
    processor_group: int
    processors: np.ndarray
    start_s: np.ndarray
    """Per processor of `processors`: when it starts its share of the task group."""
    seconds: np.ndarray
    """Per processor: how long its share takes."""


@dataclass
class PlanCost:
    modeled_time_s: float
    busy_s: np.ndarray
    """Per processor: time spent running tasks."""
    warp_seconds: float
    """Sum over task groups of active warps x time."""
    barriers: int
    barrier_wait_s: float
    task_groups: list[TaskGroupCost] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)

    def summary(self, processors: int, warps_per_processor: int) -> dict:
        import numpy as np

        total = self.modeled_time_s
        utilisation = self.busy_s / total if total > 0 else np.zeros_like(self.busy_s)
        occupancy = (self.warp_seconds / (processors * warps_per_processor * total)
                     if total > 0 else 0.0)
        slowest = sorted(self.task_groups, key=lambda t: -t.seconds)[:5]
        return {
            "modeled_time_s": total,
            "processor_utilisation": float(utilisation.mean()) if len(utilisation) else 0.0,
            "per_processor_utilisation": [round(float(u), 4) for u in utilisation],
            "warp_occupancy": float(occupancy),
            "barriers": self.barriers,
            "barrier_wait_s": self.barrier_wait_s,
            "slowest_task_groups": [
                {"task": t.task, "processor_group": t.processor_group, "tasks": t.tasks,
                 "seconds": t.seconds} for t in slowest],
        }


def refuse_impossible_grid(p: plan.PlanOp) -> None:
    """A plan of more processors than any GPU has cannot run (ARK's persistent kernel needs
    every block resident, see `PlanOp._too_many_processors`), and the models keep arrays
    per processor (NumProcessors 2^40 was a MemoryError). The verifier says so for a known
    Architecture; this covers plans naming none."""
    from devices.hardware import most_processors
    from ground.diagnostics import PlancError

    most = most_processors()
    if p.processor_count > most:
        raise PlancError(f"NumProcessors {p.processor_count} exceeds the {most} processors of "
                         "the largest GPU planc models; ARK's persistent kernel needs all of "
                         "its blocks resident at once", path="$.NumProcessors")


def plan_cost(p: plan.PlanOp, device: GpuDevice) -> PlanCost:
    """The modeled execution of plan `p` on `device` (see the module docstring)."""
    import numpy as np

    refuse_impossible_grid(p)
    plan.refuse_too_many_tasks(p, "the cost model")
    nproc = p.processor_count
    clock = np.zeros(nproc)
    busy = np.zeros(nproc)
    tasks = p.tasks()
    operators = p.task_operators()
    configs = {t: [op.config_value() for op in ops] for t, ops in operators.items()}
    cost = PlanCost(0.0, busy, 0.0, 0, 0.0)
    groups = p.processor_groups()
    for index, (pg, syncs) in enumerate(zip(groups, plan.barriers(groups), strict=True)):
        assignments = [(tg, layout, assignment) for rg in pg.resource_groups()
                       for tg, layout, assignment in plan.resource_group_assignments(rg, tasks)
                       if len(assignment.tasks) and operators.get(tg.task)]
        busy_processors = len(set().union(*(np.unique(a.processors).tolist()
                                            for _, _, a in assignments)))
        for sync in syncs:
            members = np.fromiter(sync, dtype=np.int64)
            start = clock[members].max() + device.barrier_s
            cost.barrier_wait_s += float(np.sum(start - clock[members]))
            clock[members] = start
            cost.barriers += 1
        for tg, layout, assignment in assignments:
            ops = operators[tg.task]
            work = task_work(ops, configs[tg.task], assignment.tasks, p.num_tasks(tg.task))
            rates = Rates.of(device, kernel_dtype(ops), busy_processors)
            serial = task_seconds(work, len(ops), layout.slot_warps, rates, device)
            ids, seconds, warps = processor_seconds(
                work, serial, assignment.processors, assignment.slots, layout.num_slots,
                layout.slot_warps, rates, device)
            start = clock[ids].min()
            cost.spans.append(Span(tg.task, index, ids, clock[ids], seconds))
            clock[ids] += seconds
            busy[ids] += seconds
            cost.warp_seconds += float(np.sum(seconds * warps))
            cost.task_groups.append(TaskGroupCost(
                tg.task, index, float(clock[ids].max() - start), len(assignment.tasks)))
    cost.modeled_time_s = float(clock.max()) if nproc else 0.0
    return cost
