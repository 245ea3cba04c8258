"""`planc run FILE --inputs IN.npz -o OUT.npz`: a document computed on the user's data.

An ONNX model and an ARK model run on the ARK reference interpreter; an ARK plan runs tile by
tile in ARK's order (the simulator of `planc simulate`), TT plans kernel by kernel on their
work items, and a Gemini layer description on the layer interpreter. Values are named as the
ONNX graph names them: the importer marks graph inputs and outputs (`OnnxName`, which every
plan lowered from the model keeps), so one .npz feeds the model and every plan of it. Tensors
without a name are `t<id>` (their ARK tensor id).

A plan holds no weights: `--weights MODEL.onnx` takes the weights and constants from the ONNX
model it was lowered from (imported again, as when it was lowered; the names it shares with
the plan must be the same tensors). Every tensor the document reads before writing must be
given: planc draws no random values here.
"""

from __future__ import annotations

import io
import re
import zipfile
from argparse import Namespace
from typing import Any

import numpy as np

from ground.diagnostics import PlancError

TENSOR_KEY = re.compile(r"t(\d+)")


def read_npz(path: str) -> dict[str, np.ndarray]:
    """The arrays of an .npz file by name (no pickled objects)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise PlancError("no such file", file=path) from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise PlancError(f"not a readable .npz of arrays: {' '.join(str(e).split())[:160]}",
                         file=path) from None


def npz_bytes(values: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **values)
    return buffer.getvalue()


class Document:
    """A loaded document: how it names tensors and how it runs."""

    def __init__(self, path: str, forced: str | None = None):
        self.path = path
        self.values: dict[int, np.ndarray] = {}
        self.output_order: list[str] = []
        if path.endswith(".onnx"):
            from frontends.onnx import import_model
            from frontends.onnx_model import load

            # a CNN too runs as an ARK model (its Gemini layer graph has no named tensors)
            imported = import_model(load(path), path, wants=("ark-model",))
            self.module = imported.module
            self.format = "onnx"
            self.values = dict(imported.values)
            self.output_order = list(imported.outputs)
        else:
            from compiler.pipeline import load_input

            fmt, self.module = load_input(path, forced)
            self.format = fmt.name
        from frontends.onnx_model import tensor_names

        self.names = tensor_names(self.module)
        self.shapes: dict[int, list[int]] | None = None

    def tensor_id(self, key: str, source: str) -> int:
        if key in self.names:
            return self.names[key]
        match = TENSOR_KEY.fullmatch(key)
        if match:
            return int(match.group(1))
        known = ", ".join(sorted(self.names)) or "none; use t<id>, the ARK tensor id"
        raise PlancError(f"'{key}' names no tensor of {self.path} (its names: {known})",
                         file=source)

    def shaped(self, tensor_id: int, value: np.ndarray) -> np.ndarray:
        """`value` in the shape of the tensor it feeds, where a plan keeps a named input only
        as a reshape of it (the same elements in order); any other shape is left to the run
        to refuse."""
        from dialects import ark

        if self.shapes is None:
            self.shapes = {v.type.tensor_id: v.type.shape_list for op in self.module.walk()
                           for v in op.results if isinstance(v.type, ark.TensorType)}
        shape = self.shapes.get(tensor_id)
        value = np.asarray(value)
        if shape is not None and list(value.shape) != shape and value.size == np.prod(shape):
            return value.reshape(shape)
        return value

    def name_of(self, tensor_id: int) -> str:
        return next((n for n, t in self.names.items() if t == tensor_id), f"t{tensor_id}")


def weights_of(model_path: str, document: Document) -> dict[int, np.ndarray]:
    """The weights and constants of the ONNX model a plan was lowered from, by tensor id."""
    from frontends.onnx_model import tensor_names

    weights = Document(model_path)
    aliases = tensor_names(weights.module, every=True)
    for name, tensor_id in weights.names.items():
        if document.names.get(name, tensor_id) not in aliases[name]:
            raise PlancError(f"'{name}' is tensor {tensor_id} here but tensor "
                             f"{document.names[name]} in {document.path}: the document was "
                             "not lowered from this model", file=model_path)
    return weights.values


def execute(document: Document, given: dict[int, np.ndarray]) -> dict[int, np.ndarray]:
    """The document's outputs on `given`, by tensor id."""
    from dialects import ark, dnn, plan, tt

    root = document.module.ops.first
    if isinstance(root, ark.ModelOp):
        from targets.ark.model_interpreter import run_model

        run = run_model(root, given)
        _all_given(document, run, given)
        wanted = [document.names[n] for n in document.output_order] or run.outputs
        return {tid: run.tensors[tid] for tid in wanted}
    if isinstance(root, plan.PlanOp):
        from targets.ark.plan_simulator import run_plan

        run, outputs = run_plan(root, given)
        _all_given(document, run, given)
        return outputs
    if isinstance(root, tt.PlansOp):
        from targets.tt.simulator import run_plans

        plans = [p for op in document.module.ops if isinstance(op, tt.PlansOp)
                 for p in op.plans()]
        if any(p.kernel is None for p in plans):
            raise PlancError("a plan without a kernel member names no operator to run",
                             file=document.path)
        run, outputs = run_plans(plans, given)
        _all_given(document, run, given)
        return outputs
    if dnn.find_graph(document.module) is not None:
        raise PlancError("planc run computes ARK models and plans and TT plans; a Gemini "
                         "layer graph has no named tensors to feed (planc simulate runs it "
                         "on random inputs)", file=document.path)
    raise PlancError(f"a {document.format} document holds no operators to run (a Gemini "
                     "schedule keeps the order and placement of layers, not the network); run "
                     "the model it was scheduled from", file=document.path)


def _all_given(document: Document, run: Any, given: dict[int, np.ndarray]) -> None:
    """Every tensor read before it was written was given (no value was drawn)."""
    missing = sorted(set(run.inputs) - set(given))
    if missing:
        shown = ", ".join(f"{document.name_of(t)} ({run.types[t].data_type} "
                          f"{run.types[t].shape_list})" for t in missing[:6])
        more = f" and {len(missing) - 6} more" if len(missing) > 6 else ""
        # A document lowered from ONNX names its tensors; another is fed by tensor id.
        hint = "" if document.format == "onnx" else \
            " (weights of a model lowered from ONNX: --weights MODEL.onnx)" if document.names \
            else " (give them in --inputs, named t<id> by tensor id)"
        raise PlancError(f"it reads {len(missing)} tensors that the inputs do not give: "
                         f"{shown}{more}{hint}", file=document.path)


def run_command(options: Namespace) -> dict[str, Any]:
    """`planc run`: read, run, write; returns the summary `--json` prints."""
    from ground.progress import Steps

    # The steps on a terminal's progress line and at `-v` (it printed nothing, even while a
    # plan ran tile by tile for minutes).
    with Steps("run", 2 + bool(options.output)) as steps:
        with steps.step("load"):
            document = Document(options.inputs[0], getattr(options, "source_format", None))
            given = dict(document.values)
            if options.weights:
                given.update(weights_of(options.weights, document))
            named = read_npz(options.input_values) if options.input_values else {}
            for key, value in named.items():
                tensor_id = document.tensor_id(key, options.input_values)
                given[tensor_id] = document.shaped(tensor_id, value)
        with steps.step(f"run the {document.format}"):
            outputs = execute(document, given)
        return _write_outputs(options, document, outputs, steps)


def _write_outputs(options: Namespace, document: Document, outputs: dict[int, np.ndarray],
                   steps: Any) -> dict[str, Any]:
    from compiler.output import write_file_atomic

    named = [t for t in sorted(outputs) if t in document.names.values()]
    # the graph's outputs where the document names them (a TT plan's every kernel result is
    # an output of its own), else every output
    order = [document.names[n] for n in document.output_order if n in document.names] or \
        named or sorted(outputs)
    result = {document.name_of(tid): np.asarray(outputs[tid]) for tid in order
              if tid in outputs}
    if options.output:
        with steps.step("write"):
            write_file_atomic(options.output, npz_bytes(result))
    return {"ok": True, "file": document.path, "format": document.format,
            "outputs": {name: {"shape": list(v.shape), "dtype": str(v.dtype)}
                        for name, v in result.items()}}
