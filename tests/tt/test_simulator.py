"""Functional check: a lowered model, run tile by tile with numpy along its work partition,
computes what the reference interpreter computes op by op."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dialects import ark
from dialects.tt_kernels import TileView
from frontends.ark_model import import_document
from frontends.model_builder import ModelBuilder
from ground.diagnostics import PlancError
from ground.json_reader import load_json_file
from targets.ark.model_interpreter import run_model
from targets.tt.simulator import run_partition, simulate_against
from tests.conftest import EXAMPLES
from tests.tt.fixtures import lower

PIPELINE = "tt-tile,tt-partition{{grid={grid} strategy={strategy}}},tt-place"


def check(module, grid: str = "3x2", strategy: str = "auto"):
    """Lower `module` and compare every kernel's tiles with the reference run."""
    reference = run_model(module, seed=7)
    lower(module, PIPELINE.format(grid=grid, strategy=strategy))
    report = simulate_against(module.ops.first.plans(), reference)
    assert report.kernels, "nothing was lowered"
    bad = [k for k in report.kernels if not k.ok]
    assert not bad, bad
    return report


def matmuls(dtype="FP32"):
    m = ModelBuilder()
    m.matmul(m.tensor([100, 70], dtype), m.tensor([50, 70], dtype), transpose_other=True)
    m.matmul(m.tensor([70, 100], dtype), m.tensor([70, 50], dtype), transpose_input=True)
    m.matmul(m.tensor([2, 3, 40, 64], dtype), m.tensor([64, 48], dtype))
    m.matmul(m.tensor([2, 3, 40, 64], dtype), m.tensor([3, 64, 33], dtype))
    m.matmul(m.tensor([1, 5, 32, 64], dtype), m.tensor([1, 5, 96, 64], dtype),
             transpose_other=True)
    return m.finish()


@pytest.mark.parametrize("strategy", ["row_major", "column_major", "block", "z_order"])
def test_matmuls_with_ragged_edges_batches_and_transposes(strategy):
    report = check(matmuls(), strategy=strategy)
    assert [k.tiles for k in report.kernels] == [4 * 2, 4 * 2, 6 * 2 * 2, 6 * 2 * 2, 5 * 3]


def test_bf16_and_fp16_matmuls():
    check(matmuls("BF16"), grid="2x2")
    check(matmuls("FP16"), grid="1x3")


def eltwise():
    m = ModelBuilder()
    x = m.tensor([70, 50], "FP32")
    m.add(x, m.tensor([1, 50], "FP32"))          # a row broadcast over rows
    m.mul(x, m.tensor([70, 1], "FP32"))          # a column broadcast over columns
    m.sub(x, m.tensor([1, 1], "FP32"))           # a scalar
    m.div(m.tensor([2, 70, 50], "FP32"), m.tensor([50], "FP32"))
    m.add(m.tensor([2, 1, 40, 50], "FP32"), m.tensor([3, 40, 50], "FP32"))
    for unary in (m.exp, m.gelu, m.relu, m.rsqrt, m.sigmoid, m.sqrt, m.copy):
        unary(x)
    m.scalar_add(x, 0.5)
    m.scalar_mul(x, -3.0)
    m.cast(x, "FP16")
    m.scalar_assign([40, 33], 2.5, "FP32")
    m.rope(m.tensor([1, 40, 4, 64], "FP32"), m.tensor([1, 40, 1, 64], "FP32"))
    return m.finish()


def test_element_wise_kernels_with_broadcasting():
    report = check(eltwise())
    assert len(report.kernels) == 17


def reductions():
    m = ModelBuilder()
    x = m.tensor([3, 70, 50], "FP32")
    for reduce in (m.reduce_sum, m.reduce_max, m.reduce_mean):
        reduce(x, -1)
        reduce(x, -2)
    m.reduce_max(x, 2, keep_dim=False)
    m.reduce_sum(m.tensor([100], "FP32"), 0)
    m.softmax(m.tensor([2, 40, 70], "FP32"))
    return m.finish()


def test_reductions_along_rows_and_columns():
    check(reductions(), grid="2x2", strategy="z_order")


def test_reduction_over_a_batch_axis_is_an_error_at_its_node():
    m = ModelBuilder()
    m.reduce_sum(m.tensor([3, 70, 50], "FP32"), 0)
    with pytest.raises(PlancError, match=r"ReduceSum 'reduce_sum': reduces axis 0 of \[3, 70, "
                                         r"50\], a batch axis"):
        lower(m.finish(), "tt-tile")


def test_transposes():
    m = ModelBuilder()
    m.transpose(m.tensor([1, 40, 4, 36], "FP32"), [0, 2, 1, 3])
    m.transpose(m.tensor([70, 50], "FP32"), [1, 0])
    m.transpose(m.tensor([3, 5, 40], "FP32"), [2, 0, 1])
    check(m.finish())


def test_a_chain_of_kernels_through_views():
    m = ModelBuilder()
    x = m.tensor([1, 64, 96], "FP16")
    h = m.gelu(m.matmul(x, m.tensor([96, 96], "FP16")))
    heads = m.reshape(h, [1, 64, 3, 32])
    m.add(x, m.reshape(m.transpose(heads, [0, 2, 1, 3]), [1, 64, 96]))
    check(m.finish(), grid="4x4")


# ffn.json (1.7 CPU s) is slow: attention.json takes the same path, and the small ffn is
# simulated through the command line below.
@pytest.mark.parametrize("example", [pytest.param("ffn.json", marks=pytest.mark.slow),
                                     "attention.json"])
def test_shipped_examples(example):
    module = import_document(load_json_file(EXAMPLES / example))
    report = check(module, grid="8x8")
    assert report.json()["modeled_time_s"] > 0


def test_simulation_catches_a_kernel_that_computes_something_else():
    """The check can fail: change a lowered kernel (B no longer transposed) and the tiles no
    longer match the model."""
    m = ModelBuilder()
    m.matmul(m.tensor([64, 64], "FP32"), m.tensor([64, 64], "FP32"), transpose_other=True)
    module = m.finish()
    reference = run_model(module)
    lower(module, "tt-tile,tt-partition{grid=2x2},tt-place")
    plan = module.ops.first.plans()[0]
    plan.kernel.operator.transpose_other = ark.int_arg(ark.ArgKind.BOOL, False)
    report = simulate_against([plan], reference)
    assert not report.ok and report.kernels[0].max_abs_error > 0.1


def test_executing_a_tile_twice_is_caught():
    view = TileView((), 64, 64)
    work = [[(0, 0), (0, 1)], [(1, 0), (1, 1), (0, 1)]]
    with pytest.raises(PlancError, match=r"output tile \(0,1\) was written 2 times"):
        run_partition(lambda io, jo: np.zeros((32, 32)), view, work, np.dtype(np.float32))


def test_planc_simulate_on_a_lowered_plan_file(planc, tmp_path, small_ffn):
    """On the small ffn.json of tests/conftest.py: 128 tokens, 256 model, 768 hidden."""
    plan = tmp_path / "ffn.plan.json"
    assert planc(small_ffn, "-t", "tt", "--grid", "4x4", "-o", plan).code == 0
    assert isinstance(json.loads(plan.read_text()), list)  # six kernels: a list of plans
    result = planc("simulate", plan, "--json")
    assert result.code == 0
    report = result.json()
    assert report["ok"] and report["format"] == "tt"
    # 32x32 tiles: [128, 768] for the two up projections, the sigmoid and the two muls, and
    # [128, 256] for the down projection.
    assert len(report["kernels"]) == 6 and report["tiles"] == 3 * 96 + 96 * 2 + 32
    assert report["max_abs_error"] < 0.05
    assert report["device_bytes"] >= report["l1_bytes"] > 0
