"""`ark-compress`: remove virtual operators, as ARK's `Model::compress()` does.

Virtual `Tensor` operators (declarations, reshapes, slices, identities) compute nothing; ARK
drops their nodes before planning and reconnects consumers to the removed node's producers.
Here each virtual result becomes an `ark.view` of the virtual op's first read (the tensor it
reshapes or slices), waiting for its other reads, so every dependency stays in SSA form.
With `renumber` (the default) node ids become positions 0..n-1, as in a compressed ARK file.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from dialects import ark
from dialects.json_value import dict_attr, dict_value


def remove_virtual_operators(model: ark.ModelOp) -> None:
    for op in model.operators():
        if not op.is_virtual:
            continue
        reads = list(op.read_tensors)
        views = [ark.ViewOp(value.type, reads[0] if reads else None, reads[1:])
                 for value in op.result_tensors]
        for view, value in zip(views, op.result_tensors, strict=True):
            view.result.name_hint = value.name_hint
        Rewriter.replace_op(op, views, [v.result for v in views])


def _renumber_nodes(model: ark.ModelOp) -> None:
    new_id: dict[int, int] = {}
    for op in model.operators():
        if op.node_id is not None:
            new_id.setdefault(op.node_id, len(new_id))
    for op in model.operators():
        if op.node_id is None:
            continue
        op.node = IntegerAttr(new_id[op.node_id], i64)
        if op.node_info is not None:
            info = dict_value(op.node_info)
            for key in ("ProducerNodeIds", "ConsumerNodeIds"):
                if key in info:
                    info[key] = [new_id[n] for n in info[key] if n in new_id]
            op.node_info = dict_attr(info)


@dataclass(frozen=True)
class ArkCompressPass(ModulePass):
    name = "ark-compress"

    renumber: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for model in op.walk():
            if isinstance(model, ark.ModelOp):
                remove_virtual_operators(model)
                if self.renumber:
                    _renumber_nodes(model)
