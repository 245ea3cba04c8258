"""The dnn layer graph: Gemini layer descriptions in and out, and ARK models converted to it."""

from __future__ import annotations

import json

import numpy as np
import pytest

from backends.gemini_layers import emit
from compiler.pipeline import run_pipeline
from dialects import ark, dnn
from dialects.locations import verify_module
from frontends.ark_model import import_document as import_ark
from frontends.gemini_layers import import_document
from ground.json_reader import load_json_file, parse_json
from targets.ark.model_interpreter import run_model
from targets.gemini.dnn_interpreter import run_graph
from tests.conftest import EXAMPLES, corpus_params, write_json
from tests.gemini.fixtures import small_network

LAYERS = [p for p in corpus_params("gemini", "*.json")
          if p.values[0] is None or not p.values[0].name.endswith("_stschedule.json")]


@pytest.mark.parametrize("path", LAYERS)
def test_corpus_layer_description_round_trips_byte_for_byte(path):
    module = import_document(load_json_file(path))
    verify_module(module)
    assert emit(module) == path.read_text()


def test_layers_become_typed_ops():
    module = import_document(parse_json(json.dumps(small_network())))
    graph = dnn.find_graph(module)
    kinds = {layer.name_: type(layer).__name__ for layer in graph.layers}
    assert kinds == {"q": "QuantizeOp", "conv1": "Conv2dOp", "pool": "PoolOp",
                     "conv2": "Conv2dOp", "deq": "QuantizeOp", "add": "EltwiseOp",
                     "conv3": "Conv2dOp", "gap": "PoolOp", "fc": "DenseOp",
                     "fc_reshape": "ReshapeOp"}
    inputs = {op.input_name.data: op.is_constant for op in graph.inputs}
    assert inputs == {"input1": False, "constant_conv1_weight": True,
                      "constant_conv2_weight": True, "constant_conv3_weight": True,
                      "gap_constant1": True, "constant_fc_weight": True}
    assert [o.output_name.data for o in graph.outputs] == ["output1"]
    assert json.loads(emit(module)) == small_network()


def _mutate(doc, layer, key, value):
    doc[layer][key] = value
    return doc


BAD_DESCRIPTIONS = [
    (lambda d: _mutate(d, "conv1", "kernel_size", [5, 5]),
     "$.conv1: weights [16, 8, 3, 3] do not match 8 input channels and kernel [5, 5]"),
    (lambda d: _mutate(d, "pool", "output_shape", [[1, 16, 9, 8]]),
     "$.pool: output shape [1, 16, 9, 8] should be [1, 16, 8, 8] (pooling arithmetic)"),
    (lambda d: _mutate(d, "conv2", "input_shape", [[1, 16, 8, 9], [16, 16, 3, 3]]),
     "$.conv2.input_shape[0]: input 0 from layer 'pool' is described as [1, 16, 8, 9] int8, "
     "but 'pool' produces [1, 16, 8, 8] int8"),
    (lambda d: _mutate(d, "pool", "next_layer", ["conv2"]),
     "$.pool.next_layer: does not list 'deq', which takes 'pool' as previous_layer"),
    (lambda d: _mutate(d, "q", "previous_layer", ["add"]),
     "$.q.previous_layer: layer 'q' depends on itself (a cycle through previous_layer)"),
    (lambda d: _mutate(d, "add", "input_dtype", ["float16", "float8"]),
     "$.add.input_dtype[1]: unknown element type 'float8' (known: int8, uint8, int16, float16, "
     "bfloat16, int32, float32, uint32)"),
    (lambda d: _mutate(d, "fc", "output_shape", [[1, 10, 1, 1], [1, 10]]),
     "$.fc.output_shape: expected one output shape, got 2"),
    (lambda d: _mutate(d, "conv3", "stride", [2, 0]),
     "$.conv3: window and stride must be >= 1 and padding >= 0"),
    (lambda d: _mutate(d, "gap", "operation", 7),
     "$.gap.operation: expected a string, got an integer (7)"),
]


@pytest.mark.parametrize("mutate,message", BAD_DESCRIPTIONS)
def test_bad_layer_descriptions_are_reported(planc, tmp_path, mutate, message):
    src = write_json(tmp_path / "net.json", mutate(small_network()))
    r = planc("check", src)
    assert r.code == 1 and r.err.count("\n") == 1, r.err
    assert r.err.startswith(f"planc: error: {src}: {message} [")     # then the rule's name


def _fmap(values: np.ndarray) -> np.ndarray:
    shape = list(values.shape)
    lead = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return values.reshape(lead, shape[-2], shape[-1]).transpose(0, 2, 1)


@pytest.mark.parametrize("name", ["ffn.json", "attention.json"])
def test_ark_conversion_computes_what_ark_computes(name):
    """Same inputs and weights through ARK's reference and the converted layer graph."""
    module = import_ark(load_json_file(EXAMPLES / name))
    model = next(iter(module.ops))
    run = run_model(model, seed=3)
    matmuls = {op.read_tensors[1].type.tensor_id: op for op in model.operators()
               if isinstance(op, ark.MatmulOp)}
    outputs = {f"output_{op.label.data}": op.result_tensors[0].type.tensor_id
               for op in model.operators() if op.result_tensors
               and op.result_tensors[0].type.tensor_id in run.outputs}
    run_pipeline(module, "dnn-from-ark")
    graph = dnn.find_graph(module)
    given = {}
    for op in graph.inputs:
        tensor_id = int(op.input_name.data.removeprefix("tensor").split("_")[0])
        value = np.asarray(run.inputs[tensor_id], dtype=np.float64)
        if op.is_constant:      # weights [N out, K in] from ARK's `other`
            value = value if matmuls[tensor_id].trans_other else value.T
        else:
            value = _fmap(value)
        given[op.input_name.data] = value
    values = run_graph(graph, given=given)
    for out in graph.outputs:
        want = _fmap(np.asarray(run.tensors[outputs[out.output_name.data]], np.float64))
        got = values[out.value].reshape(want.shape[0], want.shape[1], want.shape[2])
        assert np.allclose(got, want, rtol=2e-2, atol=2e-2), out.output_name.data
