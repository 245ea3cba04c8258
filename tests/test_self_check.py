"""planc checks itself: every document planc writes, for every target that writes one and
every shipped example, passes `planc check --strict` (no errors, no warnings)."""

from __future__ import annotations

import pytest

from tests.conftest import EXAMPLES, corpus_params, diagonal

MODELS = ["ffn.json", "attention.json", "attention_nodes.json"]
TARGETS = [
    *[("ark", ("--arch", arch)) for arch in ("a100", "h100", "mi300x")],
    ("ark", ("--arch", "a100", "--planner", "ark-default")),
    *[("tt", ("--grid", "4x4", "--partition", p)) for p in ("row_major", "column_major")],
    # Sixth: `diagonal` pairs it with ffn.json, the model ARK's default planner accepts.
    ("ark", ("--arch", "mi300x", "--planner", "ark-default")),
    *[("tt", ("--grid", "4x4", "--partition", p)) for p in ("block", "z_order", "auto")],
    ("gemini", ("--mesh", "1x1")),
    ("gemini", ("--mesh", "2x2")),
    ("ark-model", ()),
    ("gemini-layers", ()),
]
# What ARK's own default planner refuses, planc refuses too (and says so): not a plan to check.
ARK_REFUSES = "ARK's default tile"


def written(planc, tmp_path, source, target, flags):
    out = tmp_path / f"out.{target}.json"
    result = planc(source, "-t", target, *flags, "-o", out)
    if result.code and ARK_REFUSES in result.err:
        pytest.skip(f"ARK's default planner refuses this model: {result.err.strip()}")
    assert result.code == 0, result.err
    return out


@pytest.mark.parametrize("model, target_flags", diagonal(
    MODELS, TARGETS, ids=lambda v: "-".join((v[0], *v[1])) if isinstance(v, tuple) else v))
def test_every_document_planc_writes_passes_strict_check(planc, tmp_path, model, target_flags):
    """Every target (and every model) in `-m "not slow"`; every pair in CI."""
    target, flags = target_flags
    out = written(planc, tmp_path, EXAMPLES / model, target, flags)
    result = planc("check", "--strict", out)
    assert result.code == 0, result.err


def test_collectives_from_models_pass_strict_check(planc, tmp_path):
    out = tmp_path / "ar.json"
    result = planc(EXAMPLES / "allreduce_rank0.json", EXAMPLES / "allreduce_rank1.json",
                   "-t", "mscclpp", "-o", out)
    assert result.code == 0, result.err
    assert planc("check", "--strict", out).code == 0


@pytest.mark.slow
@pytest.mark.parametrize("mesh", ["1x1", "2x2"])
@pytest.mark.parametrize("path", [p for p in corpus_params("gemini", "*.json")
                                  if p.values[0] is None
                                  or not p.values[0].name.endswith("_stschedule.json")])
def test_schedules_of_the_corpus_networks_pass_strict_check(planc, tmp_path, path, mesh):
    out = written(planc, tmp_path, path, "gemini", ("--mesh", mesh))
    result = planc("check", "--strict", out)
    assert result.code == 0, result.err


@pytest.mark.parametrize("model", MODELS)
def test_layer_descriptions_read_back_to_the_same_numbers(planc, tmp_path, model):
    """What --target gemini-layers writes is the network itself: read back, it computes what
    the graph planc made from the model computes (typed members such as a reduction's axis
    or a matmul's transpose travel with it)."""
    import numpy as np

    from compiler.api import load
    from compiler.pipeline import run_pipeline
    from dialects import dnn
    from targets.gemini.dnn_interpreter import run_graph

    out = written(planc, tmp_path, EXAMPLES / model, "gemini-layers", ())
    original = load(EXAMPLES / model)
    run_pipeline(original, "dnn-from-ark")
    graphs = [dnn.find_graph(original), dnn.find_graph(load(out))]
    first = run_graph(graphs[0], seed=3)
    given = {op.input_name.data: first[op.output] for op in graphs[0].inputs}
    results = [{o.output_name.data: values[o.value] for o in graph.outputs}
               for graph, values in zip(graphs, (first, run_graph(graphs[1], given=given)),
                                        strict=True)]
    assert results[0].keys() == results[1].keys()
    for name in results[0]:
        np.testing.assert_allclose(results[1][name], results[0][name])
