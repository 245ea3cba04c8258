"""dnn-rebatch: run the network on another batch size.

Every feature map that carries samples (network inputs that are not constants, and every
layer output) gets `batch` as its N dimension; constants (weights) keep their shapes. Layer
descriptions are usually exported for batch 1; Gemini schedules the same network for 1..64.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dialects import dnn
from ground.diagnostics import PlancError
from targets.gemini.plan import graph_of


def rebatched(ftype: dnn.FmapType, batch: int) -> dnn.FmapType:
    shape = ftype.shape_list
    return dnn.FmapType.get([batch, *shape[1:]], ftype.dtype_name)


@dataclass(frozen=True)
class DnnRebatchPass(ModulePass):
    """Set the batch (N) of every sample-carrying feature map."""

    name = "dnn-rebatch"

    batch: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if not 1 <= self.batch <= 2**63 - 1:    # the graph records it as i64
            raise PlancError(f"dnn-rebatch: batch must be >= 1 and < 2^63, got {self.batch}")
        graph = graph_of(op, self.name)
        rewriter = Rewriter()
        for node in graph.body.block.ops:
            if isinstance(node, dnn.InputOp) and not node.is_constant or \
                    isinstance(node, dnn.LayerOp):
                ftype = node.output.type
                if len(ftype.shape_list) >= 2 and ftype.shape_list[0] != self.batch:
                    rewriter.replace_value_with_new_type(node.output,
                                                         rebatched(ftype, self.batch))
