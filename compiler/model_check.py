"""`planc check PLAN --model MODEL`: the plan computes the outputs of a model given apart.

A plan file carries the model it was planned from (each operator, in its TaskInfo or kernel),
and `planc check` proves the plan's runtime order realises that carried model. Nothing in the
file says the carried model is the one the user meant: an `add` of a split-K chain edited to
a `sub` is a consistent plan of another model. With `--model`, the carried model is compared
with MODEL by the proof every ARK and TT lowering runs before writing
(`targets.ark.equivalence`): canonical expressions of both, in time linear in their
operators (no element, tile or task is enumerated), with split-K's sums of parts normalised
to the matmul they compute. Tensors are matched as ARK names them: each output by its buffer
id and layout, each input by its buffer (an ONNX model imports to the same ids as when the
plan was lowered from it).

Each output that differs is an error finding at the plan's operator where the two
expressions part (`ark-plan.against-model`, `tt.against-model`); an output whose bytes the
plan never writes is named with what the plan computes instead. When none differs, the ok
line says what was compared (`Comparison.summary`). The documents compared are
those that carry ARK operators over the model's buffers (`checking.MODEL_FORMATS`): a Gemini
schedule carries none (its proof against a model runs numbers,
`compiler.validation.prove_model`), and MSCCL++ plans compute no model's operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from dialects.findings import ERROR, Finding, at_op
from ground.diagnostics import PlancError

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

SIDES = ("the model", "the plan")


@dataclass
class Comparison:
    """What `against_model` compared, and found."""

    model: str
    """The model's file, as given."""
    outputs: int
    """The model's outputs (each a final result, by buffer and layout)."""
    communication: int
    """The model's communication operators (what other ranks see)."""
    findings: list[Finding] = field(default_factory=list)
    """An error finding per difference; none when the document computes the model."""

    def summary(self) -> str:
        """What `planc check` adds to its ok line: that the comparison ran, and over what."""
        counted = [_count(self.outputs, "output")] + (
            [_count(self.communication, "communication operator")] if self.communication
            else [])
        return f"equal to {self.model}: {', '.join(counted)}"

    def as_json(self) -> dict[str, Any]:
        return {"file": self.model, "outputs": self.outputs,
                "communication": self.communication}


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'s' * (n != 1)}"


def against_model(document_format: str, module: ModuleOp, model_path: str) -> Comparison:
    """The comparison of a document (imported and checked) with the model in `model_path`
    (an ARK model file, or an ONNX model): no findings when it computes every output of the
    model the same way."""
    from dialects import ark, plan, tt
    from frontends.onnx_model import tensor_names
    from targets.ark.equivalence import differences, snapshot

    model = load_model(model_path)
    before = snapshot([op for op in model.ops if isinstance(op, ark.ModelOp)])
    roots = [op for op in module.ops if isinstance(op, (ark.ModelOp, plan.PlanOp, tt.PlansOp))]
    names = {tensor_id: name for name, tensor_id in tensor_names(model).items()}
    rule = f"{document_format}.against-model"
    found = Comparison(model_path, sum(len(m.outputs) for m in before.models),
                       sum(m.effects.total() for m in before.models))
    for d in differences(before, roots, SIDES, apart=True, names=names):
        found.findings.append(at_op(d.op, rule, ERROR, d.message) if d.op is not None
                              else Finding(rule, ERROR, d.message, "$"))
    return found


def load_model(path: str) -> ModuleOp:
    """The ARK model in `path` (imported and verified); another document is a one-line error
    naming the file."""
    from compiler.pipeline import load_input

    fmt, module = load_input(path, wants=("ark-model",))
    if fmt.name != "ark-model":
        raise PlancError(f"--model takes an ARK model (an ARK model file or an ONNX model), "
                         f"and this is {'an' if fmt.name[0] in 'aeiou' else 'a'} {fmt.name} "
                         "document", file=path)
    return module
