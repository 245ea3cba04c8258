"""A plain roofline of ARK plans, independent of planc's cost model.

planc's cost model (targets/ark/cost_model.py) charges every task a fixed overhead and a memory
latency per operator, and models per-processor bandwidth and warp occupancy; those terms are
assumptions, and a planner tuned against them could win only under them. This model has none:

* A processor group runs after the previous one (the plan's barriers), in time
  max(FLOPs / (peak x share), bytes / bandwidth): `share` is the fraction of the device's
  processors its resource groups use, FLOPs are the matmul FLOPs (2 M N K) at the device's
  matmul rate and element-wise FLOPs (one per output element) at its vector rate, and bytes are
  every distinct tensor the group's operators read or write, once (an ideal cache: a tile
  re-read by several tasks costs nothing extra, and split-K partial sums cost their bytes).
* A task group that runs n of a TaskInfo's N tasks does n / N of its operators' work.
* No per-task, per-operator, latency or barrier term.

`bound` is the model's own lower bound: its FLOPs at the whole device's rate and every model
input, weight and output moved once, so `plan / bound` says how far a plan is from the
hardware whatever planner made it.
"""

from __future__ import annotations

from collections import defaultdict

from devices.hardware import GpuDevice
from dialects import ark, plan

# The FLOPs of an operator are counted once, by the planner's second opinion's rule.
from targets.ark.static_roofline import op_flops


def _bytes(value) -> int:
    return value.type.num_elements * value.type.element_bytes


def tensors_of(op: ark.ArkOp) -> set:
    """The tensor values an operator reads or writes (its results alias what it writes)."""
    reads, writes = op.operand_groups()
    return set(reads) | set(writes)


def group_seconds(p: plan.PlanOp, pg: plan.ProcessorGroupOp, device: GpuDevice) -> float:
    operators = p.task_operators()
    matmul = vector = 0.0
    touched: dict = defaultdict(float)
    processors: set[int] = set()
    for rg in pg.resource_groups():
        processors.update(rg.processors)
        for tg in rg.task_groups():
            share = len(tg.tasks) / p.num_tasks(tg.task)
            for op in operators[tg.task]:
                mm, vec = op_flops(op)
                matmul += share * mm
                vector += share * vec
                for value in tensors_of(op):
                    touched[value] = min(1.0, touched[value] + share)
    dtype = _dtype(operators)
    used = len(processors) / device.processors
    compute = matmul / (device.matmul_rate(dtype) * used) + \
        vector / (device.vector_rate(dtype) * used)
    memory = sum(share * _bytes(v) for v, share in touched.items()) / device.memory_bandwidth
    return max(compute, memory)


def _dtype(operators: dict[int, list[ark.ArkOp]]) -> str:
    for ops in operators.values():
        for op in ops:
            if isinstance(op, ark.MatmulOp):
                return op.inputs[0].data_type
    return "FP32"


def plan_seconds(p: plan.PlanOp, device: GpuDevice) -> float:
    """The plan's time under this roofline: its processor groups one after another."""
    return sum(group_seconds(p, pg, device) for pg in p.processor_groups())


def model_bound(p: plan.PlanOp, device: GpuDevice) -> float:
    """A lower bound for any plan of the same operators on `device`."""
    ops = [op for task_ops in p.task_operators().values() for op in task_ops]
    matmul = sum(op_flops(op)[0] for op in ops)
    vector = sum(op_flops(op)[1] for op in ops)
    written = {v for op in ops for v in (*op.operand_groups()[1], *op.result_tensors)}
    external = {v for op in ops for v in op.operand_groups()[0]} - written
    moved = sum(_bytes(v) for v in external) + sum(_bytes(v) for v in _final(ops, written))
    dtype = _dtype(p.task_operators())
    compute = matmul / device.matmul_rate(dtype) + vector / device.vector_rate(dtype)
    return max(compute, moved / device.memory_bandwidth)


def _final(ops: list[ark.ArkOp], written: set) -> set:
    """Written tensors no operator reads: the model's outputs."""
    read = {v for op in ops for v in op.operand_groups()[0]}
    return written - read
