"""Proofs that a lowering computes its input: the driver's pipeline run on a model, then its
product compared with the model by the target's interpreters and simulator.

`prove_model` lowers an ARK model to a Gemini schedule with the scheduling options and proves the
result in the two steps of `targets.gemini.equivalence`: the layer graph against the model, the
schedule against the graph.
"""

from __future__ import annotations

import argparse

from xdsl.dialects.builtin import ModuleOp

from backends.gemini import pipeline
from compiler.pipeline import run_pipeline
from dialects import ark, dnn
from dialects.locations import verify_module
from targets.gemini.equivalence import Proof, compare_graph
from targets.gemini.simulator import simulate_schedule


def prove_model(module: ModuleOp, mesh: str = "1x1", batch: int | None = None,
                buffer_size: int | None = None, seed: int = 0) -> Proof:
    """Lower `module` (an ARK model, not changed) to Gemini with these options and prove the
    result: the graph against the model, the schedule against the graph."""
    model = next(op for op in module.ops if isinstance(op, ark.ModelOp))
    lowered = module.clone()
    options = argparse.Namespace(mesh=mesh, batch=batch, buffer_size=buffer_size,
                                 dram_bw=None)
    run_pipeline(lowered, pipeline("ark-model", options))
    verify_module(lowered)
    graph = dnn.find_graph(lowered)
    error, problem = compare_graph(model, graph, batch or 1, seed)
    report = simulate_schedule(lowered, argparse.Namespace(seed=seed))    # planc simulate
    tiles_ok = bool(report["ok"]) and report.get("max_abs_error") is not None
    problem = problem or report.get("problem")
    return Proof(problem is None and tiles_ok, error, tiles_ok, problem)
