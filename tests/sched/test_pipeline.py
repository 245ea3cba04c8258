"""`planc MODEL --target ark`: every example and every pattern model plans, verifies and
simulates equal to its model on every GPU; the plans have the structure the passes promise."""

from __future__ import annotations

import json

import pytest

from backends.ark_plan import PLANC_PASSES, model_pipeline, single_plan
from backends.plan_json import plan_json
from compiler.pipeline import run_pipeline
from dialects.locations import verify_module
from frontends.ark_model import import_document
from ground.json_reader import load_json_file, parse_json
from targets.ark.model_interpreter import run_model
from targets.ark.plan_simulator import simulate
from tests.conftest import EXAMPLES, diagonal, small_ffn_doc
from tests.sched.models import MODELS

ARCHES = ("a100", "h100", "mi300x")
def _computes(path) -> bool:
    """Is this example a compute model (not one rank's communication)?"""
    ops = [node["Op"]["Type"] for node in json.loads(path.read_text())["Nodes"]]
    return not {"Send", "Recv", "SendPacket", "RecvPacket", "DeviceSync"} & set(ops)


EXAMPLE_MODELS = sorted(p.name for p in EXAMPLES.glob("*.json") if _computes(p))


def example(name: str):
    return lambda: import_document(load_json_file(EXAMPLES / name))


def planned(build, arch: str, planner: str = "planc"):
    """(model run on random inputs, the plan op) for a freshly built model."""
    module = build()
    verify_module(module)
    reference = run_model(module, seed=7)
    run_pipeline(module, model_pipeline(arch, planner))
    verify_module(module)
    return reference, single_plan(module)


def plan_of(build, arch: str, planner: str = "planc"):
    """The plan op of a freshly built model, where a test looks at the plan only (no model
    run: ffn.json's takes 0.85 CPU s)."""
    module = build()
    verify_module(module)
    run_pipeline(module, model_pipeline(arch, planner))
    verify_module(module)
    return single_plan(module)


_REFERENCES = {}
"""Model runs by model name: one per model, not one per GPU (the run does not depend on it)."""


def reference_of(name: str, build):
    if name not in _REFERENCES:
        module = build()
        verify_module(module)
        _REFERENCES[name] = run_model(module, seed=7)
    return _REFERENCES[name]


def small_ffn():
    return import_document(parse_json(json.dumps(small_ffn_doc())))


FAST_FFN = {"small_ffn": small_ffn}
"""ffn.json at smaller sizes (tests/conftest.py) stands for it in `-m "not slow"`: simulating the
example's FP16 matmuls takes 2.3 CPU s a GPU."""


@pytest.mark.parametrize("name, arch", [
    *diagonal([n for n in EXAMPLE_MODELS if n != "ffn.json"] + [*FAST_FFN, *MODELS], ARCHES),
    *(pytest.param("ffn.json", arch, marks=pytest.mark.slow, id=f"ffn.json-{arch}")
      for arch in ARCHES)])
def test_plan_computes_the_model(name, arch):
    """Every model and every GPU in `-m "not slow"` (15 of 48 pairs); every pair in CI."""
    build = example(name) if name in EXAMPLE_MODELS else {**FAST_FFN, **MODELS}[name]
    reference, p = reference_of(name, build), plan_of(build, arch)
    report = simulate(p, model=reference)
    assert report["ok"], report["problems"]
    assert report["problem_counts"] == {}
    assert report["modeled_time_s"] > 0 and report["device_bytes"] > 0
    assert p.arch_name in {"CUDA_80", "CUDA_90", "ROCM_942"}
    # TaskInfo ids are positions, as ARK's code generator looks them up.
    assert list(p.tasks()) == list(range(len(p.tasks())))


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.slow] if n == "llama_layer" else []) for n in sorted(MODELS)])
def test_arks_default_plans_compute_the_model_too(name):
    """The baseline is right as well (and exercises ARK's per-element reductions, 8x8
    transposes and one-row embedding tasks in the simulator). llama_layer (1.8 CPU s, the
    others 0.1-0.2 s) is slow: it is made of the other models' operators."""
    module = MODELS[name]()
    reference = run_model(module, seed=7)
    run_pipeline(module, "ark-default-plan{device=mi300x partial-tiles=true}")
    report = simulate(single_plan(module), model=reference)
    assert report["ok"], report["problems"]


def task_ops(p) -> list[list[str]]:
    return [[op["Name"] for op in task["Ops"]] for task in plan_json(p)["TaskInfos"]]


def launches(p) -> list[list[tuple[int, list[int]]]]:
    """Per processor group: (task id, processor range) of every task group."""
    return [[(tg["TaskId"], rg["ProcessorRange"]) for rg in pg["ResourceGroups"]
             for tg in rg["TaskGroups"]] for pg in plan_json(p)["ProcessorGroups"]]


class TestStructure:
    def test_ffn_is_one_fused_kernel_and_a_split_down_projection(self):
        """The down projection (64 tiles, 108 processors) is cut in three: two parts on 32
        processors each would only match the uncut kernel's one wave under the static
        roofline, which `split_plan` also asks (issue 26)."""
        p = plan_of(example("ffn.json"), "a100")
        assert task_ops(p) == [["matmul", "sigmoid", "mul", "matmul_1", "mul_1"],
                               ["matmul_2"], ["matmul_2_k1"], ["matmul_2_k2"],
                               ["matmul_2_sum", "matmul_2_sum2"]]
        first, parts, total = launches(p)
        assert first == [(0, [0, 108])]
        ranges = sorted(r for _, r in parts)
        assert len(ranges) == 3
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))  # disjoint
        assert total[0][0] == 4

    def test_matmul_epilogue_is_one_task(self):
        p = plan_of(MODELS["epilogue"], "h100")
        assert task_ops(p) == [["matmul", "add", "gelu", "scalar_mul", "cast"]]
        config = {op["Name"]: op["Config"] for op in plan_json(p)["TaskInfos"][0]["Ops"]}
        tile = config["matmul"]["TileShapeMNK"][:2]
        assert config["cast"]["Tile"] == tile
        assert len({c["NumTasks"] for c in config.values()}) == 1

    def test_softmax_and_norms_are_one_task_each(self):
        p = plan_of(MODELS["norms"], "a100")
        assert task_ops(p) == [
            ["reduce_max", "sub", "exp", "reduce_sum", "div"],
            ["reduce_mean", "sub_1", "mul", "reduce_mean_1", "scalar_add", "rsqrt", "mul_1"],
            ["mul_2", "reduce_mean_2", "scalar_add_1", "rsqrt_1", "mul_3", "mul_4"]]

    def test_independent_projections_run_concurrently(self):
        p = plan_of(example("attention.json"), "a100")
        qkv = next(group for group in launches(p) if len(group) == 3)
        ranges = sorted(r for _, r in qkv)
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))

    def test_rotary_embeddings_never_write_over_their_input(self):
        p = plan_of(example("attention.json"), "a100")
        for ops in p.task_operators().values():
            for op in ops:
                if op.ark_type == "Rope":
                    assert op.outputs[0].buffer_id not in {t.buffer_id for t in op.inputs}

    def test_in_place_writes_wait_for_readers(self):
        p = plan_of(MODELS["in_place"], "a100")
        order = task_ops(p)
        assert order.index(["relu", "exp"]) < order.index(["scalar_mul"])

    def test_split_k_moves_the_epilogue_after_the_sum(self):
        p = plan_of(MODELS["deep_matmul"], "a100")
        *parts, summing = task_ops(p)
        count = len(parts)
        assert count >= 2
        assert parts == [["matmul"], *([f"matmul_k{i}"] for i in range(1, count))]
        sums = ["matmul_sum", *(f"matmul_sum{i}" for i in range(2, count))]
        assert summing == [*sums, "add", "relu"]


    @pytest.mark.parametrize("arch", ARCHES)
    def test_split_k_cuts_fused_matmuls_together(self, arch):
        p = plan_of(MODELS["gated_deep"], arch)
        *parts, summing = task_ops(p)
        count = len(parts)
        assert count >= 2
        assert parts == [["matmul", "matmul_1"],
                         *([f"matmul_k{i}", f"matmul_1_k{i}"] for i in range(1, count))]
        sums = [f"{mm}_sum{'' if i == 1 else i}" for mm in ("matmul", "matmul_1")
                for i in range(1, count)]
        assert summing == [*sums, "sigmoid", "mul", "mul_1"]
        cut, total = launches(p)
        assert [t for t, _ in cut] == list(range(count))
        ranges = sorted(r for _, r in cut)
        assert all(a[1] <= b[0] for a, b in zip(ranges, ranges[1:], strict=False))
        assert [t for t, _ in total] == [count]

    @pytest.mark.parametrize("name", ["gated_deep", "deep_matmul"])
    @pytest.mark.parametrize("arch", ARCHES)
    def test_split_k_is_taken_only_where_the_cost_model_says_it_wins(self, name, arch):
        """The cut plan against the same model planned with split-k off, both modeled by
        the whole-plan cost model (not the estimates the pass decided with)."""
        cut = plan_of(MODELS[name], arch)
        module = MODELS[name]()
        passes = PLANC_PASSES.format(device=arch)
        run_pipeline(module, passes.replace("sched-partition",
                                            "sched-partition{split-k=false}"))
        whole = single_plan(module)
        assert len(cut.tasks()) > len(whole.tasks())
        mine, uncut = (simulate(p, functional=False)["modeled_time_s"] for p in (cut, whole))
        assert mine < uncut


class TestAgainstArkDefault:
    # mi300x in `-m "not slow"` (0.9 CPU s each): the CUDA pair in CI.
    @pytest.mark.parametrize("arch", [pytest.param(a, marks=[] if a == "mi300x" else
                                                   [pytest.mark.slow]) for a in ARCHES])
    def test_faster_and_smaller_than_arks_default_plan(self, arch):
        ours = plan_of(example("ffn.json"), arch)
        arks = plan_of(example("ffn.json"), arch, "ark-default")
        mine, theirs = (simulate(p, functional=False) for p in (ours, arks))
        assert mine["modeled_time_s"] <= 0.75 * theirs["modeled_time_s"]
        assert mine["activation_bytes"] <= 0.6 * theirs["activation_bytes"]
        assert mine["input_bytes"] == theirs["input_bytes"]

    def test_memory_reuse_shrinks_the_plan_and_keeps_it_right(self):
        module = MODELS["norms"]()
        reference = run_model(module, seed=1)
        passes = PLANC_PASSES.format(device="a100")
        run_pipeline(module, passes.replace("sched-allocate", "sched-allocate{reuse=false}"))
        apart = simulate(single_plan(module), model=reference)
        p = plan_of(MODELS["norms"], "a100")
        shared = simulate(p, model=run_model(MODELS["norms"](), seed=1))
        assert apart["ok"] and shared["ok"]
        assert shared["activation_bytes"] < apart["activation_bytes"]
        assert shared["buffers"] < apart["buffers"]


def test_communication_models_plan_but_only_model_their_cost(planc, tmp_path):
    out = tmp_path / "p.json"
    assert planc(EXAMPLES / "sendrecv_rank0.json", "-t", "ark", "-o", out).code == 0
    doc = json.loads(out.read_text())
    assert [op["Type"] for t in doc["TaskInfos"] for op in t["Ops"]] == \
        ["ScalarMul", "Send", "SendDone"]
    r = planc("simulate", out)
    assert r.code == 1
    assert "use --cost-only" in r.err
    assert planc("simulate", out, "--cost-only").code == 0


def test_models_without_operators_make_empty_plans(planc, tmp_path):
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"Rank": 0, "WorldSize": 1, "Nodes": []}))
    out = tmp_path / "plan.json"
    assert planc(path, "-t", "ark", "--arch", "mi300x", "-o", out).code == 0
    doc = json.loads(out.read_text())
    assert doc["TaskInfos"] == [] and doc["ProcessorGroups"] == []
    assert planc("simulate", out).code == 0


def test_operators_the_device_cannot_run_are_reported(planc, tmp_path):
    from backends.ark_model import emit_model
    from frontends.model_builder import ModelBuilder

    m = ModelBuilder()
    m.matmul(m.tensor([64, 64], "INT8"), m.tensor([64, 64], "INT8"))
    path = tmp_path / "int8.json"
    path.write_text(emit_model(m.finish()))
    r = planc(path, "-t", "ark", "-o", tmp_path / "p.json")
    assert r.code == 1
    assert r.err.strip().endswith("$.Nodes[0].Op: Matmul 'matmul': a100 has no INT8 matmul "
                                  "kernel")
    assert not (tmp_path / "p.json").exists()
