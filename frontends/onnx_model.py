"""ONNX models in: `planc model.onnx --target ...` (the `onnx` extra).

A graph whose operators ARK has becomes an ARK model (`ark.model`): MatMul, Gemm, Add, Sub,
Mul, Div (with broadcasting), Mod, Relu, Sigmoid, Exp, Sqrt, Softmax (opset 13's and the 2-D
coercion before it), ReduceMean/Sum/Max, Transpose, Reshape, Flatten, Squeeze, Unsqueeze, Cast,
Concat (copies into slices of one tensor) and Slice (a view), Identity and Dropout (inference:
nothing). `frontends.onnx_ops` adds the operators that decompose into these (masks, gathers,
Erf, Attention ...). A graph with convolutions becomes a Gemini layer graph (`dnn.graph`, see
`onnx_cnn`).

Shape computations are folded at import: by onnxruntime's offline optimiser where it is
installed (`fold_constants`), and by the handlers here (Constant, Shape, ConstantOfShape,
Unsqueeze, Squeeze, Concat, Gather, Cast, Range and arithmetic on constants), so
`Reshape(x, Concat(Shape(x)[0:1], [-1]))` chains become a plain reshape. Weights are kept by
shape; when a weight has values (an initializer with data, a Constant) they are returned beside
the module (`OnnxImport.values`), so the numpy interpreter can run the model on them. The
graph's inputs and outputs are named on their tensors (`OnnxName`).

What a target cannot express is one error naming the ONNX node, its operator and the reason:
`planc: error: m.onnx: $.graph.node[7]: ONNX node 'Log_7' (Log): planc has no ARK lowering ...`.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dialects import ark
from ground.diagnostics import PlancError

LOG = logging.getLogger("planc.onnx")

# ONNX element types (TensorProto.DataType) and ARK's names for them.
ARK_DTYPES = {1: "FP32", 10: "FP16", 16: "BF16", 6: "INT32", 3: "INT8", 2: "UINT8",
              12: "UINT32"}
BOOL = 9                    # TensorProto.BOOL: UINT8 tensors holding 0 or 1
FLOAT_TYPES = frozenset({"FP32", "FP16", "BF16"})
INDEX_TYPES = (6, 7)        # int32, int64: indices (Gather) become INT32 tensors
NUMPY_TO_ARK = {np.dtype(np.float16): "FP16", np.dtype(np.int32): "INT32",
                np.dtype(np.int64): "INT32", np.dtype(np.bool_): "UINT8",
                np.dtype(np.uint8): "UINT8", np.dtype(np.int8): "INT8"}
"""The ARK element type of a constant's numpy type (BOOL is UINT8 holding 0 or 1; other
floats are FP32)."""
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
# Folding what is known at import (onnxruntime's offline optimiser)
# ---------------------------------------------------------------------------------------------

SHAPE_OPERATORS = frozenset({"Shape", "Size"})


def foldable(model: Any) -> bool:
    """Does the graph compute anything from constants alone (a shape sub-graph: Shape, then
    Gather, Concat, Equal, Where ... on the shape; or arithmetic on weights)?"""
    known = {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type in SHAPE_OPERATORS:
            return True
        if node.op_type == "Constant":
            known.update(node.output)
        elif node.input and all(not n or n in known for n in node.input):
            return True
    return False


@dataclass
class Folding:
    """What folding did to a model: `note` says why nothing was folded, for the message of
    a value that must be known at import and is not."""

    model: Any
    note: str = ""


def fold_constants(model: Any) -> Folding:
    """The model with every value computable from constants and static shapes folded into
    initializers: onnxruntime's offline graph optimisation at its basic level (constant
    folding, with Shape nodes of known shapes, and redundant-node elimination; the level
    writes standard ONNX operators only). Without onnxruntime, or where it does not take the
    model, the model is imported as written and planc's importer folds what it can."""
    if not foldable(model):
        return Folding(model)
    try:
        import onnxruntime as ort
    except ImportError:
        return Folding(model, "install onnxruntime (pip install 'planc[onnx]') so that planc "
                              "folds the model's shape computations at import")
    import tempfile

    import onnx

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    options.log_severity_level = 4
    with tempfile.TemporaryDirectory(prefix="planc-onnx-") as scratch:
        options.optimized_model_filepath = os.path.join(scratch, "folded.onnx")
        try:
            ort.InferenceSession(model.SerializeToString(), options,
                                 providers=["CPUExecutionProvider"])
            folded = onnx.load(options.optimized_model_filepath)
        except Exception as e:  # noqa: BLE001 -- onnxruntime refuses models in many ways
            return Folding(model, "onnxruntime could not fold it: "
                                  f"{' '.join(str(e).split())[:160]}")
    try:
        folded = onnx.shape_inference.infer_shapes(folded)
    except Exception:  # noqa: BLE001 -- shapes are then taken from the graph as written
        pass
    return Folding(folded)


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
    from xdsl.utils.exceptions import VerifyException

    try:
        yield
    except (ValueError, TypeError, IndexError, KeyError, ArithmeticError,
            VerifyException) as e:
        # VerifyException: the handler built an ARK operator its inputs' shapes do not allow
        # (a Concat of parts whose other dims differ made a view past its buffer).
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


@dataclass(frozen=True)
class Pending:
    """A value that has no ARK tensor of its own but that a consumer may lower together with
    its producer (IsNaN of a softmax, which only Where(IsNaN(s), 0, s) consumes)."""

    name: str
    source: Any
    reason: str
    """Why no other consumer can use it ('is ... ')."""
    consumers: frozenset[str]
    """The operator types that take it."""


def opset_of(model: Any) -> int:
    """The version of the default ONNX domain the model imports (operators changed meaning
    between versions: Softmax's axis at 13, Slice's ranges at 10, Dropout's mode at 12)."""
    return next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)


class ArkImporter:
    """Builds the ARK model node by node with `ModelBuilder`."""

    def __init__(self, model: Any, path: str, fold_note: str = ""):
        from frontends.model_builder import ModelBuilder

        self.model, self.path = model, path
        self.graph = model.graph
        self.m = ModelBuilder()
        self.env: dict[str, Any] = {}           # name -> SSA value or np.ndarray constant
        self.result = OnnxImport(None)
        self.node_index = -1
        self.node: Any = None
        self.opset = opset_of(model)
        self.fold_note = fold_note
        self.softmax_results: set[Any] = set()  # what Where(IsNaN(s), 0, s) may be
        self.nan_tested = _selected_values(self.graph)
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
            if node.domain not in ("", "ai.onnx"):
                raise self.fail(f"an operator of domain '{node.domain}'; planc lowers the "
                                "standard ONNX operators (domain ai.onnx)")
            if handler is None:
                raise self.fail("planc has no ARK lowering for this operator (supported: "
                                f"{', '.join(sorted(HANDLERS))}); lower it on the host side "
                                "and cut the model there")
            inputs = [self.env.get(n) if n else None for n in node.input]
            pending = next((v for v in inputs if isinstance(v, Pending)), None)
            if pending is not None and node.op_type not in pending.consumers:
                raise self.fail(f"its input '{pending.name}' {pending.reason}")
            with node_values(self):
                if any(isinstance(v, Wide) for v in inputs) and node.op_type not in RESHAPES:
                    outputs = self.element_wise_of_wide(handler, inputs, attributes(node))
                else:
                    outputs = handler(self, inputs, attributes(node))
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
            if isinstance(out, Wide):
                raise PlancError(f"graph output '{value.name}' has shape {list(out.shape)}, "
                                 f"more than the {MAX_RANK} dims of an ARK tensor",
                                 path=f"$.graph.output[{index}]", file=self.path)
            if isinstance(out, Pending):
                raise PlancError(f"graph output '{value.name}' {out.reason}",
                                 path=f"$.graph.output[{index}]", file=self.path)
            if isinstance(out, np.ndarray):
                out = self.weight(out)
            elif isinstance(out.owner, ark.ViewOp) or out.owner.is_virtual:
                out = self.m.copy(out)     # an output is a tensor the model computes
            self.result.outputs[value.name] = out.type.tensor_id
        self.result.module = self.m.finish()
        name_tensors(self.result.module, {**{i: n for n, i in self.result.inputs.items()},
                                          **{i: n for n, i in self.result.outputs.items()}})
        return self.result

    def tensor_type(self, type_proto: Any, where: str) -> tuple[str, list[int]]:
        kind = type_proto.tensor_type
        dtype = ARK_DTYPES.get(kind.elem_type) or ("INT32" if kind.elem_type in INDEX_TYPES
                                                    else "UINT8" if kind.elem_type == BOOL
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

    def element_wise_of_wide(self, handler: Handler, inputs: list[Any],
                             attrs: dict[str, Any]) -> list[Any]:
        """An element-wise operator on values above rank 4: on their merged tensors, when
        every operand has the one shape (or is a constant scalar)."""
        shape = next(v.shape for v in inputs if isinstance(v, Wide))
        name = next(n for n, v in zip(self.node.input, inputs, strict=False)
                    if isinstance(v, Wide))
        refusal = self.fail(f"its input '{name}' has shape {list(shape)}, more than the "
                            f"{MAX_RANK} dims of an ARK tensor; planc folds such values "
                            "through reshapes and element-wise operators on one shape")
        if self.node.op_type not in ELEMENT_WISE:
            raise refusal
        flat_inputs = []
        for value in inputs:
            if isinstance(value, Wide) and value.shape == shape:
                value = value.flat
            elif isinstance(value, np.ndarray) and value.shape == shape:
                value = value.reshape(folded_shape(shape))
            elif value is not None and not (isinstance(value, np.ndarray) and value.size == 1):
                raise refusal
            flat_inputs.append(value)
        outputs = handler(self, flat_inputs, attrs)
        return [Wide(v, shape) if not isinstance(v, np.ndarray) and
                v.type.shape_list == folded_shape(shape) else v for v in outputs]

    def decomposed(self, into: str) -> None:
        """Say (at -v) that this node became several ARK operators."""
        LOG.info("ONNX node '%s' (%s) -> %s", self.node.name or self.node.output[0],
                 self.node.op_type, into)

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
        dtype = dtype or NUMPY_TO_ARK.get(array.dtype, "FP32")
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
            note = f"; {self.fold_note}" if self.fold_note else ""
            raise self.fail(f"{what} must be known when the model is imported (a constant or "
                            f"a shape computation), not computed by the model{note}")
        return value


NAME_KEY = "OnnxName"
"""The extra member of an ARK tensor (kept by every format that holds tensors: ARK models
and plans, TT plans) naming the ONNX graph input or output it is, so that one set of named
inputs feeds the model and every plan lowered from it (`planc run`). ARK's runtime reads
tensors by their known members and ignores it."""


def name_tensors(module: Any, names: dict[int, str]) -> None:
    """Give the tensors of `names` (by id) their ONNX names as the `OnnxName` extra member."""
    from xdsl.dialects.builtin import DictionaryAttr, StringAttr
    from xdsl.rewriter import Rewriter

    names = dict(names)
    for op in module.walk():
        if isinstance(op, ark.ViewOp) and op.source is not None and _whole(op):
            # A reshape of a named tensor is that tensor under another shape: a plan may keep
            # only the reshape (a convolution's first view of the image), and `planc run`
            # feeds it the named value reshaped.
            source = getattr(op.source.type, "tensor_id", None)
            if source in names and op.result.type.tensor_id not in names:
                names[op.result.type.tensor_id] = names[source]
        for value in op.results:
            t = value.type
            name = names.get(getattr(t, "tensor_id", None))
            if name is None or not isinstance(t, ark.TensorType):
                continue
            extra = DictionaryAttr({**t.extra.data, NAME_KEY: StringAttr(name)})
            Rewriter.replace_value_with_new_type(
                value, ark.TensorType(*t.parameters[:-1], extra))


def _whole(view: Any) -> bool:
    """Is the view a reshape of all of its source (no window of it)?"""
    t, source = view.result.type, view.source.type
    return isinstance(t, ark.TensorType) and isinstance(source, ark.TensorType) and \
        t.num_elements == source.num_elements and not any(t.offsets_list) and \
        t.strides_list == t.shape_list


def tensor_names(module: Any, *, every: bool = False) -> dict[str, Any]:
    """ONNX name -> tensor id, of the tensors that `name_tensors` named (the first in the
    document; with `every`, the set of all, the reshapes of a named input included)."""
    names: dict[str, Any] = {}
    for op in module.walk():
        for value in op.results:
            t = value.type
            if isinstance(t, ark.TensorType) and NAME_KEY in t.extra.data:
                name = t.extra.data[NAME_KEY].data
                if every:
                    names.setdefault(name, set()).add(t.tensor_id)
                else:
                    names.setdefault(name, t.tensor_id)
    return names


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


def truncating_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """ONNX's integer Div, as C's: the quotient rounded toward zero (numpy's `//` floors, and
    `-7 // 2` is -4 where ONNX gives -3). A zero divisor is the model's error."""
    if not np.all(b):
        raise ValueError("integer division by zero")
    quotient = np.abs(a) // np.abs(b)
    return (np.sign(a) * np.sign(b) * quotient).astype(np.result_type(a, b))


RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Shape",
                      "Size", "Expand"})
"""Operators that take values above rank 4 as they are (`Wide`)."""
ELEMENT_WISE = frozenset({
    "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Exp", "Sqrt", "Neg", "Cast", "Tanh", "Erf",
    "Abs", "Reciprocal", "Pow", "Max", "Min", "Clip", "Where", "Equal", "Less", "Greater",
    "LessOrEqual", "GreaterOrEqual", "Not", "And", "Or", "Xor", "Gelu", "CastLike", "Dropout"})
"""Operators that planc applies to a value above rank 4 through its merged tensor."""

NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


@handles("Add", "Sub", "Mul", "Div")
def _binary(imp: ArkImporter, inputs, attrs):
    a, b = inputs
    kind = imp.node.op_type
    if _all_const(inputs):
        if kind == "Div" and a.dtype.kind in "iu" and b.dtype.kind in "iu":
            if not np.all(b):
                raise imp.fail("integer division by zero")
            return [truncating_divide(a, b)]
        return [NUMPY_BINARY[kind](a, b).astype(np.result_type(a, b))]
    if isinstance(b, np.ndarray) and b.size == 1 and kind in ("Add", "Sub", "Mul", "Div") \
            and a.type.data_type in FLOAT_TYPES:
        scalar = float(b.reshape(-1)[0])
        if kind in ("Add", "Sub"):
            out = imp.m.scalar_add(a, scalar if kind == "Add" else -scalar)
        else:
            out = imp.m.scalar_mul(a, scalar if kind == "Mul" else 1.0 / scalar)
        # a [1, 1] constant broadcasts a [3] tensor to [1, 3]
        return [_reshape_to(imp, out, np.broadcast_shapes(tuple(a.type.shape_list), b.shape))]
    a, b = imp.tensor(a, b), imp.tensor(b, a)
    method = getattr(imp.m, kind.lower())
    try:
        return [method(a, b)]
    except ValueError as e:
        raise imp.fail(str(e)) from None


@handles("Mod")
def _mod(imp: ArkImporter, inputs, attrs):
    """The remainder with the sign of the divisor (`fmod=0`, integers only) or, with `fmod=1`,
    of the dividend (C's fmod). On the model's integers with fmod=1 it is `a - b * (a / b)`
    with ARK's truncating integer Div; the other forms need comparisons ARK lacks."""
    a, b = inputs
    fmod = bool(attrs.get("fmod", 0))
    if _all_const(inputs):
        if a.dtype.kind in "iu" and not np.all(b):
            raise imp.fail("integer modulo by zero")
        return [(np.fmod if fmod else np.mod)(a, b).astype(np.result_type(a, b))]
    a, b = imp.tensor(a, b), imp.tensor(b, a)
    if not fmod or a.type.data_type in FLOAT_TYPES:
        raise imp.fail("ARK computes the remainder only of integers with fmod=1 (as "
                       "a - b * (a / b)); this one needs a floor or a sign test")
    imp.decomposed("Sub(a, Mul(b, Div(a, b)))")
    return [imp.m.sub(a, imp.m.mul(b, imp.m.div(a, b)))]


@handles("Relu", "Sigmoid", "Exp", "Sqrt")
def _unary(imp: ArkImporter, inputs, attrs):
    return [getattr(imp.m, imp.node.op_type.lower())(imp.tensor(inputs[0]))]


@handles("Identity")
def _identity(imp: ArkImporter, inputs, attrs):
    return [inputs[0]]


@handles("Dropout")
def _dropout(imp: ArkImporter, inputs, attrs):
    """Dropout in inference is the identity, and its mask all true. In training mode
    (`training_mode` input from opset 12, `is_test=0` before opset 7) it zeroes a random
    `ratio` of the elements: random, so no plan computes what onnxruntime computes, and it is
    refused unless the ratio is 0."""
    if imp.opset >= 12:
        training = len(inputs) > 2 and inputs[2] is not None and bool(
            imp.const(inputs[2], "training_mode").reshape(-1)[0])
        ratio = (float(imp.const(inputs[1], "the ratio").reshape(-1)[0])
                 if len(inputs) > 1 and inputs[1] is not None else 0.5)
    else:
        training = imp.opset < 7 and not attrs.get("is_test", 0)
        ratio = float(attrs.get("ratio", 0.5))
    if training and ratio != 0.0:
        raise imp.fail(f"training mode drops a random {ratio:g} of the elements; planc plans "
                       "deterministic inference (export the model in eval mode)")
    x = inputs[0]
    shape = shape_of(x)
    return [x, np.ones(shape, dtype=bool)]


@handles("Neg")
def _neg(imp: ArkImporter, inputs, attrs):
    if _all_const(inputs):
        return [-inputs[0]]
    return [imp.m.scalar_mul(inputs[0], -1.0)]


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
    """From opset 13 Softmax normalises along `axis` (default -1). Before, it coerces the
    input to 2-D at `axis` (default 1): every element from `axis` on is one row, so the
    model's [N, C, H, W] with axis 1 normalises over C*H*W (a reshape around one softmax)."""
    x = imp.tensor(inputs[0])
    shape = x.type.shape_list
    softmax = imp.m.softmax
    if imp.node.output[0] in imp.nan_tested:
        softmax = _safe_softmax_of(imp, x)
    if imp.opset >= 13:
        out = softmax(x, _axis(imp, attrs.get("axis", -1), len(shape)))
    else:
        axis = _axis(imp, attrs.get("axis", 1), len(shape), inclusive=True)
        rows = [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))]
        if axis == len(shape) - 1 or rows[1] == shape[-1]:
            out = softmax(x, len(shape) - 1)
        else:
            out = _reshape_to(imp, softmax(_reshape_to(imp, x, rows), 1), shape)
    imp.softmax_results.add(out)
    return [out]


PASS_THROUGH = frozenset({"Cast", "CastLike", "Identity"})


def _selected_values(graph: Any) -> set[str]:
    """Values whose NaNs the graph replaces: the input of an IsNaN, or a value input of a
    Where, directly or through casts (torch's safe softmax, Where(IsNaN(s), 0, s), and
    ONNX's Attention expanded, Where(row all masked, 0, s)). A Softmax producing one is
    lowered in its safe form (`_safe_softmax_of`)."""
    sources = {n.output[0]: n.input[0] for n in graph.node
               if n.op_type in PASS_THROUGH and n.input and n.output}
    selected = set()
    for node in graph.node:
        names = node.input[:1] if node.op_type == "IsNaN" else \
            node.input[1:3] if node.op_type == "Where" else []
        for name in names:
            while name:
                selected.add(name)
                name = sources.get(name)
    return selected


LOWEST = {"FP32": float(np.finfo(np.float32).min), "FP16": float(np.finfo(np.float16).min),
          "BF16": -3.3895313892515355e38}
"""The lowest finite value of each float type."""


def _safe_softmax_of(imp: ArkImporter, x):
    """torch's safe softmax, which exporters write as Where(IsNaN(s), 0, s) (and ONNX's
    Attention as Where(row all -inf, 0, s)): a row that is all -inf (every key masked) gives
    zeros where a softmax gives NaN (-inf - -inf). ARK has
    no NaN test, so the softmax itself is made safe without arithmetic on infinities: the
    row's shift is max(m, lowest finite) of its maximum m, a ReduceMax over m and that
    constant side by side (m itself on every row with a finite element, so those rows are
    exactly the softmax), and a masked row's exponentials are then exp(-inf) = 0; it divides
    by s + relu(1/2 - s) of their sum s (s >= 1, exp(0) of the maximum, on every other row,
    where that is s; 1/2 on a masked row, whose result is 0)."""
    dtype = x.type.data_type
    if dtype not in LOWEST:
        raise imp.fail(f"a safe softmax (Where(IsNaN(s), 0, s)) of {dtype}")

    def softmax(value, axis: int):
        m = imp.m
        peak = m.reduce_max(value, axis)
        shape = list(peak.type.shape_list)
        pair = m.tensor([2 if i == axis else d for i, d in enumerate(shape)], dtype)
        m.copy(peak, output=m.slice(pair, [0] * len(shape), shape))
        m.scalar_assign(shape, LOWEST[dtype], dtype, output=m.slice(
            pair, [1 if i == axis else 0 for i in range(len(shape))], shape))
        shift = m.reduce_max(pair, axis)
        e = m.exp(m.sub(value, shift))
        total = m.reduce_sum(e, axis)
        floor = m.relu(m.scalar_add(m.scalar_mul(total, -1.0), 0.5))
        imp.decomposed("a safe softmax: rows of -inf give 0, as Where(IsNaN(s), 0, s) does")
        return m.div(e, m.add(total, floor))
    return softmax


def _axis(imp: ArkImporter, axis: int, rank: int, *, inclusive: bool = False) -> int:
    """`axis` in [0, rank) (or [0, rank] where the operator allows rank, as Flatten): a
    negative axis counts from the end, so -1 is rank - 1."""
    bound = rank + 1 if inclusive else rank
    if not -rank <= axis < bound:
        raise imp.fail(f"axis {axis} is out of range for a rank-{rank} input")
    return axis + rank if axis < 0 else axis


@handles("ReduceMean", "ReduceSum", "ReduceMax")
def _reduce(imp: ArkImporter, inputs, attrs, kind: str | None = None):
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
              "ReduceMax": imp.m.reduce_max}[kind or imp.node.op_type]
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


@dataclass(frozen=True)
class Wide:
    """A value of rank above ARK's 4: its elements, contiguous, in an ARK tensor whose leading
    dims are merged. Reshapes and element-wise operators take it; anything else that needs
    its dims refuses it."""

    flat: Any
    shape: tuple[int, ...]


def shape_of(value: Any) -> list[int]:
    if isinstance(value, np.ndarray):
        return list(value.shape)
    if isinstance(value, Wide):
        return list(value.shape)
    return value.type.shape_list


def folded_shape(shape: Sequence[int]) -> list[int]:
    """A rank above 4 merged into 4 dims: the leading ones into one."""
    return [int(np.prod(shape[:len(shape) - MAX_RANK + 1])), *shape[len(shape) - MAX_RANK + 1:]]


def _contiguous(imp: ArkImporter, x):
    t = x.type
    return x if t.strides_list == t.shape_list and not any(t.offsets_list) else imp.m.copy(x)


def _reshape_to(imp: ArkImporter, x, shape: Sequence[int]):
    if isinstance(x, np.ndarray):
        return x.reshape(shape)
    if isinstance(x, Wide):
        x = x.flat
    shape = list(shape) or [1]
    if 0 in shape:
        raise imp.fail(f"the result {list(shape)} is empty (ARK tensors have at least one "
                       "element)")
    if len(shape) > MAX_RANK:
        return Wide(_reshape_to(imp, x, folded_shape(shape)), tuple(shape))
    if list(shape) == x.type.shape_list:
        return x
    return imp.m.reshape(_contiguous(imp, x), shape)


@handles("Reshape")
def _reshape(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    current = shape_of(x)
    return [_reshape_to(imp, x, reshape_target(imp, current, imp.const(
        inputs[1], "the new shape"), bool(attrs.get("allowzero", 0))))]


def reshape_target(imp: ArkImporter, current: list[int], shape: np.ndarray,
                   allowzero: bool) -> list[int]:
    """Reshape's new shape, as ONNX defines it: a 0 copies the input's dim at that position
    (unless `allowzero`, where it is a zero dim), one -1 takes what the others leave, and the
    element count must stay. Anything else is the model's error, named."""
    target = [int(v) for v in shape.reshape(-1)]
    if not allowzero:
        if any(v == 0 and i >= len(current) for i, v in enumerate(target)):
            raise imp.fail(f"new shape {target} copies (0) a dim the {current} input lacks")
        target = [current[i] if v == 0 else v for i, v in enumerate(target)]
    if target.count(-1) > 1 or any(v < -1 for v in target):
        raise imp.fail(f"new shape {target}: at most one -1 and no other negative dim")
    size = int(np.prod(current))
    if -1 in target:
        known = int(np.prod([v for v in target if v != -1]))
        if known == 0 or size % known:
            raise imp.fail(f"new shape {target} cannot hold the {size} elements of {current}")
        target[target.index(-1)] = size // known
    if int(np.prod(target)) != size:
        raise imp.fail(f"new shape {target} has {int(np.prod(target))} elements, the input "
                       f"{current} has {size}")
    return target


@handles("Flatten")
def _flatten(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    shape = shape_of(x)
    axis = _axis(imp, attrs.get("axis", 1), len(shape), inclusive=True)
    return [_reshape_to(imp, x, [int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))])]


@handles("Squeeze", "Unsqueeze")
def _squeeze(imp: ArkImporter, inputs, attrs):
    x = inputs[0]
    shape = shape_of(x)
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
    if to == BOOL:
        return [_nonzero(imp, x)]
    dtype = ARK_DTYPES.get(to) or ("INT32" if to in INDEX_TYPES else None)
    if dtype is None:
        raise imp.fail(f"element type {to} has no ARK equivalent")
    return [x if dtype == x.type.data_type else imp.m.cast(x, dtype)]


def _nonzero(imp: ArkImporter, x):
    """Cast to BOOL: x != 0, as UINT8 0/1. Exact on integers: relu(x) - relu(x - 1) is
    [x > 0], and the same of -x is [x < 0]; ARK cannot test a float for zero."""
    if x.type.data_type in FLOAT_TYPES:
        raise imp.fail("a cast of floats to BOOL tests each for zero, which ARK cannot (no "
                       "comparison of floats); integers and BOOL cast exactly")
    d = x if x.type.data_type == "INT32" else imp.m.cast(x, "INT32")
    m = imp.m

    def positive(v):
        return m.sub(m.relu(v), m.relu(m.scalar_add(v, -1.0)))

    imp.decomposed("[x > 0] + [x < 0] with Relu")
    return m.cast(m.add(positive(d), positive(m.scalar_mul(d, -1.0))), "UINT8")


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
    shape = shape_of(x)
    if imp.opset < 10:   # the ranges were attributes until opset 10
        starts, ends = list(attrs.get("starts", [])), list(attrs.get("ends", []))
        axes = list(attrs.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        if len(inputs) < 3 or inputs[1] is None or inputs[2] is None:
            raise imp.fail("Slice from opset 10 takes its starts and ends as inputs")
        starts = [int(v) for v in imp.const(inputs[1], "the starts").reshape(-1)]
        ends = [int(v) for v in imp.const(inputs[2], "the ends").reshape(-1)]
        axes = ([int(v) for v in imp.const(inputs[3], "the axes").reshape(-1)]
                if len(inputs) > 3 and inputs[3] is not None else list(range(len(starts))))
        steps = ([int(v) for v in imp.const(inputs[4], "the steps").reshape(-1)]
                 if len(inputs) > 4 and inputs[4] is not None else [1] * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise imp.fail(f"starts, ends, axes and steps have different lengths {len(starts)}, "
                       f"{len(ends)}, {len(axes)}, {len(steps)}")
    if 0 in steps:
        raise imp.fail("a step is 0")
    axes = [_axis(imp, a, len(shape)) for a in axes]
    if len(set(axes)) != len(axes):
        raise imp.fail(f"axes {axes} repeat an axis")
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
    shape = np.array(shape_of(x), np.int64)
    return [shape[attrs.get("start", 0): attrs.get("end", len(shape))]]


MAX_CONSTANT_ELEMENTS = 1 << 32
"""The most elements a folded constant may have (16 GiB of float32; the largest weight of a
real model, an embedding of 128k x 8k, has 2^30): a shape past it is a damaged file, and
folding it (a bias multiplied by its beta) would run out of memory."""


@handles("ConstantOfShape")
def _constant_of_shape(imp: ArkImporter, inputs, attrs):
    shape = [int(v) for v in imp.const(inputs[0], "the shape")]
    if math.prod(max(d, 0) for d in shape) > MAX_CONSTANT_ELEMENTS:
        raise imp.fail(f"a constant of shape {shape} ({math.prod(shape):,} elements; planc "
                       f"folds constants of at most {MAX_CONSTANT_ELEMENTS:,})")
    value = array_of(attrs["value"]) if "value" in attrs else np.zeros(1, np.float32)
    # A read-only broadcast of one element: the light networks' weights are all
    # ConstantOfShape, and VGG-19's, materialised, were 0.6 GB (weights go by shape).
    return [np.broadcast_to(value.reshape(-1)[:1].astype(value.dtype), shape)]


@handles("Range")
def _range(imp: ArkImporter, inputs, attrs):
    start, limit, delta = (imp.const(v, "a bound") for v in inputs)
    return [np.arange(start, limit, delta, dtype=np.result_type(start, limit, delta))]
