"""Prove a Gemini schedule of an ARK model computes what the model computes.

Two independent steps, each a comparison of two interpreters on the same numbers:

1. the `dnn` graph that `dnn-from-ark` made equals the ARK model: `targets.ark.model_interpreter`
   runs the model (once per sample of the batch, the weights shared), the same inputs go into
   `targets.gemini.dnn_interpreter` laid out as feature maps, and every network output is compared
   with the ARK tensor it records (`ark.tensor`);
2. the schedule equals the graph: `planc simulate` (`targets.gemini.simulator`) runs every
   workload on exactly the blocks its transfers deliver.

`compiler.validation.prove_model` does both for a model and the scheduling options, after
lowering it with the driver's pipeline; tests and the generated-model tool use it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dialects import ark, dnn
from targets.ark.model_interpreter import ModelRun, run_model
from targets.gemini.dnn_interpreter import run_graph

TOLERANCE = {"FP32": 1e-4, "INT32": 0.0, "UINT32": 0.0}
"""Largest relative difference accepted per ARK data type (fp16/bf16: the model rounds every
result to 16 bits, the layer graph computes in float64)."""
DEFAULT_TOLERANCE = 3e-2


@dataclass
class Proof:
    ok: bool
    graph_error: float
    """Largest difference, relative to the output's magnitude, between graph and model."""
    tiles_ok: bool | None
    """The schedule's tile-by-tile check (None when not scheduled)."""
    problem: str | None = None


def as_fmap(values: np.ndarray) -> np.ndarray:
    """An ARK row-major array [..., rows, columns] as the feature map [N, C, H, 1]."""
    shape = [1] * (2 - values.ndim) + list(values.shape)
    lead = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return values.reshape(lead, shape[-2], shape[-1]).transpose(0, 2, 1)[..., None]


def _tensor_of(op) -> int | None:
    attr = op.attributes.get("ark.tensor")
    return None if attr is None else attr.value.data


def run_samples(model: ark.ModelOp, graph: dnn.GraphOp, batch: int, seed: int,
                ) -> list[ModelRun]:
    """The model run once per sample; weights (the graph's constants) are the same in all."""
    first = run_model(model, seed=seed)
    shared = {}
    for op in graph.inputs:
        tid = _tensor_of(op)
        if op.is_constant and tid is not None and tid in first.inputs:
            shared[tid] = first.inputs[tid]
    return [first] + [run_model(model, dict(shared), seed=seed + b) for b in range(1, batch)]


def graph_inputs(graph: dnn.GraphOp, runs: list[ModelRun]) -> dict[str, np.ndarray]:
    given = {}
    for op in graph.inputs:
        tid = _tensor_of(op)
        if tid is None or op.fill_value is not None:
            continue
        shape = op.output.type.shape_list
        if op.is_constant:
            value = np.asarray(runs[0].inputs[tid], np.float64)
            if "ark.transposed" in op.attributes:
                value = value.T
        else:
            value = np.concatenate([as_fmap(np.asarray(r.inputs[tid], np.float64))
                                    for r in runs])
        given[op.input_name.data] = value.reshape(shape)
    return given


def compare_graph(model: ark.ModelOp, graph: dnn.GraphOp, batch: int = 1, seed: int = 0,
                  ) -> tuple[float, str | None]:
    """The largest relative difference of any network output from the model's tensor, and the
    first output beyond its data type's tolerance (None if all are within)."""
    runs = run_samples(model, graph, batch, seed)
    values = run_graph(graph, given=graph_inputs(graph, runs))
    worst, problem = 0.0, None
    for out in graph.outputs:
        tid = _tensor_of(out)
        want = np.concatenate([as_fmap(np.asarray(r.tensors[tid], np.float64)) for r in runs])
        got = values[out.value].reshape(want.shape)
        scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
        error = float(np.max(np.abs(got - want), initial=0.0)) / scale
        if not np.isfinite(error):
            error = float("inf")
        worst = max(worst, error)
        limit = TOLERANCE.get(runs[0].types[tid].data_type, DEFAULT_TOLERANCE)
        if error > limit and problem is None:
            problem = (f"network output {out.output_name.data} differs from ARK tensor {tid} "
                       f"by {error:.3g} of its magnitude (tolerance {limit:g})")
    return worst, problem
