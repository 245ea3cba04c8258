"""`lower-ark-comm-to-mscclpp`: the ARK models of all ranks -> one MSCCL++ algorithm.

The module holds one `ark.model` per rank (the driver combines several INPUT files); the pass
replaces them with the `mscclpp.algorithm` their communication needs: the fastest standard
all-reduce when the models compute one, otherwise their sends and receives op by op (see
`targets.mscclpp.lowering`). Options choose the all-reduce instead of the cost model:
`algorithm` (ring, allpairs, oneshot, nvls or auto), `protocol` (Simple or LL), `instances`
(0: let the cost model choose), `hardware` (the cost model's GPU); `recognise=false` lowers
even an all-reduce op by op.

Either way no put reaches a peer before the peer's kernel has started (the op-by-op plan
opens with a signal/wait handshake with each peer it exchanges plain data with), and tensors
of any size are taken: buffers are padded (recorded in `planc_buffers`) to what the executor's
aligned chunks need.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass

from dialects import ark
from ground.diagnostics import PlancError
from targets.mscclpp.lowering import Choice, lower_models


@dataclass(frozen=True)
class LowerArkCommToMscclppPass(ModulePass):
    name = "lower-ark-comm-to-mscclpp"

    algorithm: str = "auto"
    protocol: str = ""
    instances: int = 0
    hardware: str = "h100"
    recognise: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [m for m in op.ops if isinstance(m, ark.ModelOp)]
        if not models:
            raise PlancError("lower-ark-comm-to-mscclpp needs ark.model ops (one per rank)")
        files = []
        for model in models:
            ark.refuse_unknown_operators(model)
            file = model.attributes.get("planc.file")
            files.append(file.data if isinstance(file, StringAttr) else None)
        choice = Choice(self.algorithm, self.protocol or None, self.instances or None,
                        self.hardware, self.recognise)
        lowered = lower_models(models, files, choice)
        for model in models:
            model.detach()
            model.erase()
        op.body.block.add_op(lowered.algorithm)
