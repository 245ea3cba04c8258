"""Real exports of mainstream architectures, written by torch.onnx's TorchScript and dynamo
exporters (tests/onnx/exports, made by make_exports.py beside them): tiny GPT-2, BERT, Llama,
DistilBERT, Qwen2 and ViT, and two small CNNs (ResNet basic blocks, MobileNetV2/V3 blocks).

Each goes through every target that holds it: ARK plans for a100, h100 and mi300x, and
Tenstorrent plans for the transformers; ARK plans and Gemini schedules on a 1x1 and a 2x2 mesh
for the CNNs. `planc check --strict` passes on every product, and `planc run` of the model and
of every ARK and TT product on the same random inputs gives what onnxruntime gives, within fp32
tolerance; a Gemini schedule keeps no operators to run, so its layer graph (what was
scheduled, computed by the layer interpreter) is compared instead. onnxruntime is the oracle
(the test extra has it)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle (the test extra)")

EXPORTS = Path(__file__).with_name("exports")
MODELS = sorted(p.stem for p in EXPORTS.glob("*.onnx"))
CNNS = {"resnet", "mobilenet"}
TARGETS = {"a100": ["-t", "ark", "--arch", "a100"], "h100": ["-t", "ark", "--arch", "h100"],
           "mi300x": ["-t", "ark", "--arch", "mi300x"], "tt": ["-t", "tt"],
           "gemini-1x1": ["-t", "gemini", "--mesh", "1x1"],
           "gemini-2x2": ["-t", "gemini", "--mesh", "2x2"]}
CNN_TARGETS = ("a100", "h100", "mi300x", "gemini-1x1", "gemini-2x2")
TRANSFORMER_TARGETS = ("a100", "h100", "mi300x", "tt")
QUICK = {("gpt2_dynamo", "a100"), ("bert_torchscript", "tt"), ("resnet_dynamo", "a100"),
         ("mobilenet_torchscript", "gemini-2x2")}
"""ARK, TT and Gemini products in the quick run (5 s each); CI runs a covering set of the
matrix (see `covering`)."""


def targets_of(name: str) -> tuple[str, ...]:
    return CNN_TARGETS if name.split("_")[0] in CNNS else TRANSFORMER_TARGETS
RTOL, ATOL = 1e-4, 1e-5


def inputs_for(model) -> dict[str, np.ndarray]:
    """Random token ids or images, and an attention mask whose last two positions are
    padding."""
    rng = np.random.default_rng(7)
    feeds = {}
    for value in model.graph.input:
        shape = [d.dim_value for d in value.type.tensor_type.shape.dim]
        if value.type.tensor_type.elem_type == onnx.TensorProto.FLOAT:
            feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
        elif value.name == "attention_mask":
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
    assert len(MODELS) == 16
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


def covering() -> set[tuple[str, str]]:
    """A covering set of the matrix: every export on one ARK device (the three in turn),
    every other transformer export on TT, every CNN export on one Gemini mesh (the two in
    turn), and each target kind several times. The whole matrix (68 products, many CPU
    minutes: MobileNet's ARK plan alone runs 18,000 tiles) is what PLANC_EXPORT_MATRIX=1
    adds; it kept the suite over its 5 minutes."""
    chosen = set(QUICK)
    gpus, meshes = ("a100", "h100", "mi300x"), ("gemini-1x1", "gemini-2x2")
    cnns = [n for n in MODELS if n.split("_")[0] in CNNS]
    transformers = [n for n in MODELS if n not in cnns]
    for i, name in enumerate(transformers):
        chosen.add((name, gpus[i % 3]))
        if i % 2:
            chosen.add((name, "tt"))
    on_gpu = 0
    for i, name in enumerate(cnns):
        # A CNN's ARK plan runs for 11-22 CPU s (im2col tiles): one per export at most
        # (QUICK's ResNet on a100 counts), one of MobileNet's (the other goes to Gemini
        # twice), the others on the other two GPUs in turn.
        if any((name, gpu) in QUICK for gpu in gpus) or name.startswith("mobilenet") and i % 2:
            chosen.add((name, meshes[i % 2]))
        else:
            on_gpu += 1
            chosen.add((name, gpus[on_gpu % 3]))
        chosen.add((name, meshes[(i + 1) % 2]))
    return chosen


def _product_param(name: str, target: str):
    if (name, target) in QUICK:
        return pytest.param(name, target)
    if (name, target) in covering():
        return pytest.param(name, target, marks=pytest.mark.slow)
    return pytest.param(name, target, marks=[pytest.mark.slow, pytest.mark.skipif(
        not os.environ.get("PLANC_EXPORT_MATRIX"),
        reason="outside the covering set; PLANC_EXPORT_MATRIX=1 runs the whole matrix")])


@pytest.mark.parametrize("name,target", [_product_param(n, t) for n in MODELS
                                         for t in targets_of(n)])
def test_every_product_checks_and_computes_what_onnxruntime_computes(planc, tmp_path, name,
                                                                     target, oracle):
    feeds, expected = oracle(name)
    path = EXPORTS / f"{name}.onnx"
    product = tmp_path / f"{name}.{target}.json"
    result = planc(path, *TARGETS[target], "-o", product, "-q")
    assert result.code == 0, result.err
    check = planc("check", "--strict", product)
    assert check.code == 0, check.err + check.out
    if target.startswith("gemini"):
        _same(_layer_graph_outputs(path, feeds), expected)
    else:
        _same(_run(planc, tmp_path, product, feeds, path), expected)


def _layer_graph_outputs(path, feeds):
    """What the Gemini layer graph that was scheduled computes (the layer interpreter, in
    float: the network before Gemini's int8 quantization)."""
    from dialects import dnn
    from frontends.onnx import import_model
    from frontends.onnx_model import load
    from targets.gemini.dnn_interpreter import run_graph

    imported = import_model(load(str(path)), str(path), wants=("gemini-layers",))
    graph = dnn.find_graph(imported.module)
    given = dict(imported.values)
    given.update({imported.inputs[name]: value for name, value in feeds.items()})
    values = run_graph(graph, given=given)
    by_name = {out.output_name.data: values[out.value] for out in graph.outputs}
    return {name: np.asarray(by_name[name], np.float32) for name in imported.outputs}
