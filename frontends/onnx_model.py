"""ONNX models in: `planc model.onnx --target ...` (the `onnx` extra).

A graph whose operators ARK has becomes an ARK model (`ark.model`): MatMul, Gemm, Add, Sub,
Mul, Div (with broadcasting), Relu, Sigmoid, Gelu, Exp, Sqrt, Softmax, LayerNormalization,
ReduceMean/Sum/Max, Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Cast, Gather (an
embedding), Concat (copies into slices of one tensor) and Slice (a view), Identity and
Dropout (inference: nothing). A graph with convolutions becomes a Gemini layer graph
(`dnn.graph`, see `onnx_cnn`).

Shape computations are folded at import (Constant, Shape, ConstantOfShape, Unsqueeze,
Squeeze, Concat, Gather, Cast, Range and arithmetic on constants), so `Reshape(x,
Concat(Shape(x)[0:1], [-1]))` chains become a plain reshape. Weights are kept by shape; when a
weight has values (an initializer with data, a Constant) they are returned beside the module
(`OnnxImport.values`), so the numpy interpreter can run the model on them.

What a target cannot express is one error naming the ONNX node, its operator and the reason:
`planc: error: m.onnx: $.graph.node[7]: ONNX node 'Tanh_7' (Tanh): ARK has no tanh ...`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dialects import ark
from ground.diagnostics import PlancError

# ONNX element types (TensorProto.DataType) and ARK's names for them.
ARK_DTYPES = {1: "FP32", 10: "FP16", 16: "BF16", 6: "INT32", 3: "INT8", 2: "UINT8",
              12: "UINT32"}
INDEX_TYPES = (6, 7)        # int32, int64: indices (Gather) become INT32 tensors
MAX_RANK = 4                # ARK tensors have 1 to 4 dimensions
CNN_OPERATORS = frozenset({"Conv", "MaxPool", "AveragePool", "GlobalAveragePool",
                           "BatchNormalization", "LRN", "GlobalMaxPool"})


@dataclass
class OnnxImport:
    module: Any
    inputs: dict[str, int] = field(default_factory=dict)
    """Graph input name -> ARK tensor id (or dnn input name)."""
    outputs: dict[str, int] = field(default_factory=dict)
    """Graph output name -> ARK tensor id of its value."""
    values: dict[int, np.ndarray] = field(default_factory=dict)
    """Tensor id -> the values of weights and constants the file holds."""
    output_dtypes: dict[str, np.dtype] = field(default_factory=dict)


MAX_ONNX_BYTES = 2 << 30
"""Protobuf's limit on one message: a larger ONNX model keeps its weights as external data."""


def read_bounded(path: str) -> bytes:
    """The bytes of the ONNX file. `onnx.load` reads a file to its end, so `planc /dev/zero`
    (or a pipe that never closes) read until memory ran out: a regular file is refused
    beyond protobuf's 2 GiB before it is read, a pipe or device is read up to the bound
    planc keeps for every input (`MAX_INPUT_BYTES`)."""
    import stat

    from ground.json_reader import MAX_INPUT_BYTES, read_at_most

    try:
        with open(path, "rb") as f:
            info = os.fstat(f.fileno())
            limit = MAX_ONNX_BYTES if stat.S_ISREG(info.st_mode) else MAX_INPUT_BYTES
            if info.st_size > limit:
                raise PlancError(f"{info.st_size:,} bytes, larger than the {limit:,} of one "
                                 "ONNX (protobuf) message; a bigger model keeps its weights "
                                 "as external data", file=path)
            data = read_at_most(f, limit)
    except OSError as e:
        raise PlancError(f"cannot read: {e.strerror or e}", file=path) from None
    if len(data) > limit:
        raise PlancError(f"larger than the {limit:,} bytes planc reads from a pipe or device "
                         "as one ONNX model", file=path)
    return data


def load(path: str) -> Any:
    try:
        import onnx
    except ImportError:
        raise PlancError("reading ONNX models needs the onnx package: pip install "
                         "'planc[onnx]'", file=path) from None
    data = read_bounded(path)
    if not data:
        # Protobuf reads no bytes as a message with every field absent: a model of 0 nodes.
        raise PlancError("an empty file, not an ONNX model", file=path)
    try:
        model = onnx.load_model_from_string(data)
        # As onnx.load does: weights kept beside the model are read from its directory.
        onnx.load_external_data_for_model(model, os.path.dirname(path) or ".")
    except Exception as e:  # noqa: BLE001 -- protobuf reports a bad file in many ways
        raise PlancError(f"not a readable ONNX model: {' '.join(str(e).split())[:200]}",
                         file=path) from None
    if not model.graph.output:
        # Bytes that happen to parse as a protobuf message but hold no graph (or a graph
        # that computes nothing) are no model to compile.
        raise PlancError("not an ONNX model: no graph with outputs", path="$.graph", file=path)
    _refuse_names_that_are_not_text(model.graph, path)
    try:
        return onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 -- shapes are then taken from the graph as written
        return model


def _refuse_names_that_are_not_text(graph: Any, path: str) -> None:
    """ONNX names are protobuf strings, but ONNX's proto2 messages do not check their UTF-8:
    a damaged name reads as `bytes`, which went on into the IR and the JSON writers (a
    TypeError there)."""
    fields = [(f"$.graph.{kind}[{i}]", [value.name]) for kind in ("input", "output",
              "initializer", "value_info") for i, value in enumerate(getattr(graph, kind))]
    fields += [(f"$.graph.node[{i}]", [node.name, node.op_type, node.domain, *node.input,
                                       *node.output, *(a.name for a in node.attribute)])
               for i, node in enumerate(graph.node)]
    for where, names in fields:
        for name in names:
            if isinstance(name, bytes):
                raise PlancError(f"the name {name[:40]!r} is not UTF-8 text (ONNX names are "
                                 "strings)", path=where, file=path)


# ---------------------------------------------------------------------------------------------
# Values: tensors in the model, or constants known at import
# ---------------------------------------------------------------------------------------------


def attributes(node: Any) -> dict[str, Any]:
    from onnx import helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def array_of(tensor: Any, path: str | None = None) -> np.ndarray:
    """The values of an ONNX tensor (an initializer, a Constant's value). Data that does not
    fill its dims, or an element type numpy cannot hold, is the file's error."""
    from onnx import numpy_helper

    try:
        return numpy_helper.to_array(tensor)
    except Exception as e:  # noqa: BLE001 -- onnx reports bad data as several exception types
        raise PlancError(f"tensor '{tensor.name}' (dims {list(tensor.dims)}, element type "
                         f"{tensor.data_type}): its data does not match its dims and element "
                         f"type: {' '.join(str(e).split())[:200]}", path=path) from None


def node_order(graph: Any, path: str) -> list[tuple[int, Any]]:
    """The graph's nodes, each with its index in the file, producers before consumers.

    ONNX requires nodes in topological order, but an edited file may list a consumer first:
    such a graph is put in order (stably, so a graph already in order is unchanged) rather
    than read as if a value were missing. What no order mends is refused naming the node: a
    node without outputs, a value produced twice, an input that nothing produces, a cycle."""
    known = {t.name for t in graph.initializer} | {v.name for v in graph.input}
    producer: dict[str, int] = {}
    for index, node in enumerate(graph.node):
        if not node.output:
            raise node_error(node, index, path, "it has no outputs")
        for name in filter(None, node.output):
            if name in known or name in producer:
                raise node_error(node, index, path, f"its output '{name}' is also "
                                  + (f"produced by $.graph.node[{producer[name]}]"
                                     if name in producer else "a graph input or initializer")
                                  + " (ONNX values have one producer)")
            producer[name] = index
    after: dict[int, set[int]] = {}
    for index, node in enumerate(graph.node):
        for name in filter(None, node.input):
            if name not in known and name not in producer:
                raise node_error(node, index, path, f"its input '{name}' is produced by no "
                                  "node, initializer or graph input")
        after[index] = {producer[n] for n in node.input if n in producer}
    for index, value in enumerate(graph.output):
        if value.name not in known and value.name not in producer:
            raise PlancError(f"graph output '{value.name}' is produced by no node",
                             path=f"{path}.output[{index}]")
    nodes = list(graph.node)
    if all(i < index for index, before in after.items() for i in before):
        return list(enumerate(nodes))
    return [(index, nodes[index]) for index in _topological(after, nodes, path)]


def _topological(after: dict[int, set[int]], nodes: list[Any], path: str) -> list[int]:
    """Node indices, each after those it reads (lowest index first among the ready ones)."""
    import graphlib

    sorter = graphlib.TopologicalSorter(after)
    try:
        sorter.prepare()
    except graphlib.CycleError as e:
        cycle = e.args[1]
        names = " -> ".join(_node_name(nodes[i]) for i in cycle)
        raise node_error(nodes[cycle[0]], cycle[0], path,
                          f"the graph has a cycle ({names})") from None
    order: list[int] = []
    while sorter.is_active():
        ready = sorted(sorter.get_ready())
        order.extend(ready)
        sorter.done(*ready)
    return order


def _node_name(node: Any) -> str:
    """How errors name a node: its name, else its first output, else its operator."""
    return node.name or next(filter(None, node.output), "") or node.op_type


@contextmanager
def node_values(importer: Any) -> Iterator[None]:
    """The values a node is given (dims, attributes, constants) that numpy refuses while its
    handler computes with them (arrays that do not concatenate or broadcast, an axis or a
    count out of range) are the node's error: named, in one line, instead of an exception of
    numpy's escaping from whichever handler met them first."""
    try:
        yield
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError) as e:
        raise importer.fail(f"its inputs and attributes do not fit together "
                            f"({type(e).__name__}: {' '.join(str(e).split())[:200]})") from None
    except AttributeError:
        # A value of a kind the handler does not take: an input left empty (None), or a
        # constant where the network's computed values belong.
        raise importer.fail("an input is missing (an empty name) or is a constant where "
                            "the network's values belong") from None


def node_error(node: Any, index: int, path: str, message: str) -> PlancError:
    """An error about the node at `path`.node[`index`] (named even when it has no name and no
    outputs: the error path must not fail on the node it reports)."""
    name = node.name or next(filter(None, node.output), "")
    where = f"ONNX node '{name}'" if name else "an unnamed ONNX node"
    return PlancError(f"{where} ({node.op_type}): {message}", path=f"{path}.node[{index}]")


class NodeError(PlancError):
    pass


class ArkImporter:
    """Builds the ARK model node by node with `ModelBuilder`."""

    def __init__(self, model: Any, path: str):
        from frontends.model_builder import ModelBuilder

        self.model, self.path = model, path
        self.graph = model.graph
        self.m = ModelBuilder()
        self.env: dict[str, Any] = {}           # name -> SSA value or np.ndarray constant
        self.result = OnnxImport(None)
        self.node_index = -1
        self.node: Any = None
        self.wanted = {n for node in self.graph.node for n in node.input} | {
            v.name for v in self.graph.output}

    # -- errors --------------------------------------------------------------------------------

    def fail(self, message: str) -> PlancError:
        if self.node is None:
            return PlancError(message, path="$.graph", file=self.path)
        return node_error(self.node, self.node_index, "$.graph", message).in_file(self.path)

    # -- entry ---------------------------------------------------------------------------------

    def run(self) -> OnnxImport:
        initializers = {t.name: t for t in self.graph.initializer}
        for index, tensor in enumerate(self.graph.initializer):
            self.env[tensor.name] = array_of(tensor, f"$.graph.initializer[{index}]")
        for index, value in enumerate(self.graph.input):
            if value.name in initializers:
                continue
            dtype, shape = self.tensor_type(value.type, f"$.graph.input[{index}]")
            tensor = self.m.tensor(shape, dtype)
            self.env[value.name] = tensor
            self.result.inputs[value.name] = tensor.type.tensor_id
        for index, node in node_order(self.graph, "$.graph"):
            self.node_index, self.node = index, node
            handler = HANDLERS.get(node.op_type)
            if handler is None:
                raise self.fail("planc has no ARK lowering for this operator (supported: "
                                f"{', '.join(sorted(HANDLERS))}); lower it on the host side "
                                "and cut the model there")
            with node_values(self):
                outputs = handler(self, [self.env.get(n) if n else None for n in node.input],
                                  attributes(node))
            for name, value in zip(node.output, outputs, strict=False):
                if name:
                    # numpy reductions of 0-d arrays give scalars: keep constants as arrays
                    self.env[name] = np.asarray(value) if isinstance(value, np.generic) \
                        else value
            self.missing_outputs(len(outputs))
        for index, value in enumerate(self.graph.output):
            out = self.env.get(value.name)
            if out is None:
                raise PlancError(f"graph output '{value.name}' is not computed",
                                 path=f"$.graph.output[{index}]", file=self.path)
            if isinstance(out, np.ndarray):
                out = self.weight(out)
            elif isinstance(out.owner, ark.ViewOp) or out.owner.is_virtual:
                out = self.m.copy(out)     # an output is a tensor the model computes
            self.result.outputs[value.name] = out.type.tensor_id
        self.result.module = self.m.finish()
        return self.result

    def tensor_type(self, type_proto: Any, where: str) -> tuple[str, list[int]]:
        kind = type_proto.tensor_type
        dtype = ARK_DTYPES.get(kind.elem_type) or ("INT32" if kind.elem_type in INDEX_TYPES
                                                    else None)
        if dtype is None:
            raise PlancError(f"element type {kind.elem_type} has no ARK equivalent", path=where,
                             file=self.path)
        shape = [d.dim_value if d.HasField("dim_value") else 0 for d in kind.shape.dim]
        if any(d <= 0 for d in shape):
            raise PlancError(f"dimension {shape} is symbolic or empty; planc plans tensors of "
                             "fixed shapes (give the model concrete input shapes)", path=where,
                             file=self.path)
        if len(shape) > MAX_RANK:
            raise PlancError(f"shape {shape} has more than {MAX_RANK} dimensions, the most an "
                             "ARK tensor has", path=where, file=self.path)
        return dtype, shape or [1]

    def fit_rank(self, shape: Sequence[int]) -> list[int]:
        shape = list(shape) or [1]
        if len(shape) > MAX_RANK:
            raise self.fail(f"shape {list(shape)} has more than {MAX_RANK} dimensions, the most "
                            "an ARK tensor has")
        return shape

    def missing_outputs(self, produced: int) -> None:
        """Outputs of the node beyond what it lowers to are an error when anything uses them
        (e.g. the mean and inverse deviation of LayerNormalization, Dropout's mask)."""
        for position, name in enumerate(self.node.output[produced:], produced):
            if name and name in self.wanted:
                raise self.fail(f"its output {position} ('{name}') is used, and planc lowers "
                                f"only the first {produced}")

    # -- operands ------------------------------------------------------------------------------

    def weight(self, value: np.ndarray, dtype: str | None = None):
        """A constant as a tensor of the model whose values are known."""
        array = np.asarray(value)
        if array.size == 0:
            raise self.fail("an empty tensor (ARK tensors have at least one element)")
        dtype = dtype or {np.dtype(np.float16): "FP16", np.dtype(np.int32): "INT32",
                          np.dtype(np.int64): "INT32"}.get(array.dtype, "FP32")
        tensor = self.m.tensor(self.fit_rank(array.shape), dtype)
        self.result.values[tensor.type.tensor_id] = array.reshape(tensor.type.shape_list)
        return tensor

    def tensor(self, value: Any, like: Any = None):
        if value is None:
            raise self.fail("an input it needs is missing")
        if isinstance(value, np.ndarray):
            dtype = like.type.data_type if like is not None and not isinstance(
                like, np.ndarray) else None
            return self.weight(value, dtype)
        return value

    def const(self, value: Any, what: str) -> np.ndarray:
        if not isinstance(value, np.ndarray):
            raise self.fail(f"{what} must be known when the model is imported (a constant or "
                            "a shape computation), not computed by the model")
        return value


# ---------------------------------------------------------------------------------------------
# Operators
# ---------------------------------------------------------------------------------------------

Handler = Callable[[ArkImporter, list[Any], dict[str, Any]], list[Any]]
HANDLERS: dict[str, Handler] = {}


def handles(*op_types: str):
    def register(fn: Handler) -> Handler:
        for op_type in op_types:
            HANDLERS[op_type] = fn
        return fn
    return register


def _all_const(inputs: list[Any]) -> bool:
    return all(isinstance(v, np.ndarray) or v is None for v in inputs)


NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


@handles("Add", "Sub", "Mul", "Div")
def _binary(imp: ArkImporter, inputs, attrs):
    a, b = inputs
    kind = imp.node.op_type
    if _all_const(inputs):
        if kind == "Div" and a.dtype.kind in "iu":
            return [a // b]
        return [NUMPY_BINARY[kind](a, b).astype(np.result_type(a, b))]
    if isinstance(b, np.ndarray) and b.size == 1 and kind in ("Add", "Sub", "Mul", "Div"):
        scalar = float(b.reshape(-1)[0])
        if kind in ("Add", "Sub"):
            return [imp.m.scalar_add(a, scalar if kind == "Add" else -scalar)]
        return [imp.m.scalar_mul(a, scalar if kind == "Mul" else 1.0 / scalar)]
    a, b = imp.tensor(a, b), imp.tensor(b, a)
    method = getattr(imp.m, kind.lower())
    try:
        return [method(a, b)]
    except ValueError as e:
        raise imp.fail(str(e)) from None


@handles("Relu", "Sigmoid", "Exp", "Sqrt")
def _unary(imp: ArkImporter, inputs, attrs):
    return [getattr(imp.m, imp.node.op_type.lower())(imp.tensor(inputs[0]))]


@handles("Gelu")
def _gelu(imp: ArkImporter, inputs, attrs):
    if attrs.get("approximate", b"none") not in (b"tanh", "tanh"):
        raise imp.fail("ARK's Gelu is the tanh approximation; this node asks for the exact "
                       "(erf) form (set approximate='tanh' or accept the difference)")
    return [imp.m.gelu(imp.tensor(inputs[0]))]


@handles("Identity", "Dropout")
def _identity(imp: ArkImporter, inputs, attrs):
    return [inputs[0]]


@handles("Neg")
def _neg(imp: ArkImporter, inputs, attrs):
    if _all_const(inputs):
        return [-inputs[0]]
    return [imp.m.scalar_mul(inputs[0], -1.0)]


@handles("Pow")
def _pow(imp: ArkImporter, inputs, attrs):
    x, exponent = inputs
    if _all_const(inputs):
        return [np.power(x, exponent)]
    power = float(imp.const(exponent, "the exponent").reshape(-1)[0])
    if power == 2.0:
        return [imp.m.mul(x, x)]
    if power == 1.0:
        return [x]
    if power == 0.5:
        return [imp.m.sqrt(x)]
    raise imp.fail(f"ARK has no power operator; exponents 0.5, 1 and 2 are lowered, not {power}")


@handles("MatMul")
def _matmul(imp: ArkImporter, inputs, attrs):
    a, b = (imp.tensor(v) for v in inputs)
    sa, sb = a.type.shape_list, b.type.shape_list
    if len(sa) == 1:
        a = imp.m.reshape(imp.m.copy(a), [1, sa[0]])
    if len(sb) == 1:
        b = imp.m.reshape(imp.m.copy(b), [sb[0], 1])
    out = imp.m.matmul(a, b)
    shape = list(out.type.shape_list)
    if len(sa) == 1:
        shape.pop(-2)
    if len(sb) == 1:
        shape.pop(-1)
    return [imp.m.reshape(out, shape or [1]) if shape != out.type.shape_list else out]


@handles("Gemm")
def _gemm(imp: ArkImporter, inputs, attrs):
    a, b = imp.tensor(inputs[0]), imp.tensor(inputs[1], inputs[0])
    out = imp.m.matmul(a, b, transpose_input=bool(attrs.get("transA", 0)),
                       transpose_other=bool(attrs.get("transB", 0)))
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        out = imp.m.scalar_mul(out, alpha)
    if len(inputs) > 2 and inputs[2] is not None:
        c = inputs[2]
        if isinstance(c, np.ndarray) and beta != 1.0:
            c, beta = c * beta, 1.0
        c = imp.tensor(c, out)
        if beta != 1.0:
            c = imp.m.scalar_mul(c, beta)
        out = imp.m.add(out, c)
    return [out]


@handles("Softmax")
def _softmax(imp: ArkImporter, inputs, attrs):
    x = imp.tensor(inputs[0])
    axis = attrs.get("axis", -1)
    return [imp.m.softmax(x, axis % len(x.type.shape_list))]


@handles("LayerNormalization")
def _layer_norm(imp: ArkImporter, inputs, attrs):
    x = imp.tensor(inputs[0])
    rank = len(x.type.shape_list)
    if attrs.get("axis", -1) % rank != rank - 1:
        raise imp.fail("ARK normalises over the last axis only")
    out = imp.m.layer_norm(x, attrs.get("epsilon", 1e-5))
    if len(inputs) > 1 and inputs[1] is not None:
        out = imp.m.mul(out, imp.tensor(inputs[1], x))
    if len(inputs) > 2 and inputs[2] is not None:
        out = imp.m.add(out, imp.tensor(inputs[2], x))
    return [out]


@handles("ReduceMean", "ReduceSum", "ReduceMax")
def _reduce(imp: ArkImporter, inputs, attrs):
    x = imp.tensor(inputs[0])
    rank = len(x.type.shape_list)
    if len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in imp.const(inputs[1], "the axes")]
    else:
        axes = list(attrs.get("axes", []))
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return [x]
        axes = list(range(rank))
    method = {"ReduceMean": imp.m.reduce_mean, "ReduceSum": imp.m.reduce_sum,
              "ReduceMax": imp.m.reduce_max}[imp.node.op_type]
    for axis in sorted({a % rank for a in axes}):
        x = method(x, axis)
    if not attrs.get("keepdims", 1):
        shape = [d for i, d in enumerate(x.type.shape_list) if i not in {a % rank for a in axes}]
        x = imp.m.reshape(x, shape or [1])
    return [x]


@handles("Transpose")
def _transpose(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    perm = list(attrs.get("perm", []))
    if isinstance(x, np.ndarray):
        return [np.transpose(x, perm or None)]
    perm = perm or list(reversed(range(len(x.type.shape_list))))
    return [imp.m.transpose(x, perm)]


def _contiguous(imp: ArkImporter, x):
    t = x.type
    return x if t.strides_list == t.shape_list and not any(t.offsets_list) else imp.m.copy(x)


def _reshape_to(imp: ArkImporter, x, shape: Sequence[int]):
    if isinstance(x, np.ndarray):
        return x.reshape(shape)
    shape = imp.fit_rank(shape)
    if list(shape) == x.type.shape_list:
        return x
    return imp.m.reshape(_contiguous(imp, x), shape)


@handles("Reshape")
def _reshape(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    target = [int(v) for v in imp.const(inputs[1], "the new shape")]
    current = list(x.shape) if isinstance(x, np.ndarray) else x.type.shape_list
    if not attrs.get("allowzero", 0):
        target = [current[i] if v == 0 else v for i, v in enumerate(target)]
    if -1 in target:
        known = int(np.prod([v for v in target if v != -1]))
        target[target.index(-1)] = int(np.prod(current)) // max(known, 1)
    return [_reshape_to(imp, x, target)]


@handles("Flatten")
def _flatten(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    shape = list(x.shape) if isinstance(x, np.ndarray) else x.type.shape_list
    axis = attrs.get("axis", 1) % (len(shape) + 1)
    return [_reshape_to(imp, x, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])]


@handles("Squeeze", "Unsqueeze")
def _squeeze(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    shape = list(x.shape) if isinstance(x, np.ndarray) else x.type.shape_list
    if len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in imp.const(inputs[1], "the axes")]
    else:
        axes = list(attrs.get("axes", []))
    if imp.node.op_type == "Squeeze":
        drop = {a % len(shape) for a in axes} if axes else {i for i, d in enumerate(shape)
                                                              if d == 1}
        new = [d for i, d in enumerate(shape) if i not in drop]
    else:
        rank = len(shape) + len(axes)
        new, rest = [], iter(shape)
        for i in range(rank):
            new.append(1 if i in {a % rank for a in axes} else next(rest))
    if isinstance(x, np.ndarray):
        return [x.reshape(new)]
    return [_reshape_to(imp, x, new or [1])]


@handles("Cast")
def _cast(imp: ArkImporter, inputs, attrs):
    x, to = inputs[0], attrs["to"]
    if isinstance(x, np.ndarray):
        from onnx import helper

        return [x.astype(helper.tensor_dtype_to_np_dtype(to))]
    dtype = ARK_DTYPES.get(to) or ("INT32" if to in INDEX_TYPES else None)
    if dtype is None:
        raise imp.fail(f"element type {to} has no ARK equivalent")
    return [x if dtype == x.type.data_type else imp.m.cast(x, dtype)]


@handles("Gather")
def _gather(imp: ArkImporter, inputs, attrs):
    data, indices = inputs
    axis = attrs.get("axis", 0)
    if _all_const(inputs):
        return [np.take(data, indices, axis=axis)]
    if axis != 0:
        raise imp.fail("ARK gathers rows of a table (an embedding): axis must be 0")
    table = imp.tensor(data)
    if len(table.type.shape_list) != 2:
        raise imp.fail("an embedding table has 2 dimensions [rows, width]")
    if isinstance(indices, np.ndarray):
        indices = imp.weight(indices.astype(np.int32), "INT32")
    return [imp.m.embedding(indices, table)]


@handles("Concat")
def _concat(imp: ArkImporter, inputs, attrs):
    axis = attrs["axis"]
    if _all_const(inputs):
        return [np.concatenate(inputs, axis=axis)]
    parts = [imp.tensor(v, next(x for x in inputs if not isinstance(x, np.ndarray)))
             for v in inputs]
    shape = list(parts[0].type.shape_list)
    axis %= len(shape)
    shape[axis] = sum(p.type.shape_list[axis] for p in parts)
    out = imp.m.tensor(shape, parts[0].type.data_type)
    offset = 0
    for part in parts:
        part_shape = part.type.shape_list
        offsets = [offset if i == axis else 0 for i in range(len(shape))]
        imp.m.copy(_contiguous(imp, part), output=imp.m.slice(out, offsets, part_shape))
        offset += part_shape[axis]
    # Readers of `out` depend on the copies through the bytes they wrote (planners order
    # accesses to overlapping byte regions of a buffer, not only SSA uses).
    return [out]


@handles("Slice")
def _slice(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    shape = list(x.shape) if isinstance(x, np.ndarray) else x.type.shape_list
    starts = [int(v) for v in imp.const(inputs[1], "the starts")]
    ends = [int(v) for v in imp.const(inputs[2], "the ends")]
    axes = ([int(v) for v in imp.const(inputs[3], "the axes")]
            if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts))))
    steps = ([int(v) for v in imp.const(inputs[4], "the steps")]
             if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts))
    if isinstance(x, np.ndarray):
        index = [slice(None)] * len(shape)
        for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
            index[a] = slice(s, e, st)
        return [x[tuple(index)]]
    if any(st != 1 for st in steps):
        raise imp.fail("an ARK view takes every element of a range (step 1)")
    offsets, sizes = [0] * len(shape), list(shape)
    for a, s, e in zip(axes, starts, ends, strict=True):
        a %= len(shape)
        lo, hi = (max(0, min(v + shape[a] if v < 0 else v, shape[a])) for v in (s, e))
        offsets[a], sizes[a] = lo, max(hi - lo, 0)
    if min(sizes) == 0:
        raise imp.fail("the slice is empty")
    return [imp.m.slice(x, offsets, sizes)]


# -- shape computations, folded at import --------------------------------------------------------


@handles("Constant")
def _constant(imp: ArkImporter, inputs, attrs):
    if "value" in attrs:
        return [array_of(attrs["value"])]
    for key, kind in (("value_float", np.float32), ("value_int", np.int64)):
        if key in attrs:
            return [np.array(attrs[key], dtype=kind)]
    for key, kind in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in attrs:
            return [np.array(list(attrs[key]), dtype=kind)]
    raise imp.fail("this Constant's form is not supported (value, value_float(s) and "
                   "value_int(s) are)")


@handles("Shape")
def _shape(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    shape = np.array(x.shape if isinstance(x, np.ndarray) else x.type.shape_list, np.int64)
    return [shape[attrs.get("start", 0): attrs.get("end", len(shape))]]


@handles("ConstantOfShape")
def _constant_of_shape(imp: ArkImporter, inputs, attrs):
    shape = [int(v) for v in imp.const(inputs[0], "the shape")]
    value = array_of(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    # A read-only broadcast of one element: the light networks' weights are all
    # ConstantOfShape, and VGG-19's, materialised, were 0.6 GB (weights go by shape).
    return [np.broadcast_to(value.reshape(-1)[:1].astype(value.dtype), shape)]


@handles("Range")
def _range(imp: ArkImporter, inputs, attrs):
    start, limit, delta = (imp.const(v, "a bound") for v in inputs)
    return [np.arange(start, limit, delta, dtype=np.result_type(start, limit, delta))]
