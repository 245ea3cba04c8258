"""ONNX models through every target: a transformer block built with onnx.helper (ARK plans,
TT plans and the CPU program, each equal to ONNX's own reference), and the light networks
that ship with the onnx package on Gemini meshes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from backends.ark_plan import model_pipeline, single_plan  # noqa: E402
from compiler.pipeline import run_pipeline  # noqa: E402
from dialects import dnn  # noqa: E402
from frontends.onnx import import_model  # noqa: E402
from targets.ark.model_interpreter import run_model  # noqa: E402

SEQ, HIDDEN, HEADS, FFN = 16, 64, 2, 128
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"


def transformer_block(elem: int) -> onnx.ModelProto:
    """LayerNorm -> Q, K, V projections -> per-head scaled dot-product attention -> output
    projection + residual -> LayerNorm -> Gelu MLP + residual."""
    np_type = helper.tensor_dtype_to_np_dtype(elem)
    rng = np.random.default_rng(0)
    head = HIDDEN // HEADS
    weights = {}

    def weight(name, *shape, scale=None):
        scale = scale or 1 / np.sqrt(shape[0])
        weights[name] = numpy_helper.from_array(
            (rng.uniform(-1, 1, shape) * scale).astype(np_type), name)
        return name

    def const(name, values, dtype=np.int64):
        weights[name] = numpy_helper.from_array(np.array(values, dtype=dtype), name)
        return name

    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", weight("g1", HIDDEN, scale=1.0), weight("b1", HIDDEN)],
          ["h"], axis=-1, epsilon=1e-5),
        *[n("MatMul", ["h", weight(f"w{p}", HIDDEN, HIDDEN)], [p]) for p in "qkv"],
        *[n("Reshape", [p, const("heads", [1, SEQ, HEADS, head])], [f"{p}4"]) for p in "qkv"],
        n("Transpose", ["q4"], ["qh"], perm=[0, 2, 1, 3]),
        n("Transpose", ["k4"], ["kt"], perm=[0, 2, 3, 1]),
        n("Transpose", ["v4"], ["vh"], perm=[0, 2, 1, 3]),
        n("MatMul", ["qh", "kt"], ["s"]),
        n("Mul", ["s", const("scale", np.float32(1 / np.sqrt(head)).astype(np_type),
                            np_type)], ["ss"]),
        n("Softmax", ["ss"], ["p"], axis=-1),
        n("MatMul", ["p", "vh"], ["ctx"]),
        n("Transpose", ["ctx"], ["ct"], perm=[0, 2, 1, 3]),
        n("Reshape", ["ct", const("merge", [1, SEQ, HIDDEN])], ["c"]),
        n("MatMul", ["c", weight("wo", HIDDEN, HIDDEN)], ["o"]),
        n("Add", ["x", "o"], ["r1"]),
        n("LayerNormalization", ["r1", weight("g2", HIDDEN, scale=1.0), weight("b2", HIDDEN)],
          ["h2"], axis=-1, epsilon=1e-5),
        n("MatMul", ["h2", weight("w1", HIDDEN, FFN)], ["u"]),
        n("Gelu", ["u"], ["a"], approximate="tanh"),
        n("MatMul", ["a", weight("w2", FFN, HIDDEN)], ["d"]),
        n("Add", ["r1", "d"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", elem, [1, SEQ, HIDDEN])],
        [helper.make_tensor_value_info("y", elem, [1, SEQ, HIDDEN])],
        initializer=list(weights.values()))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])


@pytest.fixture(scope="module", params=[TensorProto.FLOAT, TensorProto.FLOAT16],
                ids=["fp32", "fp16"])
def block(request):
    model = transformer_block(request.param)
    x = np.random.default_rng(1).uniform(-1, 1, (1, SEQ, HIDDEN)).astype(
        helper.tensor_dtype_to_np_dtype(request.param))
    expected = ReferenceEvaluator(model).run(None, {"x": x})[0].astype(np.float64)
    tolerance = 2e-2 if request.param == TensorProto.FLOAT16 else 1e-4
    return model, x, expected, tolerance


def imported_run(model, x):
    imp = import_model(model)
    given = dict(imp.values)
    given[imp.inputs["x"]] = x
    return imp, run_model(imp.module, given)


def test_the_interpreter_matches_onnx(block):
    model, x, expected, tolerance = block
    imp, run = imported_run(model, x)
    np.testing.assert_allclose(run.tensors[imp.outputs["y"]], expected, rtol=tolerance,
                               atol=tolerance)


@pytest.mark.parametrize("arch", ["a100", "mi300x"])
def test_ark_plans_compute_what_onnx_computes(block, arch):
    from targets.ark.plan_simulator import simulate

    model, x, expected, tolerance = block
    imp, run = imported_run(model, x)
    run_pipeline(imp.module, model_pipeline(arch))
    report = simulate(single_plan(imp.module), model=run)
    assert report["ok"], report.get("problems")
    np.testing.assert_allclose(run.tensors[imp.outputs["y"]], expected, rtol=tolerance,
                               atol=tolerance)


def test_tt_plans_compute_what_onnx_computes(block):
    from backends.tt_plan import lowering_pipeline
    from dialects import tt
    from targets.tt.simulator import simulate_against

    model, x, expected, tolerance = block
    imp, run = imported_run(model, x)
    options = type("Options", (), {"arch": None, "grid": "2x2", "partition": "row_major"})()
    run_pipeline(imp.module, lowering_pipeline(options))
    plans = [p for op in imp.module.ops if isinstance(op, tt.PlansOp) for p in op.plans()]
    report = simulate_against(plans, run)
    assert report.ok, report.json()


@pytest.mark.slow
def test_the_cpu_program_computes_what_onnx_computes(block, tmp_path):
    from tests.codegen import programs
    from tests.sched.test_cpu_programs import program_inputs

    if programs.CXX is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    model, x, expected, tolerance = block
    imp, run = imported_run(model, x)
    run_pipeline(imp.module, model_pipeline("a100"))
    directory = programs.emit(imp.module, "cpu", tmp_path / "program")
    program = programs.build_cpu(directory, programs.CPU_FLAGS)
    listing = programs.manifest(directory)
    programs.write_inputs(tmp_path / "in", listing["inputs"],
                          program_inputs(listing, run, single_plan(imp.module)))
    programs.run_checked([program, tmp_path / "in", tmp_path / "out"])
    outputs = programs.read_outputs(tmp_path / "out", listing["outputs"])
    programs.compare(outputs, run)


# -- the light networks on Gemini -------------------------------------------------------------

SCHEDULED = ["resnet50", "bvlc_alexnet", "zfnet512", "vgg19", "squeezenet", "densenet121",
             "inception_v1", "inception_v2", "shufflenet"]

FULL_MATRIX = os.environ.get("PLANC_FULL_NETWORKS") == "1"
"""All nine networks on 1x1 and 2x2, and the big tile-by-tile checks, cost about 200 CPU s
(DenseNet-121 on 2x2 alone about 40): more than the whole suite's budget. By default one
schedule per network kind runs; `PLANC_FULL_NETWORKS=1` runs the matrix, and
bench/onnx_gemini.py schedules, checks and simulates every network on every mesh."""


def _sampled(cases, quick):
    return [pytest.param(*case, marks=() if FULL_MATRIX or case in quick else pytest.mark.skip(
        reason="part of the full network matrix: set PLANC_FULL_NETWORKS=1 (about 200 CPU s)"))
        for case in cases]


# One case per thing the networks add: residual adds (ResNet-50), LRN and large dense layers
# (AlexNet), concats of branches (Inception v1), concats across meshes (SqueezeNet), grouped
# convolutions and the channel shuffle (ShuffleNet), streamed weight slices (ZFNet-512).
QUICK_SCHEDULES = {("resnet50", "1x1"), ("bvlc_alexnet", "1x1"), ("inception_v1", "1x1"),
                   ("squeezenet", "2x2"), ("shufflenet", "2x2"), ("zfnet512", "2x2")}


@pytest.mark.parametrize("name", SCHEDULED)
def test_light_networks_import_as_layer_graphs(name):
    """Every light network imports into a verified layer graph (the cheap half of the matrix
    below, run on all nine)."""
    from dialects.locations import verify_module

    imp = import_model(onnx.load(LIGHT / f"light_{name}.onnx"))
    verify_module(imp.module)
    assert len(dnn.find_graph(imp.module).layers) >= 8


@pytest.mark.slow
@pytest.mark.parametrize("name,mesh", _sampled(
    [(n, m) for n in SCHEDULED for m in ("1x1", "2x2")], QUICK_SCHEDULES))
def test_light_networks_schedule_on_gemini(planc, tmp_path, name, mesh):
    out = tmp_path / f"{name}.json"
    result = planc(LIGHT / f"light_{name}.onnx", "-t", "gemini", "--mesh", mesh, "-o", out)
    assert result.code == 0, result.err
    assert planc("check", out, "--strict").code == 0
    assert planc("simulate", out).code == 0


@pytest.mark.slow
@pytest.mark.parametrize("name,mesh", _sampled(
    [("bvlc_alexnet", "1x1"), ("bvlc_alexnet", "2x2"), ("shufflenet", "2x2"),
     ("zfnet512", "2x2"), ("vgg19", "1x1")], {("bvlc_alexnet", "2x2"), ("shufflenet", "2x2")}))
def test_light_networks_compute_tile_by_tile(name, mesh):
    """LRN, grouped convolutions and the channel shuffle, a 4096x18432 dense layer streamed in
    input-channel slices and VGG's 224x224x64 maps tiled through L2: every workload computes
    its box from only the blocks its transfers deliver (`planc simulate` with the network
    known)."""
    import argparse

    from backends.gemini import schedule_pipeline
    from targets.gemini.simulator import check_tiles

    imp = import_model(onnx.load(LIGHT / f"light_{name}.onnx"))
    run_pipeline(imp.module, schedule_pipeline(argparse.Namespace(
        mesh=mesh, batch=None, buffer_size=None, dram_bw=None)))
    check = check_tiles(imp.module)
    assert check.ok, check.problem


def small_matmul_model() -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [weight])
    return helper.make_model(graph)


def test_weights_kept_as_external_data_are_read(tmp_path):
    """planc reads ONNX files itself (bounded) and then, as `onnx.load` does, the weights a
    model keeps in a file beside it."""
    from frontends.onnx_model import load

    path = tmp_path / "m.onnx"
    onnx.save_model(small_matmul_model(), path, save_as_external_data=True,
                    location="weights.bin", size_threshold=0)
    assert (tmp_path / "weights.bin").stat().st_size == 48
    loaded = numpy_helper.to_array(load(str(path)).graph.initializer[0])
    assert loaded.tolist() == np.arange(12, dtype=np.float32).reshape(3, 4).tolist()


def test_an_onnx_model_from_a_pipe(planc, tmp_path):
    import threading

    fifo = tmp_path / "m.onnx"
    os.mkfifo(fifo)
    data = small_matmul_model().SerializeToString()
    writer = threading.Thread(target=lambda: fifo.write_bytes(data), daemon=True)
    writer.start()
    result = planc(fifo, "-t", "ark")
    writer.join(10)
    assert result.code == 0, result.err
    assert '"TaskInfos"' in result.out


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_an_endless_onnx_input_is_refused(planc, tmp_path):
    """`onnx.load` read an endless input until memory ran out."""
    link = tmp_path / "zero.onnx"
    link.symlink_to("/dev/zero")
    result = planc(link, "-t", "ark")
    assert result.code == 1 and result.err.count("\n") == 1, result.err
    assert "bytes planc reads from a pipe or device" in result.err


def test_alexnet_at_batch_4_schedules_on_gemini(planc, tmp_path):
    """Its 38 MB dense layer, cut into 4 batch groups, kept every weight slice in L2 and the
    schedule was refused; as one streamed group it fits, checks and simulates."""
    out = tmp_path / "alexnet.json"
    r = planc(LIGHT / "light_bvlc_alexnet.onnx", "-t", "gemini", "--batch", "4", "-o", out)
    assert r.code == 0, r.err
    assert planc("check", "--strict", out).code == 0
    assert planc("simulate", out).code == 0
