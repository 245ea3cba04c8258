"""The ARK plan runner's batched run (`PlanRunner(batched=True)`, what `planc run` and
`planc simulate` use) ends in exactly the state of the per-tile run (`batched=False`, ARK's
order tile by tile, kept as the reference): every byte of memory, every shadow entry (last
writer, last reader, producing operator), the events, the vector clocks, the run counts, and
the problems with their counts and order. Checked on plans of convolutions and pooling
(im2col gathers, reductions, transposes), split-K matmuls, in-place and aliasing models, ARK's
default plans (per-element reductions), and on broken plans and wrong reference values, where
the batched run must leave each task group to the per-tile run."""

from __future__ import annotations

import copy
import functools

import numpy as np
import pytest

from backends.ark_plan import model_pipeline, single_plan
from backends.plan_json import plan_json
from compiler.pipeline import run_pipeline
from dialects.locations import verify_module
from frontends.ark_plan import import_document
from ground.json_reader import JsonNode
from targets.ark.model_interpreter import ModelRun, run_model
from targets.ark.plan_simulator import Events, PlanRunner, derive_model, single
from tests.plan import broken_plans
from tests.plan.fixtures import sigmoid_over_matmul, small_plan_doc
from tests.sched.aliasing_models import random_model
from tests.sched.models import MODELS


def final_state(runner: PlanRunner, ran: dict[int, np.ndarray]) -> dict:
    """Everything a run leaves behind, as plain comparable values."""
    shadow = runner.shadow
    return {
        "memory": {b: raw.tobytes() for b, raw in runner.memory.buffers.items()},
        "writer": {b: a.tolist() for b, a in shadow.writer.items()},
        "reader": {b: a.tolist() for b, a in shadow.reader.items()},
        "data_op": {b: a.tolist() for b, a in shadow.data_op.items()},
        "events": runner.events.columns[:, :runner.events.count].tolist(),
        "clocks": runner.clocks.known.tolist(),
        "ran": {t: c.tolist() for t, c in ran.items()},
        "problems": [str(p) for p in runner.problems],
        "counts": dict(runner.counts),
    }


def run(p, reference: ModelRun, originals, batched: bool) -> tuple[dict | str, PlanRunner]:
    runner = PlanRunner(p, reference, originals, batched=batched)
    try:
        return final_state(runner, runner.run()), runner
    except Exception as error:  # noqa: BLE001 - the two runs must fail alike too
        return f"{type(error).__name__}: {error}", runner


def same_runs(p, reference: ModelRun | None = None, seed: int = 0) -> PlanRunner:
    """Run `p` both ways on one model run; assert they end alike; the batched runner."""
    model, originals, _ = derive_model(p)
    reference = reference or run_model(model, seed=seed)
    expected, _ = run(p, reference, originals, batched=False)
    got, runner = run(p, reference, originals, batched=True)
    assert isinstance(expected, dict) == isinstance(got, dict), (expected, got)
    if isinstance(expected, str):
        assert got == expected
        return runner
    for key in expected:
        assert got[key] == expected[key], key
    return runner


def planned(module, arch: str = "a100", planner: str = "planc"):
    verify_module(module)
    run_pipeline(module, model_pipeline(arch) if planner == "planc" else
                 f"ark-default-plan{{device={arch} partial-tiles=true}}")
    return single_plan(module)


def from_doc(doc: dict):
    module = import_document(JsonNode(doc))
    verify_module(module)
    return single(module)


# ---------------------------------------------------------------------------------------------
# Plans that run correctly: the batched run takes whole task groups and equals the per-tile one
# ---------------------------------------------------------------------------------------------


@functools.cache
def pattern_run(name: str, planner: str = "planc") -> PlanRunner:
    """`same_runs` on the plan of a pattern model, once per (model, planner): the tests below
    look at different parts of the same two runs (problems, fallbacks, batched groups)."""
    return same_runs(planned(MODELS[name](), planner=planner))


SHARED = pytest.mark.xdist_group("batched-pattern-runs")
"""The tests that share a `pattern_run` run on one pytest-xdist worker, so that it is made once
in CI too."""
SHARED_RUNS = {("transposed", "ark-default"), ("deep_matmul", "planc"), ("in_place", "planc")}


@pytest.mark.parametrize("name, planner", [
    pytest.param(name, planner, marks=[SHARED] if (name, planner) in SHARED_RUNS else [])
    for name, planner in [
        *((name, "planc") for name in sorted(set(MODELS) - {"llama_layer"})),
        *((name, "ark-default") for name in ("embedding", "in_place", "norms", "transposed"))]])
def test_pattern_models(name, planner):
    """Split-K matmuls (deep_matmul, gated_deep), transposes and middle-axis reductions,
    embeddings, norms, in-place writes, rotary embedding; ARK's default plans reduce element
    by element and transpose in small tiles."""
    runner = pattern_run(name, planner)
    assert not runner.problems
    assert not runner.fallen_back     # every group it could take was taken and compared


@SHARED
def test_the_batched_run_is_taken():
    """Not a vacuous comparison: on ARK's default plan of the transposes and reductions each
    of their task groups runs at once."""
    runner = pattern_run("transposed", "ark-default")
    assert runner.batched_groups["Transpose"] and runner.batched_groups["ReduceSum"]
    assert not runner.fallen_back


@SHARED
@pytest.mark.parametrize("name, chain", [("deep_matmul", "Add+Add+Add+Add+Relu"),
                                         ("in_place", "Relu+Exp")])
def test_chains_of_element_wise_operators_are_taken(name, chain):
    """A task of several element-wise operators (split-K's partial sums and epilogue, an
    in-place pair) runs operator by operator over all its tiles."""
    runner = pattern_run(name)
    assert runner.batched_groups[chain] == 1


@pytest.mark.parametrize("seed", range(6))
def test_aliasing_models(seed):
    """Concats written by slices, KV-cache rows, in-place updates read through old views, in
    FP32, FP16, BF16 and INT32 (the shadow's unit smaller than some elements)."""
    arch = ("a100", "h100", "mi300x")[seed % 3]
    runner = same_runs(planned(random_model(seed), arch), seed=seed)
    assert not runner.problems and not runner.fallen_back


onnx = pytest.importorskip("onnx", reason="the convolution models come from the ONNX frontend")


def onnx_plan(op_type: str, x_shape, arch: str = "a100", **attrs):
    from frontends.onnx import import_model
    from tests.onnx.oracle import single_node_model

    rng = np.random.default_rng(5)
    x = rng.uniform(-2, 2, x_shape).astype(np.float32)
    weights = attrs.pop("w", None)
    initializers = {} if weights is None else {
        "w": rng.uniform(-1, 1, weights).astype(np.float32)}
    model = single_node_model(op_type, {"x": x}, ["y"], initializers=initializers, **attrs)
    imported = import_model(model, wants=("ark-model",))
    return planned(imported.module, arch)


CONVOLUTIONS = {
    "3x3 stride 2 pad 1": dict(op_type="Conv", x_shape=(2, 3, 8, 9), w=(4, 3, 3, 3),
                               strides=[2, 2], pads=[1, 1, 1, 1]),
    "depthwise": dict(op_type="Conv", x_shape=(1, 6, 7, 7), w=(6, 1, 3, 3), group=6,
                      pads=[1, 1, 1, 1], arch="mi300x"),
    "groups": dict(op_type="Conv", x_shape=(1, 6, 5, 5), w=(4, 3, 3, 3), group=2,
                   pads=[1, 1, 1, 1], arch="h100"),
    "1-D": dict(op_type="Conv", x_shape=(2, 3, 11), w=(4, 3, 3), strides=[2], pads=[1, 2]),
    "max pool": dict(op_type="MaxPool", x_shape=(2, 3, 9, 8), kernel_shape=[3, 3],
                     strides=[2, 2], pads=[1, 1, 1, 1]),
    "average pool": dict(op_type="AveragePool", x_shape=(2, 3, 9, 8), kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], count_include_pad=1, arch="h100"),
    "global average": dict(op_type="GlobalAveragePool", x_shape=(2, 3, 5, 4)),
}


@pytest.mark.parametrize("name", CONVOLUTIONS)
def test_convolutions_and_pooling(name):
    runner = same_runs(onnx_plan(**CONVOLUTIONS[name]))
    assert not runner.problems and not runner.fallen_back
    # The im2col gather is an embedding; depthwise convolutions and pools reduce windows.
    kinds = set(runner.batched_groups)
    assert "Embedding" in kinds or name.startswith("global")
    if name in ("depthwise", "max pool", "average pool", "global average"):
        assert kinds & {"ReduceSum", "ReduceMax", "ReduceMean"}


# ---------------------------------------------------------------------------------------------
# Plans the per-tile run reports: the batched run leaves those task groups to it
# ---------------------------------------------------------------------------------------------


def rg(doc: dict, pg: int) -> dict:
    return doc["ProcessorGroups"][pg]["ResourceGroups"][0]


def _concurrent(doc):
    doc["NumProcessors"] = 4
    doc["ProcessorGroups"][1]["ProcessorRange"] = [2, 4]
    rg(doc, 1)["ProcessorRange"] = [2, 4]


def _swapped(doc):
    groups = doc["ProcessorGroups"]
    groups[0], groups[1] = groups[1], groups[0]


def _twice(doc):
    """The add's task group runs its tiles twice, on two processors of one group."""
    rg(doc, 2)["TaskGroups"].append(copy.deepcopy(rg(doc, 2)["TaskGroups"][0]))


SMALL_PLAN_EDITS = {
    "missing tiles": lambda d: rg(d, 1)["TaskGroups"][0].update(TaskRange=[0, 7]),
    "no barrier": _concurrent,
    "consumer first": _swapped,
    "shared buffer": sigmoid_over_matmul,
}


@pytest.mark.parametrize("name", SMALL_PLAN_EDITS)
def test_broken_small_plans(name):
    doc = small_plan_doc()
    SMALL_PLAN_EDITS[name](doc)
    runner = same_runs(from_doc(doc))
    assert runner.problems


def test_tiles_run_twice_in_order():
    """A second task group of the same tiles on the same processors: ordered, not a race."""
    doc = small_plan_doc()
    _twice(doc)
    runner = same_runs(from_doc(doc))
    assert not runner.problems and runner.batched_groups["Add"] == 2


@pytest.mark.parametrize("name", ["rotation_skips_tasks", "too_few_tasks",
                                  "overlapping_split_matmul", "unordered_read_through_a_slice"])
def test_broken_plans_of_planc_check(name):
    same_runs(from_doc(getattr(broken_plans, name)()))


def transposed_plan_doc() -> dict:
    """ARK's default plan of transposes and reductions, every task in its own processor
    group: the operators the batched run takes whole."""
    return plan_json(planned(MODELS["transposed"](), planner="ark-default"))


def _merge_groups(doc):
    """Every task in one processor group: consumers run beside their producers."""
    groups = doc["ProcessorGroups"]
    merged = groups[0]
    for group in groups[1:]:
        merged["ResourceGroups"] += group["ResourceGroups"]
    del groups[1:]


def _drop_tiles(doc):
    for group in doc["ProcessorGroups"]:
        for resources in group["ResourceGroups"]:
            for tasks in resources["TaskGroups"]:
                begin, end = tasks["TaskRange"]
                tasks["TaskRange"] = [begin, max(begin + 1, end - 1)]


def _every_group_twice(doc):
    for group in doc["ProcessorGroups"]:
        for resources in group["ResourceGroups"]:
            resources["TaskGroups"] += copy.deepcopy(resources["TaskGroups"])


@pytest.mark.parametrize("edit", [_merge_groups, _drop_tiles, _every_group_twice])
def test_broken_plans_of_reductions_and_transposes(edit):
    doc = transposed_plan_doc()
    edit(doc)
    runner = same_runs(from_doc(doc))
    assert runner.problems


def test_tiles_that_differ_from_the_model():
    """Reference values off in one element of every result: each tile holding one is
    reported, tile by tile, as the per-tile run reports it."""
    p = planned(MODELS["transposed"](), planner="ark-default")
    model, _, _ = derive_model(p)
    reference = run_model(model, seed=3)
    for tid in list(reference.tensors):
        if tid not in reference.inputs:
            values = reference.tensors[tid].copy()
            values.reshape(-1)[values.size // 2] += 1.0
            reference.tensors[tid] = values
    runner = same_runs(p, reference)
    assert runner.counts["mismatch"] >= 3
    assert runner.fallen_back["Transpose"] and runner.fallen_back["ReduceSum"]


def test_a_chain_that_differs_in_its_last_operator_is_undone():
    """Reference values off in the last operator's result only: the chain's first operators
    ran over all tiles before the difference shows, and are undone (memory, shadow, events)
    for the per-tile run, which reports the tiles."""
    p = planned(MODELS["deep_matmul"]())
    chain = next(ops for ops in p.task_operators().values() if len(ops) > 1)
    model, _, _ = derive_model(p)
    reference = run_model(model, seed=4)
    tid = chain[-1].results_types[0].tensor_id
    values = reference.tensors[tid].copy()
    values.reshape(-1)[0] += 1.0
    reference.tensors[tid] = values
    runner = same_runs(p, reference)
    assert runner.counts == {"mismatch": 1}
    assert runner.fallen_back == {"Add+Add+Add+Add+Relu": 1}


def test_events_grow_past_their_first_allocation():
    events = Events()
    ids = [events.new(p % 7, p // 7, p % 3, 100 + p) for p in range(300)]
    assert ids == list(range(300))
    processors, clocks, slots = events.as_arrays()
    assert processors[:300].tolist() == [p % 7 for p in range(300)]
    assert clocks[:300].tolist() == [p // 7 for p in range(300)]
    assert slots[:300].tolist() == [p % 3 for p in range(300)]
    assert events.task.tolist() == [100 + p for p in range(300)]
    assert int(events.processor[299]) == 299 % 7
