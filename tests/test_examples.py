"""The shipped examples are what examples/build_examples.py makes, and they all run."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from dialects.locations import verify_module
from frontends.ark_model import import_document
from ground.json_reader import load_json_file
from targets.ark.model_interpreter import run_model
from tests.conftest import EXAMPLES

spec = importlib.util.spec_from_file_location("build_examples", EXAMPLES / "build_examples.py")
build_examples = importlib.util.module_from_spec(spec)
spec.loader.exec_module(build_examples)


@pytest.mark.parametrize("name", sorted(build_examples.EXAMPLES))
def test_committed_example_is_up_to_date(name):
    assert (EXAMPLES / name).read_text() == build_examples.EXAMPLES[name]()


@pytest.mark.parametrize("name", ["ffn.json", "attention.json"])
def test_compute_examples_run_to_finite_outputs(name):
    module = import_document(load_json_file(EXAMPLES / name))
    verify_module(module)
    run = run_model(module)
    assert run.outputs
    for tensor_id in run.outputs:
        assert np.isfinite(run.tensors[tensor_id]).all()


def test_attention_matches_a_direct_numpy_attention():
    module = import_document(load_json_file(EXAMPLES / "attention.json"))
    run = run_model(module)
    x, norm_w, wq, wk, wv, wo, rope = (run.inputs[i].astype(np.float64) for i in range(7))
    h = x * (1 / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6)) * norm_w

    def heads(t, rotate):
        t = t.reshape(1, 128, 4, 128)
        if rotate:
            z = (t[..., 0::2] + 1j * t[..., 1::2]) * (rope[..., 0::2] + 1j * rope[..., 1::2])
            t = np.stack([z.real, z.imag], -1).reshape(t.shape)
        return t.transpose(0, 2, 1, 3)

    q, k, v = heads(h @ wq.T, True), heads(h @ wk.T, True), heads(h @ wv.T, False)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(128)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    expected = x + (p @ v).transpose(0, 2, 1, 3).reshape(1, 128, 512) @ wo.T
    (out,) = run.outputs
    np.testing.assert_allclose(run.tensors[out], expected, rtol=2e-2, atol=2e-2)


def test_two_rank_example_pairs_its_tags():
    rank0 = load_json_file(EXAMPLES / "sendrecv_rank0.json").value
    rank1 = load_json_file(EXAMPLES / "sendrecv_rank1.json").value
    sends = {tuple(tag) for node in rank0["Nodes"] for t in node["Op"]["ReadTensors"]
             for tag in t["Buffer"]["SendTags"]}
    recvs = {tuple(tag) for node in rank1["Nodes"] for t in node["Op"]["WriteTensors"]
             for tag in t["Buffer"]["RecvTags"]}
    # Rank 0 sends (to 1, tag); rank 1 receives (from 0, the same tag).
    assert {(r, tag) for r, tag in sends} == {(1, tag) for _, tag in recvs}
    assert {r for r, _ in recvs} == {0}


def test_ark_compress_removes_the_view_nodes_and_keeps_the_numbers():
    """attention_nodes.json is attention.json as ARK's Python API writes it before
    `Model::compress()`: every reshape a virtual node. `ark-compress` removes exactly those,
    and the model computes the same numbers before and after (and as attention.json)."""
    from compiler.pipeline import run_pipeline

    module = import_document(load_json_file(EXAMPLES / "attention_nodes.json"))
    model = module.ops.first
    virtual = [op for op in model.operators() if op.is_virtual]
    before = len(list(model.operators()))
    assert len(virtual) == 4
    reference = run_model(module)
    run_pipeline(module, "ark-compress")
    assert len(list(module.ops.first.operators())) == before - len(virtual)
    compressed = run_model(module)
    plain = run_model(import_document(load_json_file(EXAMPLES / "attention.json")))
    for run in (compressed, plain):
        (out,) = run.outputs
        np.testing.assert_array_equal(run.tensors[out], reference.tensors[out])
