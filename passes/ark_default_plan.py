"""`ark-default-plan`: ARK's default planner, reproduced exactly (microsoft/ark planner.cpp).

The baseline every planc optimisation is measured against. It turns a compressed `ark.model`
into the `plan.plan` that ARK's `Planner::plan()` writes for a device:

* operators in model order, virtual ones skipped; one TaskInfo per operator, ids 0, 1, 2, ...;
* each operator with its type's default Config for the device's architecture (`default_config`,
  ARK's `ModelOp::default_config(arch)`);
* one ProcessorGroup per TaskInfo holding one ResourceGroup and one TaskGroup: processors
  [0, min(#processors, NumTasks)], warps [0, NumWarps], SRAM [0, SramBytes], all tasks,
  Granularity 1;
* header: NumProcessors and NumWarpsPerProcessor are the largest range ends (at least 1),
  Architecture the device's.

ARK has no Matmul default on CUDA_90 (Hopper); planc uses the sm80 one there, which is what
ARK's own Hopper kernels run (its CUTLASS 2.x path). ARK raises a PlanError when a matmul tile
does not divide M or N; `partial-tiles=true` counts partial edge tiles instead (an extension,
for models ARK's defaults cannot plan).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass

from devices.hardware import GpuDevice, gpu_device
from dialects import ark, plan
from dialects.json_value import dict_attr
from dialects.locations import source_path
from ground.diagnostics import PlancError
from passes.ark_compress import remove_virtual_operators
from passes.ark_to_sched import refuse_oversized


def _shape4(tensor: ark.TensorType) -> list[int]:
    shape = tensor.shape_list
    return [1] * (4 - len(shape)) + shape


def _result(op: ark.ArkOp) -> ark.TensorType:
    return op.results_types[0]


def _tiled(shape4: list[int], tile: list[int]) -> int:
    """Tiles of a 2-D `tile` over the last two dims, times the leading dims."""
    return (shape4[0] * shape4[1] * math.ceil(shape4[2] / tile[0])
            * math.ceil(shape4[3] / tile[1]))


def elementwise_tile(shape4: list[int]) -> list[int]:
    """ARK's default element-wise tile: 64 elements along the longer of the last two dims."""
    return [64, 1] if shape4[2] > shape4[3] else [1, 64]


def _elementwise(op: ark.ArkOp) -> dict[str, Any]:
    shape4 = _shape4(_result(op))
    tile = elementwise_tile(shape4)
    return {"NumWarps": 1, "SramBytes": 0, "Tile": tile, "NumTasks": _tiled(shape4, tile)}


def matmul_problem(op: ark.MatmulOp) -> tuple[int, int, int]:
    """(M, N, K) from the *padded* shapes, as ARK's matmul computes its problem size."""
    a, b = (t.padded_list for t in op.inputs)
    m, k = (a[-1], a[-2]) if op.trans_input else (a[-2], a[-1])
    n = b[-2] if op.trans_other else b[-1]
    return m, n, k


def _matmul(op: ark.MatmulOp, device: GpuDevice, partial_tiles: bool) -> dict[str, Any]:
    dtype = op.outputs[0].data_type
    m, n, _ = matmul_problem(op)
    tm, tn = (256, 128) if m > n else (128, 256)
    kernel = next((k for k in device.matmul_kernels.get(dtype, ())
                   if k.tile[:2] == (tm, tn)), None)
    if kernel is None:
        raise PlancError(f"Matmul '{op.label.data}': ARK has no default {dtype} matmul "
                         f"configuration on {device.architecture} (it has FP32, FP16 and BF16)",
                         path=source_path(op))
    if not partial_tiles and (m % tm or n % tn):
        raise PlancError(
            f"Matmul '{op.label.data}': ARK's default tile {tm}x{tn} does not divide the "
            f"problem M={m}, N={n} (ARK raises a PlanError; use "
            "ark-default-plan{partial-tiles=true} to count partial tiles)", path=source_path(op))
    shape4 = _shape4(_result(op))
    return {"NumWarps": kernel.warps, "SramBytes": kernel.sram,
            "TileShapeMNK": [tm, tn, kernel.tile[2]],
            "NumTasks": shape4[0] * shape4[1] * math.ceil(m / tm) * math.ceil(n / tn)}


def _reduce(op: ark.ReduceOp) -> dict[str, Any]:
    last = op.axis_index == len(op.inputs[0].shape_list) - 1
    return {"NumWarps": 1, "ImplType": "WarpWise" if last else "ElementWise",
            "SramBytes": 256 if last else 0, "NumTasks": _result(op).num_elements}


def _packet(op: ark.ArkOp, device: GpuDevice, tile_width: int) -> dict[str, Any]:
    shape4 = _shape4(_result(op))
    tile = [1, tile_width]
    return {"PacketType": "mscclpp::LL8Packet" if device.is_rocm else "mscclpp::LL16Packet",
            "NumWarps": 1, "SramBytes": 0, "Tile": tile, "NumTasks": _tiled(shape4, tile)}


_FIXED: dict[type[ark.ArkOp], dict[str, Any]] = {
    ark.NoopOp: {"NumWarps": 1, "SramBytes": 0, "NumTasks": 0},
    ark.SendOp: {"ChannelType": "Proxy", "Signal": True, "NumTasks": 1, "NumWarps": 1,
                 "SramBytes": 0},
    ark.SendDoneOp: {"ChannelType": "Proxy", "NumTasks": 1, "NumWarps": 1, "SramBytes": 0},
    ark.DeviceSyncOp: {"ChannelType": "Proxy", "NumTasks": 1, "NumWarps": 1, "SramBytes": 0},
    ark.RecvOp: {"ChannelType": "Proxy", "NumTasks": 1, "NumWarps": 1, "SramBytes": 0,
                 "Wait": True},
}
"""Default Configs that do not depend on shapes."""


def default_config(op: ark.ArkOp, device: GpuDevice,
                   partial_tiles: bool = False) -> dict[str, Any]:
    """ARK's `default_config(arch)` of `op` on `device`, keys in ARK's order."""
    if type(op) in _FIXED:
        return dict(_FIXED[type(op)])
    if isinstance(op, ark.MatmulOp):
        return _matmul(op, device, partial_tiles)
    if isinstance(op, ark.ReduceOp):
        return _reduce(op)
    if isinstance(op, (ark.UnaryOp, ark.BinaryOp, ark.ScalarAssignOp)):
        return _elementwise(op)
    if isinstance(op, ark.TransposeOp):
        shape4 = _shape4(_result(op))
        return {"NumWarps": 1, "SramBytes": 0, "Tile": [8, 8],
                "NumTasks": _tiled(shape4, [8, 8])}
    if isinstance(op, ark.EmbeddingOp):
        shape4 = _shape4(_result(op))
        return {"NumWarps": 1, "SramBytes": 0, "NumTasks": shape4[0] * shape4[1] * shape4[2]}
    if isinstance(op, ark.SendPacketOp):
        return _packet(op, device, 512)
    if isinstance(op, (ark.RecvPacketOp, ark.RecvReduceSendPacketOp)):
        return _packet(op, device, 128)
    if isinstance(op, ark.RecvReduceSendOp):
        shape4 = _shape4(_result(op))
        return {"NumWarps": 1, "SramBytes": 0, "Tile": [1, 128],
                "NumTasks": _tiled(shape4, [1, 128])}
    raise PlancError(f"{op.ark_type} '{op.label.data}': ARK has no default configuration for "
                     f"operator type '{op.ark_type}'", path=source_path(op))


def planned_operator(op: ark.ArkOp, task_id: int, config: dict[str, Any]) -> None:
    """Turn a model operator into a plan operator of TaskInfo `task_id` (in place)."""
    op.task = IntegerAttr(task_id, i64)
    op.config = dict_attr(config)
    for prop in ("node", "node_info"):
        op.properties.pop(prop, None)


def single_task_group(task_id: int, num_tasks: int, processors: int, warps: int,
                      sram: int, granularity: int = 1) -> plan.ProcessorGroupOp:
    """A processor group of one resource group running all tasks of one TaskInfo."""
    procs = plan.range_attr(0, processors)
    group = plan.TaskGroupOp(task_id, plan.range_attr(0, num_tasks), granularity)
    return plan.ProcessorGroupOp(procs, [plan.ResourceGroupOp(
        procs, plan.range_attr(0, warps), plan.range_attr(0, sram), [group])])


def plan_model(model: ark.ModelOp, device: GpuDevice, partial_tiles: bool = False
               ) -> plan.PlanOp:
    """ARK's default plan of `model` (whose operators move into the plan)."""
    remove_virtual_operators(model)
    block = Block()
    groups = []
    task_id = 0
    for op in list(model.graph.ops):
        op.detach()
        if not isinstance(op, ark.ArkOp) or op.is_virtual:
            block.add_op(op)
            continue
        config = default_config(op, device, partial_tiles)
        block.add_op(plan.TaskOp(task_id, config["NumWarps"], config["SramBytes"]))
        planned_operator(op, task_id, config)
        block.add_op(op)
        num_tasks = config["NumTasks"]
        groups.append(single_task_group(
            task_id, num_tasks, min(device.processors, num_tasks), config["NumWarps"],
            config["SramBytes"], config.get("Granularity", 1)))
        task_id += 1
    block.add_ops(groups)
    processors = max([1, *(g.processors.end for g in groups)])
    warps = max([1, *(rg.warps.end for g in groups for rg in g.resource_groups())])
    return plan.PlanOp(model.rank_value, model.world_size_value, processors, warps,
                       Region(block), architecture=device.architecture)


@dataclass(frozen=True)
class ArkDefaultPlanPass(ModulePass):
    """Plan every `ark.model` of the module the way ARK's default planner does."""

    name = "ark-default-plan"

    device: str = "a100"
    partial_tiles: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        device = gpu_device(self.device)
        for model in [m for m in op.ops if isinstance(m, ark.ModelOp)]:
            ark.refuse_unknown_operators(model)
            refuse_oversized(model, device)
            result = plan_model(model, device, self.partial_tiles)
            result.location = model.location
            op.body.block.insert_op_before(result, model)
            model.detach()
            model.erase()
