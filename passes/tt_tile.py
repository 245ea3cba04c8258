"""`tt-tile`: turn every compute operator of an ARK model into a Tenstorrent tile kernel.

The `ark.model` is replaced by a `tt.plans` document holding one `tt.plan` per operator that
computes something, in model order. Each plan starts with its `tt.kernel`: a copy of the
operator (with fresh `ark.view`s for its tensors) and its tile geometry: the output's 32x32
tiles (ragged edges padded up) and len_k, the K tiles each output tile reduces over. Views,
reshapes and no-ops compute nothing and become no kernel; operators with no tile kernel
(communication, embeddings, reductions over batch axes) are an error at their node.

    %y = ark.exp "exp" reads(%x : [300, 100]) ...
    ==>
    tt.plan {schema_version = 1} {
      tt.kernel grid_tiles [10, 4] { %x = ark.view ... ; %y = ark.exp "exp" ... }
    }
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dialects import ark, tt
from dialects.locations import source_path
from dialects.tt_kernels import NO_KERNEL_OPS, NotAKernel, describe_op, kernel_geometry
from ground.diagnostics import PlancError

SCHEMA_VERSION = 1


def kernel_of(op: ark.ArkOp) -> tt.KernelOp:
    """`op` as a self-contained kernel: its tensors become views inside the kernel."""
    try:
        geometry = kernel_geometry(op)
    except NotAKernel as e:
        raise PlancError(f"{describe_op(op)}: {e}", path=source_path(op)) from None
    block = Block()
    views: dict[SSAValue, SSAValue] = {}
    for value in op.operands:
        if value not in views:
            view = ark.ViewOp(value.type)
            view.result.name_hint = value.name_hint
            view.location = op.location
            block.add_op(view)
            views[value] = view.result
    copy = op.clone(value_mapper=dict(views))
    for prop in ("node", "node_info"):
        copy.properties.pop(prop, None)
    block.add_op(copy)
    kernel = tt.KernelOp(geometry.grid_tiles, geometry.len_k, block)
    kernel.location = op.location
    return kernel


def plan_of(op: ark.ArkOp) -> tt.PlanOp:
    plan = tt.PlanOp([kernel_of(op)], schema_version=SCHEMA_VERSION)
    plan.location = op.location
    return plan


def tile_model(model: ark.ModelOp) -> tt.PlansOp:
    plans = [plan_of(op) for op in model.operators() if not isinstance(op, NO_KERNEL_OPS)]
    if not plans:
        raise PlancError("the model has no operator that computes anything, so there is no "
                         "kernel to plan", path=source_path(model))
    return tt.PlansOp(plans)


@dataclass(frozen=True)
class TtTilePass(ModulePass):
    name = "tt-tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for model in [m for m in op.ops if isinstance(m, ark.ModelOp)]:
            ark.refuse_unknown_operators(model)
            Rewriter.replace_op(model, tile_model(model))
