"""Real exports of mainstream architectures: tiny GPT-2, BERT and Llama written by torch.onnx's
TorchScript and dynamo exporters (tests/onnx/exports, made by make_exports.py beside them).

Each goes through every target that holds a transformer (ARK plans for a100, h100 and mi300x,
Tenstorrent plans): `planc check --strict` passes on every product, and `planc run` of the
model and of every product on the same random inputs gives what onnxruntime gives, within fp32
tolerance. onnxruntime is the oracle (the test extra has it)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle (the test extra)")

EXPORTS = Path(__file__).with_name("exports")
MODELS = sorted(p.stem for p in EXPORTS.glob("*.onnx"))
TARGETS = {"a100": ["-t", "ark", "--arch", "a100"], "h100": ["-t", "ark", "--arch", "h100"],
           "mi300x": ["-t", "ark", "--arch", "mi300x"], "tt": ["-t", "tt"]}
QUICK = {("gpt2_dynamo", "a100"), ("bert_torchscript", "tt")}
"""An ARK plan and a TT plan in the quick run (5 s each); CI runs the matrix."""
RTOL, ATOL = 1e-4, 1e-5


def inputs_for(model) -> dict[str, np.ndarray]:
    """Random token ids, and an attention mask whose last two positions are padding."""
    rng = np.random.default_rng(7)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.name == "attention_mask":
            mask = np.ones(shape, np.int64)
            mask[..., -2:] = 0
            feeds[value.name] = mask
        else:
            feeds[value.name] = rng.integers(0, 128, shape).astype(np.int64)
    return feeds


@pytest.fixture(scope="module")
def oracle():
    cache = {}

    def expected(name):
        if name not in cache:
            model = onnx.load(EXPORTS / f"{name}.onnx")
            feeds = inputs_for(model)
            session = ort.InferenceSession(model.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
            cache[name] = feeds, dict(zip([o.name for o in model.graph.output],
                                          session.run(None, feeds), strict=True))
        return cache[name]
    return expected


def test_the_exports_are_small_and_stripped():
    assert len(MODELS) == 6
    for name in MODELS:
        path = EXPORTS / f"{name}.onnx"
        assert path.stat().st_size < 300_000, name
        model = onnx.load(path)
        assert not model.doc_string and not model.metadata_props
        assert not any(node.doc_string for node in model.graph.node)


def _run(planc, tmp_path, document, feeds, weights):
    values = tmp_path / "in.npz"
    np.savez(values, **feeds)
    out = tmp_path / "out.npz"
    result = planc("run", document, "--inputs", values, "--weights", weights, "-o", out)
    assert result.code == 0, result.err
    with np.load(out) as data:
        return {k: data[k] for k in data.files}


def _same(got, expected):
    assert list(got) == list(expected)
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, rtol=RTOL, atol=ATOL, err_msg=name)


@pytest.mark.parametrize("name", MODELS)
def test_planc_runs_the_model_as_onnxruntime_does(planc, tmp_path, name, oracle):
    feeds, expected = oracle(name)
    path = EXPORTS / f"{name}.onnx"
    _same(_run(planc, tmp_path, path, feeds, path), expected)


@pytest.mark.parametrize("name,target", [
    pytest.param(n, t, marks=() if (n, t) in QUICK else pytest.mark.slow)
    for n in MODELS for t in TARGETS])
def test_every_product_checks_and_computes_what_onnxruntime_computes(planc, tmp_path, name,
                                                                     target, oracle):
    feeds, expected = oracle(name)
    path = EXPORTS / f"{name}.onnx"
    product = tmp_path / f"{name}.{target}.json"
    result = planc(path, *TARGETS[target], "-o", product, "-q")
    assert result.code == 0, result.err
    check = planc("check", "--strict", product)
    assert check.code == 0, check.err + check.out
    _same(_run(planc, tmp_path, product, feeds, path), expected)
