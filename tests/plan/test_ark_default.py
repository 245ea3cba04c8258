"""`--planner ark-default`: ARK's default planner, checked against ARK's own plans and against
configurations derived by hand from ARK's rules (ark.md §1.4, §2)."""

from __future__ import annotations

import json

import pytest

from backends.ark_plan import emit_plan, single_plan
from backends.plan_json import plan_json
from devices.hardware import gpu_device
from dialects.locations import verify_module
from frontends.model_builder import ModelBuilder
from ground.diagnostics import PlancError
from passes.ark_default_plan import ArkDefaultPlanPass
from tests.conftest import corpus_root

CORPUS = corpus_root() / "ark"
needs_corpus = pytest.mark.skipif(
    not (CORPUS / "tutorial_model.json").is_file(),
    reason=f"upstream corpus not found at {CORPUS} (set PLANC_CORPUS to its path)")


@needs_corpus
@pytest.mark.parametrize("arch, expected, ark_format", [
    ("a100", "tutorial_default_plan.json", "legacy"),
    ("mi300x", "tutorial_default_plan_rocm942.json", "torch"),
])
def test_reproduces_arks_tutorial_plans(planc, tmp_path, arch, expected, ark_format):
    out = tmp_path / "plan.json"
    r = planc(CORPUS / "tutorial_model.json", "--target", "ark", "--arch", arch,
              "--planner", "ark-default", "--ark-format", ark_format, "-o", out)
    assert r.code == 0, r.err
    assert json.loads(out.read_text()) == json.loads((CORPUS / expected).read_text())


@needs_corpus
def test_a100_plan_is_byte_identical(planc, tmp_path):
    out = tmp_path / "plan.json"
    planc(CORPUS / "tutorial_model.json", "-t", "ark", "--planner", "ark-default",
          "--ark-format", "legacy", "-o", out)
    assert out.read_text() == (CORPUS / "tutorial_default_plan.json").read_text()


def plan_of(module, device="a100", **options):
    ArkDefaultPlanPass(device=device, **options).apply(None, module)
    verify_module(module)
    return plan_json(single_plan(module))


def configs(doc):
    return {op["Name"]: op["Config"] for t in doc["TaskInfos"] for op in t["Ops"]}


def small_model():
    m = ModelBuilder()
    x = m.tensor([1, 256, 128])
    y = m.matmul(x, m.tensor([512, 128]), transpose_other=True)   # M 256 < N 512
    s = m.sigmoid(y)                                                # [1, 256, 512]
    m.reduce_sum(s, -1)                                             # last axis
    m.reduce_max(s, 1)                                              # not the last axis
    m.transpose(s, [0, 2, 1])                                       # [1, 512, 256]
    m.scalar_mul(m.tensor([1, 300, 1]), 2.0)                        # a column: tile [64, 1]
    m.embedding(m.tensor([2, 5], "INT32"), m.tensor([100, 64]))
    return m.finish()


class TestDefaultConfigs:
    def test_configs_follow_arks_rules(self):
        got = configs(plan_of(small_model()))
        assert got["matmul"] == {"NumWarps": 8, "SramBytes": 147456,
                                 "TileShapeMNK": [128, 256, 64], "NumTasks": 2 * 2}
        assert got["sigmoid"] == {"NumWarps": 1, "SramBytes": 0, "Tile": [1, 64],
                                  "NumTasks": 256 * 8}
        assert got["reduce_sum"] == {"NumWarps": 1, "ImplType": "WarpWise", "SramBytes": 256,
                                     "NumTasks": 256}
        assert got["reduce_max"] == {"NumWarps": 1, "ImplType": "ElementWise",
                                     "SramBytes": 0, "NumTasks": 512}
        assert got["transpose"] == {"NumWarps": 1, "SramBytes": 0, "Tile": [8, 8],
                                    "NumTasks": 64 * 32}
        assert got["scalar_mul"]["Tile"] == [64, 1] and got["scalar_mul"]["NumTasks"] == 5
        assert got["embedding"] == {"NumWarps": 1, "SramBytes": 0, "NumTasks": 10}

    def test_config_key_order_is_arks(self):
        got = configs(plan_of(small_model()))
        assert list(got["matmul"]) == ["NumWarps", "SramBytes", "TileShapeMNK", "NumTasks"]
        assert list(got["reduce_sum"]) == ["NumWarps", "ImplType", "SramBytes", "NumTasks"]

    def test_one_task_and_one_processor_group_per_operator(self):
        doc = plan_of(small_model())
        assert [t["Id"] for t in doc["TaskInfos"]] == list(range(7))
        sigmoid = doc["ProcessorGroups"][1]
        assert sigmoid == {"ProcessorRange": [0, 108], "ResourceGroups": [{
            "ProcessorRange": [0, 108], "WarpRange": [0, 1], "SramRange": [0, 0],
            "TaskGroups": [{"TaskId": 1, "TaskRange": [0, 2048], "Granularity": 1}]}]}
        # Four matmul tiles: four processors.
        assert doc["ProcessorGroups"][0]["ProcessorRange"] == [0, 4]
        assert doc["NumProcessors"] == 108 and doc["NumWarpsPerProcessor"] == 8
        assert doc["Architecture"] == "CUDA_80"

    def test_rocm_matmul_and_processor_count(self):
        doc = plan_of(small_model(), "mi300x")
        assert configs(doc)["matmul"] == {"NumWarps": 4, "SramBytes": 24672,
                                          "TileShapeMNK": [128, 256, 32], "NumTasks": 4}
        assert doc["NumProcessors"] == 304 and doc["NumWarpsPerProcessor"] == 4
        assert doc["ProcessorGroups"][1]["ProcessorRange"] == [0, 304]

    def test_bf16_on_rocm_and_fp32_tiles(self):
        m = ModelBuilder()
        m.matmul(m.tensor([512, 64], "BF16"), m.tensor([64, 256], "BF16"))   # M > N: 256x128
        m.matmul(m.tensor([128, 64], "FP32"), m.tensor([64, 256], "FP32"))
        got = configs(plan_of(m.finish(), "mi300x"))
        assert got["matmul"] == {"NumWarps": 4, "SramBytes": 24624,
                                 "TileShapeMNK": [256, 128, 32], "NumTasks": 2 * 2}
        assert got["matmul_1"]["TileShapeMNK"] == [128, 256, 16]

    def test_hopper_uses_the_sm80_configuration(self):
        doc = plan_of(small_model(), "h100")
        assert configs(doc)["matmul"]["TileShapeMNK"] == [128, 256, 64]
        assert doc["Architecture"] == "CUDA_90" and doc["NumProcessors"] == 132

    def test_tiles_that_do_not_divide_the_problem_are_an_error(self):
        m = ModelBuilder()
        m.matmul(m.tensor([128, 64]), m.tensor([64, 128]))
        with pytest.raises(PlancError, match="ARK's default tile 128x256 does not divide "
                                             "the problem M=128, N=128"):
            plan_of(m.finish())

    def test_partial_tiles_when_asked(self):
        m = ModelBuilder()
        m.matmul(m.tensor([128, 64]), m.tensor([64, 128]))
        assert configs(plan_of(m.finish(), partial_tiles=True))["matmul"]["NumTasks"] == 1

    def test_integer_matmul_has_no_default(self):
        m = ModelBuilder()
        m.matmul(m.tensor([128, 64], "INT8"), m.tensor([64, 256], "INT8"))
        with pytest.raises(PlancError, match="no default INT8 matmul configuration"):
            plan_of(m.finish())

    def test_communication_defaults(self):
        m = ModelBuilder(rank=0, world_size=2)
        m.send(m.tensor([64, 256], "FP32"), remote_rank=1)
        got = configs(plan_of(m.finish()))
        assert got["send"] == {"ChannelType": "Proxy", "Signal": True, "NumTasks": 1,
                               "NumWarps": 1, "SramBytes": 0}
        assert got["send_done"] == {"ChannelType": "Proxy", "NumTasks": 1, "NumWarps": 1,
                                    "SramBytes": 0}


def test_unknown_device_and_planner_are_usage_errors(planc, tmp_path):
    from tests.conftest import EXAMPLES

    r = planc(EXAMPLES / "ffn.json", "-t", "ark", "--arch", "v100", "-o", tmp_path / "p")
    assert r.code == 1
    assert r.err.strip() == "planc: error: unknown device 'v100': did you mean h100? (known " \
                            "GPUs: a100, h100 or mi300x)"
    r = planc(EXAMPLES / "ffn.json", "-t", "ark", "--planner", "greedy", "-o", tmp_path / "p")
    assert "unknown planner 'greedy' (known planners: planc or ark-default)" in r.err
    assert not (tmp_path / "p").exists()


def test_denser_layout_of_a_default_plan():
    module = small_model()
    ArkDefaultPlanPass().apply(None, module)
    text = emit_plan(module)
    assert '{"TaskId":0,"TaskRange":[0,4],"Granularity":1}' in text
    assert gpu_device("a100").architecture in text
