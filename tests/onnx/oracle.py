"""Run an ONNX model with planc (import, then the ARK reference interpreter) and with an
oracle: onnxruntime where it is installed (the test extra has it), else onnx's reference
evaluator."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

from frontends.onnx import import_model
from targets.ark.model_interpreter import run_model


def planc_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The graph's outputs by name, as planc's ARK model computes them (a CNN too: as the ARK
    model that `-t ark` plans)."""
    imp = import_model(model, wants=("ark-model",))
    given = dict(imp.values)
    for name, value in feeds.items():
        given[imp.inputs[name]] = value
    run = run_model(imp.module, given)
    return {name: run.tensors[tid] for name, tid in imp.outputs.items()}


def oracle_outputs(model: onnx.ModelProto, feeds: dict[str, np.ndarray],
                   *, reference: bool = False) -> dict[str, np.ndarray]:
    names = [o.name for o in model.graph.output]
    if not reference:
        try:
            import onnxruntime as ort
        except ImportError:
            reference = True
    if reference:
        from onnx.reference import ReferenceEvaluator

        values = ReferenceEvaluator(model).run(None, feeds)
    else:
        session = ort.InferenceSession(model.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
        values = session.run(None, feeds)
    return dict(zip(names, values, strict=True))


def single_node_model(op_type: str, inputs: dict[str, np.ndarray | tuple], outputs: list[str],
                      *, opset: int = 20, initializers: dict[str, np.ndarray] | None = None,
                      **attrs) -> onnx.ModelProto:
    """A model of one node: `inputs` maps a graph input to an example array (its type and
    shape), `initializers` are constant inputs."""
    initializers = initializers or {}
    node = helper.make_node(op_type, [*inputs, *initializers], outputs, **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(
            n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.asarray(v).shape)
         for n, v in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in initializers.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def assert_same(model: onnx.ModelProto, feeds: dict[str, np.ndarray], *, rtol: float = 1e-5,
                atol: float = 1e-6, reference: bool = False) -> None:
    """planc computes what the oracle computes: values and shapes (a scalar is [1] in ARK)."""
    got = planc_outputs(model, feeds)
    for name, expected in oracle_outputs(model, feeds, reference=reference).items():
        expected = np.asarray(expected)
        value = np.asarray(got[name])
        assert value.shape == (expected.shape or (1,)), (name, value.shape, expected.shape)
        np.testing.assert_allclose(value.astype(np.float64), expected.astype(np.float64),
                                   rtol=rtol, atol=atol, err_msg=name)
