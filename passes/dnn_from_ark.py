"""dnn-from-ark: an ARK model as a `dnn` layer graph, so that Gemini can schedule it.

ARK tensors are row-major [..., rows, columns]; a feature map is [N, C, H, W]. The conversion
maps the columns to channels, the rows to H and all leading dims to N (W = 1), so that an
element-wise op stays element-wise, a row-wise reduction reduces channels, and the PE array's
64 output lanes run over the columns of a matrix product:

* Matmul with weights (its `other` is a model input, not computed): a 1x1 conv2d with weights
  [columns out, columns in, 1, 1] (ARK's `other`, transposed unless TransposeOther);
* Matmul of two computed tensors (attention scores, context): `dnn.matmul`;
* Add/Sub/Mul/Div/Rope: `dnn.eltwise` (element_wise_<op>, broadcasting kept);
* Exp, Gelu, Relu, Rsqrt, Sigmoid, Sqrt, Copy, Cast, ScalarAdd/Mul/Assign: `dnn.unary`;
* ReduceSum/Max/Mean along the last two axes: `dnn.reduce` over C or H;
* Transpose: `dnn.transpose` (a layout change on the data-transfer engine);
* reshapes (views, Reshape, Tensor): `dnn.reshape` views.

Model inputs that are not weights become network inputs; results nobody reads become network
outputs. Communication ops and Embedding have no Gemini counterpart and are rejected with the
op's JSON path. The ARK model is replaced by the graph. Feature maps hold ARK's row-major data
with rows as H, so reshapes are marked as row-major views.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f64, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from compiler.diagnostics import PlancError
from compiler.locations import source_path
from dialects import ark, dnn

DTYPES = {"FP16": "float16", "FP32": "float32", "BF16": "bfloat16", "INT8": "int8",
          "UINT8": "uint8", "INT32": "int32", "UINT32": "uint32", "BYTE": "int8"}
ELEMENTWISE = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Rope": "rope"}
UNARY = {"Exp": "exp", "Gelu": "gelu", "Relu": "relu", "Rsqrt": "rsqrt", "Sigmoid": "sigmoid",
         "Sqrt": "sqrt", "Copy": "copy", "Cast": "cast", "ScalarAdd": "scalar_add",
         "ScalarMul": "scalar_mul", "ScalarAssign": "scalar_assign"}
REDUCE = {"ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMean": "reduce_mean"}


def fmap_shape(shape: Sequence[int]) -> list[int]:
    """[..., rows, columns] -> [N = leading dims, C = columns, H = rows, W = 1]."""
    shape = list(shape)
    if len(shape) == 1:
        return [1, shape[0], 1, 1]
    return [math.prod(shape[:-2]), shape[-1], shape[-2], 1]


def fmap_type(tensor: ark.TensorType, shape: Sequence[int] | None = None) -> dnn.FmapType:
    dtype = DTYPES.get(tensor.data_type)
    if dtype is None:
        raise PlancError(f"tensor {tensor.tensor_id}: data type {tensor.data_type} has no "
                         f"Gemini counterpart")
    return dnn.FmapType.get(fmap_shape(tensor.shape_list if shape is None else shape), dtype)


@dataclass
class Converter:
    block: Block
    values: dict[SSAValue, SSAValue]
    names: set[str]

    def fail(self, op, message: str) -> PlancError:
        return PlancError(message, path=source_path(op))

    def unique(self, name: str) -> str:
        candidate, i = name, 1
        while candidate in self.names:
            candidate, i = f"{name}_{i}", i + 1
        self.names.add(candidate)
        return candidate

    def value(self, ark_value: SSAValue) -> SSAValue:
        """The feature map holding `ark_value` (model inputs become network inputs)."""
        found = self.values.get(ark_value)
        if found is not None:
            return found
        tensor = ark_value.type
        owner = ark_value.owner
        if isinstance(owner, ark.ViewOp) and owner.source is not None:
            base = self.value(owner.source)
            found = self.reshape(base, fmap_type(tensor), f"view{tensor.tensor_id}")
        else:
            op = dnn.InputOp.new(self.unique(f"tensor{tensor.tensor_id}"), fmap_type(tensor))
            self.block.insert_op_before(op, self.block.first_op) if self.block.first_op \
                else self.block.add_op(op)
            found = op.output
        self.values[ark_value] = found
        return found

    def reshape(self, value: SSAValue, target: dnn.FmapType, name: str) -> SSAValue:
        if value.type == target:
            return value
        layer = dnn.ReshapeOp.new(self.unique(name), "reshape", [value], target,
                                  row_major=IntegerAttr(1, 1))
        self.block.add_op(layer)
        return layer.output

    def add(self, op: ark.ArkOp, layer: dnn.LayerOp, result_shape: Sequence[int] | None = None,
            ) -> None:
        layer.location = op.location
        self.block.add_op(layer)
        out = layer.output
        if result_shape is not None:
            out = self.reshape(out, fmap_type(op.results_types[0]), f"{layer.name_}_view")
        for result in op.result_tensors:
            self.values[result] = out

    # -- operators ----------------------------------------------------------------------------

    def convert(self, op: ark.ArkOp) -> None:
        kind = op.ark_type
        name = self.unique(op.label.data or kind.lower())
        if isinstance(op, ark.CommOp) or kind in ("Embedding",) or isinstance(op, ark.GenericOp):
            raise self.fail(op, f"ARK operator {kind} ('{op.label.data}') has no Gemini "
                                f"counterpart")
        if kind == "Noop":
            return
        if kind in ("Tensor", "Reshape"):
            if op.read_tensors and op.result_tensors:
                src = self.value(op.read_tensors[0])
                if dnn.fmap(src).elements != op.results_types[0].num_elements:
                    raise self.fail(op, f"{kind} '{op.label.data}' slices a tensor; slices are "
                                        f"not supported by the Gemini target")
                self.values[op.result_tensors[0]] = self.reshape(
                    src, fmap_type(op.results_types[0]), name)
            return
        out = op.results_types[0] if op.results_types else op.outputs[0]
        if kind == "Matmul":
            return self.matmul(op, name, out)
        inputs = [self.value(v) for v in op.read_tensors]
        if kind in ELEMENTWISE:
            shapes = [self.broadcast_view(op, v, t, out)
                      for v, t in zip(inputs, op.inputs, strict=True)]
            layer = dnn.EltwiseOp.new(name, f"element_wise_{ELEMENTWISE[kind]}", shapes,
                                      fmap_type(out))
        elif kind in UNARY:
            factor = getattr(op, "factor", None) or getattr(op, "value", None)
            layer = dnn.UnaryOp.new(name, UNARY[kind], inputs[:1], fmap_type(out),
                                    factor=FloatAttr(factor.value.data, f64) if factor else None)
        elif kind in REDUCE:
            return self.reduce(op, name, inputs[0], out)
        elif kind == "Transpose":
            layer = dnn.TransposeOp.new(name, "transpose", inputs[:1], fmap_type(out),
                                        perm=dnn._ints(op.perm),
                                        from_shape=dnn._ints(op.inputs[0].shape_list))
        else:
            raise self.fail(op, f"ARK operator {kind} ('{op.label.data}') has no Gemini "
                                f"counterpart")
        self.add(op, layer)

    def broadcast_view(self, op, value: SSAValue, tensor: ark.TensorType,
                       out: ark.TensorType) -> SSAValue:
        """An operand of lower rank, padded with leading 1s to the output's rank."""
        rank = len(out.shape_list)
        padded = [1] * (rank - len(tensor.shape_list)) + tensor.shape_list
        lead, out_lead = math.prod(padded[:-2]), math.prod(out.shape_list[:-2])
        if lead not in (1, out_lead):
            raise self.fail(op, f"{op.ark_type} '{op.label.data}' broadcasts over a leading "
                                f"dim ({tensor.shape_list} to {out.shape_list}), which the "
                                f"[N, C, H, W] mapping cannot express")
        return self.reshape(value, fmap_type(tensor, padded), f"{op.label.data}_bcast")

    def matmul(self, op: ark.MatmulOp, name: str, out: ark.TensorType) -> None:
        if op.trans_input:
            raise self.fail(op, f"Matmul '{op.label.data}' transposes its input; insert a "
                                f"Transpose for the Gemini target")
        a_value, b_value = op.read_tensors
        b_tensor = op.inputs[1]
        x = self.value(a_value)
        m, n, k = op.problem_mnk()
        owner = b_value.owner
        is_weight = isinstance(owner, ark.ViewOp) and owner.source is None and \
            math.prod(b_tensor.shape_list[:-2]) == 1 and b_value not in self.values
        if is_weight:
            weight = dnn.InputOp.new(self.unique(f"tensor{b_tensor.tensor_id}"),
                                     dnn.FmapType.get([n, k, 1, 1], DTYPES[b_tensor.data_type]),
                                     constant=True)
            self.block.insert_op_before(weight, self.block.first_op)
            layer = dnn.Conv2dOp.new(name, "conv2d", [x, weight.output], fmap_type(out),
                                     kernel_size=dnn._ints([1, 1]), stride=dnn._ints([1, 1]),
                                     padding=dnn._ints([0, 0, 0, 0]))
        else:
            layer = dnn.MatmulOp.new(name, "matmul", [x, self.value(b_value)], fmap_type(out),
                                     transpose_b=IntegerAttr(int(op.trans_other), 1))
        self.add(op, layer)

    def reduce(self, op: ark.ReduceOp, name: str, x: SSAValue, out: ark.TensorType) -> None:
        shape = op.inputs[0].shape_list
        axis = op.axis_index
        rank = len(shape)
        if axis == rank - 1:
            fmap_axis = 1
        elif axis == rank - 2:
            fmap_axis = 2
        elif math.prod(shape[:-2]) == shape[axis]:
            fmap_axis = 0
        else:
            raise self.fail(op, f"{op.ark_type} '{op.label.data}' reduces leading axis {axis} "
                                f"of {shape}, which the [N, C, H, W] mapping cannot express")
        kept = dnn.fmap(x).nchw
        kept[fmap_axis] = 1
        layer = dnn.ReduceOp.new(name, REDUCE[op.ark_type], [x],
                                 dnn.FmapType.get(kept, DTYPES[out.data_type]),
                                 axis=IntegerAttr(fmap_axis, i64))
        self.add(op, layer, result_shape=out.shape_list)


@dataclass(frozen=True)
class DnnFromArkPass(ModulePass):
    """Replace the ark.model by the equivalent dnn.graph."""

    name = "dnn-from-ark"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [m for m in op.ops if isinstance(m, ark.ModelOp)]
        if not models:
            raise PlancError("dnn-from-ark needs an ARK model")
        for model in models:
            graph = self.convert(model)
            op.body.block.insert_op_before(graph, model)
            model.detach()
            model.erase(safe_erase=False)

    def convert(self, model: ark.ModelOp) -> dnn.GraphOp:
        block = Block()
        converter = Converter(block, {}, set())
        operators = model.operators()
        for operator in operators:
            converter.convert(operator)
        read = {v for o in operators for v in o.read_tensors}
        read |= {o.source for o in model.body.block.ops
                 if isinstance(o, ark.ViewOp) and o.source is not None}
        for operator in operators:
            for result in operator.result_tensors:
                if result not in read and result in converter.values:
                    name = converter.unique(f"output_{operator.label.data}")
                    block.add_op(dnn.OutputOp.new(name, converter.values[result]))
        if not any(isinstance(o, dnn.LayerOp) for o in block.ops):
            raise PlancError("the ARK model has no operator Gemini can run")
        graph = dnn.GraphOp.create(regions=[Region(block)])
        graph.location = model.location
        return graph

