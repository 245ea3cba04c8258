"""Operators ARK lacks, decomposed at import, against onnxruntime; the refusals name the node;
`-v` reports each decomposition; `planc run` names its inputs as the graph does."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from frontends.onnx import import_model  # noqa: E402
from ground.diagnostics import PlancError  # noqa: E402
from tests.onnx.oracle import assert_same, single_node_model  # noqa: E402

RNG = np.random.default_rng(5)


def floats(*shape):
    return RNG.uniform(-3, 3, shape).astype(np.float32)


def graph_model(nodes, inputs, outputs, initializers=(), opset=18):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("op", ["Erf", "Tanh", "Reciprocal", "Abs"])
def test_math_decompositions(op):
    x = floats(4, 8)
    if op == "Reciprocal":
        x = x + np.sign(x) * 0.5
    assert_same(single_node_model(op, {"x": x}, ["y"]), {"x": x}, rtol=1e-5, atol=2e-7)


def test_the_exact_gelu_is_the_erf_form():
    x = floats(3, 16)
    assert_same(single_node_model("Gelu", {"x": x}, ["y"]), {"x": x}, atol=5e-7)


@pytest.mark.parametrize("power", [3.0, -2.0, 1.5, 0.0, -0.5])
def test_pow_with_integer_and_half_exponents(power):
    x = np.abs(floats(2, 5)) + 0.25
    model = single_node_model("Pow", {"x": x}, ["y"], initializers={
        "p": np.array(power, np.float32)})
    assert_same(model, {"x": x}, rtol=1e-5)


def test_pow_with_another_exponent_is_refused_naming_the_node():
    model = single_node_model("Pow", {"x": floats(2)}, ["y"],
                              initializers={"p": np.array(0.3, np.float32)})
    with pytest.raises(PlancError, match=r"'y' \(Pow\): ARK has no power or logarithm"):
        import_model(model)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_integer_comparisons_are_exact(op):
    a = RNG.integers(-3, 3, (4, 5)).astype(np.int64)
    b = RNG.integers(-3, 3, (4, 5)).astype(np.int64)
    assert_same(single_node_model(op, {"a": a, "b": b}, ["y"]), {"a": a, "b": b})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_float_comparisons_are_exact(op):
    """Equal values, neighbours one ulp apart, subnormals, zeros of both signs, the extremes
    (planc refused float comparisons)."""
    tiny = np.float32(1e-45)
    a = np.array([1.0, 1.0, 0.0, -0.0, tiny, -tiny, 3e38, -3e38, 2.5, -7.0], np.float32)
    b = np.array([1.0, np.nextafter(np.float32(1), np.float32(2)), -0.0, 0.0, 0.0, 0.0, -3e38,
                  3e38, 2.5, 7.0], np.float32)
    a, b = np.concatenate([a, b, floats(20)]), np.concatenate([b, a, floats(20)])
    model = single_node_model(op, {"a": a, "b": b}, ["y"])
    assert_same(model, {"a": a, "b": b})
    from tests.onnx.oracle import planc_outputs  # a second way: numpy's comparison

    expected = getattr(np, {"Equal": "equal", "Less": "less", "Greater": "greater",
                            "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal"}[op])
    np.testing.assert_array_equal(planc_outputs(model, {"a": a, "b": b})["y"], expected(a, b))


def test_a_float_compared_with_a_constant():
    x = floats(4, 5)
    model = single_node_model("Less", {"x": x}, ["y"], initializers={"c": np.array(0.5,
                                                                                    np.float32)})
    assert_same(model, {"x": x})


def test_a_mask_of_minus_infinity_from_a_runtime_condition_is_exact():
    """Where(c, 0, -inf) is 1 - 1/(1 - c'): 0 x inf would be NaN."""
    mask = np.array([[1, 1, 0, 1]], np.int64)
    model = graph_model(
        [helper.make_node("Cast", ["m"], ["c"], to=TensorProto.BOOL),
         helper.make_node("Where", ["c", "zero", "ninf"], ["bias"]),
         helper.make_node("Add", ["x", "bias"], ["s"]),
         helper.make_node("Softmax", ["s"], ["y"], axis=-1)],
        [("m", TensorProto.INT64, [1, 4]), ("x", TensorProto.FLOAT, [3, 4])], ["bias", "y"],
        [("zero", np.array(0, np.float32)), ("ninf", np.array(-np.inf, np.float32))])
    assert_same(model, {"m": mask, "x": floats(3, 4)})


def _safe_softmax(shape, axis=-1, opset=18):
    return graph_model(
        [helper.make_node("Softmax", ["x"], ["s"], axis=axis),
         helper.make_node("IsNaN", ["s"], ["n"]),
         helper.make_node("Where", ["n", "zero", "s"], ["y"])],
        [("x", TensorProto.FLOAT, shape)], ["y"], [("zero", np.array(0, np.float32))],
        opset=opset)


def test_torchs_safe_softmax_is_the_softmax():
    assert_same(_safe_softmax([2, 5]), {"x": floats(2, 5)})


@pytest.mark.parametrize("axis,opset", [(-1, 18), (1, 18), (1, 11)])
def test_torchs_safe_softmax_gives_0_on_rows_that_are_all_minus_infinity(axis, opset):
    """Every key masked: onnxruntime's Where(IsNaN(s), 0, s) is 0 there; planc gave NaN.
    Rows of large finite scores (-1e30, 1e4, the lowest float of masks) stay exact."""
    x = floats(2, 3, 5)
    x[0, 1, :] = -np.inf
    x[1, :, 2] = -np.inf
    x[1, 0, :] = [-1e30, -1e30 + 1e24, -np.inf, -1e30, -1e30]
    x[0, 2, :] = [1e4, 1e4 - 1, 0, -np.inf, 1e4]
    x[1, 2, :] = np.finfo(np.float32).min
    model = _safe_softmax([2, 3, 5], axis, opset)
    assert_same(model, {"x": x})
    from tests.onnx.oracle import planc_outputs

    if opset >= 13:   # a second way: numpy's softmax, 0 where undefined
        with np.errstate(invalid="ignore"):
            expected = np.exp(x - x.max(axis=axis, keepdims=True))
            expected = np.nan_to_num(expected / expected.sum(axis=axis, keepdims=True))
        np.testing.assert_allclose(planc_outputs(model, {"x": x})["y"], expected, rtol=1e-6)


def test_isnan_elsewhere_is_refused_naming_its_consumer():
    model = graph_model([helper.make_node("IsNaN", ["x"], ["n"]),
                         helper.make_node("Cast", ["n"], ["y"], to=TensorProto.FLOAT)],
                        [("x", TensorProto.FLOAT, [3])], ["y"])
    with pytest.raises(PlancError, match=r"\(Cast\): its input 'n' is an IsNaN"):
        import_model(model)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_on_any_axis_with_negative_runtime_indices(axis):
    x = floats(4, 5, 6)
    idx = np.array([[-1, 0], [2, -3]], np.int64)
    model = single_node_model("Gather", {"x": x, "i": idx}, ["y"], axis=axis)
    assert_same(model, {"x": x, "i": idx})


def test_gather_elements_and_split_and_tile():
    x = floats(3, 4)
    idx = RNG.integers(-3, 3, (2, 4)).astype(np.int64)
    assert_same(single_node_model("GatherElements", {"x": x, "i": idx}, ["y"], axis=0),
                {"x": x, "i": idx})
    assert_same(single_node_model("Split", {"x": x}, ["a", "b"], axis=1, num_outputs=2),
                {"x": x})
    assert_same(single_node_model("Tile", {"x": x}, ["y"], initializers={
        "r": np.array([2, 3], np.int64)}), {"x": x})


def test_a_rank_5_value_folds_through_a_broadcast_and_reshapes():
    """Grouped-query attention's repeat: [1, 2, 1, 8, 4] expanded to [1, 2, 3, 8, 4] and
    merged to [1, 6, 8, 4]."""
    model = graph_model(
        [helper.make_node("Reshape", ["k", "s5"], ["k5"]),
         helper.make_node("Expand", ["k5", "e"], ["r"]),
         helper.make_node("Relu", ["r"], ["rr"]),
         helper.make_node("Reshape", ["rr", "s4"], ["y"])],
        [("k", TensorProto.FLOAT, [1, 2, 8, 4])], ["y"],
        [("s5", np.array([1, 2, 1, 8, 4], np.int64)), ("e", np.array([1, 2, 3, 8, 4],
                                                                      np.int64)),
         ("s4", np.array([1, 6, 8, 4], np.int64))])
    assert_same(model, {"k": floats(1, 2, 8, 4)})


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_and_rms_normalization_over_trailing_axes(axis):
    x = floats(2, 3, 4)
    scale = floats(*x.shape[axis:]) if axis != -1 else floats(4)
    assert_same(single_node_model("LayerNormalization", {"x": x}, ["y"], axis=axis,
                                  initializers={"g": scale}), {"x": x}, rtol=1e-4, atol=1e-5)
    assert_same(single_node_model("RMSNormalization", {"x": x}, ["y"], opset=23, axis=axis,
                                  initializers={"g": scale}), {"x": x}, rtol=1e-4, atol=1e-5,
                reference=True)


def test_verbose_names_each_decomposition(planc, tmp_path):
    path = tmp_path / "erf.onnx"
    onnx.save(single_node_model("Erf", {"x": floats(2, 3)}, ["y"]), path)
    result = planc(path, "-t", "ark-model", "-o", tmp_path / "m.json", "-v")
    assert result.code == 0, result.err
    assert "ONNX node 'y' (Erf) -> sign(x) erf(|x|)" in result.err


def test_planc_run_refuses_what_it_cannot_feed(planc, tmp_path):
    model = single_node_model("MatMul", {"x": floats(2, 3)}, ["y"],
                              initializers={"w": floats(3, 4)})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    plan = tmp_path / "p.json"
    assert planc(path, "-t", "ark", "--arch", "a100", "-o", plan).code == 0
    values = tmp_path / "in.npz"
    np.savez(values, x=floats(2, 3))
    missing = planc("run", plan, "--inputs", values)
    assert missing.code == 1 and "--weights MODEL.onnx" in missing.err, missing.err
    np.savez(values, z=floats(2, 3))
    unknown = planc("run", path, "--inputs", values)
    assert unknown.code == 1 and "'z' names no tensor" in unknown.err, unknown.err
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    bad = planc("run", path, "--inputs", tmp_path / "bad.npz")
    assert bad.code == 1 and "not a readable .npz" in bad.err, bad.err
    same = planc("run", path, "--inputs", values, "-o", path)
    assert same.code == 1 and "does not write over its input" in same.err


def test_planc_run_of_a_plan_equals_the_model(planc, tmp_path):
    model = single_node_model("MatMul", {"x": floats(2, 3)}, ["y"],
                              initializers={"w": floats(3, 4)})
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    plan = tmp_path / "p.json"
    assert planc(path, "-t", "ark", "--arch", "h100", "-o", plan).code == 0
    x = floats(2, 3)
    np.savez(tmp_path / "in.npz", x=x)
    r = planc("run", plan, "--inputs", tmp_path / "in.npz", "--weights", path, "-o",
              tmp_path / "out.npz")
    assert r.code == 0, r.err
    w = numpy_helper.to_array(model.graph.initializer[0])
    with np.load(tmp_path / "out.npz") as out:
        assert list(out.files) == ["y"]
        np.testing.assert_allclose(out["y"], x @ w, rtol=1e-5)


def test_log_from_square_roots_and_halley_steps():
    """ln over the whole float range, 0 (-inf) and negatives (NaN) as onnxruntime; numpy's
    log agrees (a second way)."""
    x = np.concatenate([np.geomspace(1e-38, 3e38, 61), np.linspace(0.5, 2, 31), [1.0, 0.0, -2.0]])
    x = x.astype(np.float32).reshape(1, -1)
    model = single_node_model("Log", {"x": x}, ["y"])
    assert_same(model, {"x": x}, rtol=1e-6, atol=2e-7)
    from tests.onnx.oracle import planc_outputs

    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_allclose(planc_outputs(model, {"x": x})["y"], np.log(x), rtol=1e-6,
                                   atol=2e-7)


@pytest.mark.parametrize("opset,axis", [(18, -1), (18, 0), (11, 1)])
def test_log_softmax(opset, axis):
    x = floats(3, 4, 5) * 10
    model = single_node_model("LogSoftmax", {"x": x}, ["y"], opset=opset, axis=axis)
    assert_same(model, {"x": x}, rtol=1e-5, atol=1e-5)


def test_softplus():
    x = floats(4, 6) * 30
    assert_same(single_node_model("Softplus", {"x": x}, ["y"]), {"x": x}, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bound", [-np.inf, np.inf])
@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_with_an_infinity_are_exact(op, bound):
    """x == -inf as ONNX's expanded Attention tests a row maximum (a difference would be
    inf - inf = NaN)."""
    x = np.array([-np.inf, np.inf, 0.0, -3.4e38, 3.4e38, 1.0, -1e-45], np.float32)
    model = single_node_model(op, {"x": x}, ["y"], initializers={"c": np.array(bound,
                                                                                np.float32)})
    assert_same(model, {"x": x})
