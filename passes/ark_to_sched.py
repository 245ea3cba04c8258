"""`ark-to-sched`: start a schedule from a model, one kernel per operator.

The model's block moves into a `sched.schedule` for device `device`; virtual operators are
removed first (as `ark-compress` does), and every other operator becomes the only operator of
a new `sched.kernel`, numbered in model order, whose kind follows the operator's type. Later
passes fuse, tile, partition and place these kernels.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from devices.hardware import gpu_device
from dialects import ark, sched
from dialects.locations import source_path
from dialects.utils import op_list
from ground.diagnostics import PlancError
from passes.ark_compress import remove_virtual_operators
from passes.sched_graph import is_a, op_kind
from targets.ark.tensor_layouts import layout_of


def schedule_model(model: ark.ModelOp, device: str, kernels: bool = True,
                   operators: list[ark.ArkOp] | None = None
                   ) -> tuple[sched.ScheduleOp, list[ark.ArkOp]]:
    """The schedule of `model`, and its operators in block order (`operators`: the model's,
    when known); without `kernels`, its operators belong to no kernel yet (`ark-plan` fuses
    them next, which replaces the one-operator kernels anyway)."""
    block = model.graph
    if operators is None:
        operators = [op for op in op_list(block) if is_a(type(op), ark.ArkOp)]
    if any(_virtual(op) for op in operators):
        remove_virtual_operators(model)
        operators = [op for op in op_list(block) if is_a(type(op), ark.ArkOp)]
    kernel = 0
    for op in operators:
        if kernels:
            block.insert_op_before(sched.KernelOp(kernel, op_kind(op)), op)
            op.task = sched.int_attr(kernel)
        properties = op.properties
        properties.pop("node", None)
        properties.pop("node_info", None)
        kernel += 1
    body = model.detach_region(model.body)
    schedule = sched.ScheduleOp(model.rank_value, model.world_size_value, device, body)
    return schedule, operators


def _virtual(op: ark.ArkOp) -> bool:
    """`op.is_virtual`, asked only of operators that may be (a class virtual by default, or
    a `virtual` property): the property costs more than the test."""
    return (type(op).IS_VIRTUAL or "virtual" in op.properties) and op.is_virtual


def refuse_oversized(model: ark.ModelOp, device) -> list[ark.ArkOp]:
    """A tensor larger than the device's memory cannot be placed: an error naming it, before
    any planning (whose work grows with the tensors' tiles). The model's operators, in block
    order (found on the way)."""
    limit = device.memory_bytes
    operators = []
    arkop, tensor_type = ark.ArkOp, ark.TensorType
    for op in op_list(model.graph):
        if is_a(type(op), arkop):
            operators.append(op)
        for value in op.results:
            tensor = value.type
            if type(tensor) is tensor_type and (tensor.__dict__.get("_planc_pass_layout")
                                                or layout_of(tensor)).span_bytes > limit:
                raise PlancError(f"tensor {tensor.tensor_id} {tensor.shape_list} "
                                 f"{tensor.data_type} holds {tensor.span_bytes / 1e9:.3g} GB, "
                                 f"more than the {device.memory_bytes / 1e9:.3g} GB of memory "
                                 f"of {device.name}", path=source_path(op))
    return operators


@dataclass(frozen=True)
class ArkToSchedPass(ModulePass):
    name = "ark-to-sched"

    device: str = "a100"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        to_schedules(op, self.device)


def to_schedules(module: ModuleOp, device_name: str,
                 kernels: bool = True) -> list[sched.ScheduleOp]:
    """Replace each model of `module` by its schedule (see `schedule_model`); the new
    schedules."""
    return [schedule for schedule, _ in schedules_and_operators(module, device_name, kernels)]


def schedules_and_operators(module: ModuleOp, device_name: str, kernels: bool = True
                            ) -> list[tuple[sched.ScheduleOp, list[ark.ArkOp]]]:
    """`to_schedules`, each new schedule with its operators in block order."""
    device = gpu_device(device_name)  # unknown devices fail here, before any rewriting
    made = []
    for model in [m for m in module.ops if isinstance(m, ark.ModelOp)]:
        ark.refuse_unknown_operators(model)
        operators = refuse_oversized(model, device)
        schedule, operators = schedule_model(model, device_name, kernels, operators)
        schedule.location = model.location
        module.body.block.insert_op_before(schedule, model)
        model.detach()
        model.erase()
        made.append((schedule, operators))
    return made
