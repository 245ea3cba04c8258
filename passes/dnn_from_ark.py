"""dnn-from-ark: an ARK model as a `dnn` layer graph, so that Gemini can schedule it.

ARK tensors are row-major [..., rows, columns]; a feature map is [N, C, H, W]. The conversion
maps the columns to channels, the rows to H and all leading dims to N (W = 1), so that an
element-wise op stays element-wise, a row-wise reduction reduces channels, and the PE array's
64 output lanes run over the columns of a matrix product:

* Matmul with weights (its `other` is a model input, not computed): a 1x1 conv2d with weights
  [columns out, columns in, 1, 1] (ARK's `other`, transposed unless TransposeOther);
* Matmul of two computed tensors (attention scores, context): `dnn.matmul` (a transposed
  input gets a `dnn.transpose` first);
* Add/Sub/Mul/Div/Rope: `dnn.eltwise` (element_wise_<op>, broadcasting kept);
* Exp, Gelu, Relu, Rsqrt, Sigmoid, Sqrt, Copy, Cast, ScalarAdd/Mul: `dnn.unary`;
* ScalarAssign: a constant filled with its value (`dnn.input` with `fill`), which the host
  writes like any constant;
* ReduceSum/Max/Mean along the last two axes: `dnn.reduce` over C or H;
* Transpose: `dnn.transpose` (a layout change on the data-transfer engine);
* reshapes (views, Reshape, Tensor): `dnn.reshape` views; slices (views with the strides of
  their source: Q, K and V out of a fused projection) are `dnn.slice` views when they are a
  box of the feature map (any rows and columns, and leading dims that stay contiguous in N);
* a slice whose leading dims are no range of N (one head of every sample) is a
  `dnn.strided_slice` copy on the data-transfer engine;
* an operand broadcast over some but not all of its leading dims (a [1, 3, 12, 5] `other` of a
  [2, 3, 9, 12] matmul, a per-sample mask over heads) gets a `dnn.broadcast` copy on the
  data-transfer engine; broadcasts over all of N stay implicit.

With `batch` > 1 the network runs `batch` samples of the model: every tensor that carries
samples (network inputs and everything computed from them) gets a leading dim of `batch`
(N = batch x the model's leading dims); weights and filled constants are shared.

Model inputs that are not weights become network inputs; results nobody reads become network
outputs. Inputs and outputs record the ARK tensor they stand for (`ark.tensor`, and
`ark.transposed` on weights stored transposed), so that the graph can be checked against the
model (`targets.gemini.equivalence`). What Gemini cannot express is refused with the
operator's JSON path, the reason and the way out: communication ops and Embedding (run them on
the host and cut the network there), views in a frame of their own over a strided source, and
reads of a buffer that operators wrote through another view (Gemini layers produce whole, fresh
feature maps) unless the writes are a concat: slices side by side along the columns (or the
rows) that cover the tensor read exactly once become a `dnn.concat` of what was written along
channels (or H; as in Gemini, the readers read each part at its offset). Feature maps hold
ARK's row-major data with rows as H, so reshapes are marked as row-major views.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, ModuleOp, f64, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.passes import ModulePass

from dialects import ark, dnn
from dialects.locations import source_path
from ground.diagnostics import PlancError

DTYPES = {"FP16": "float16", "FP32": "float32", "BF16": "bfloat16", "INT8": "int8",
          "UINT8": "uint8", "INT32": "int32", "UINT32": "uint32", "BYTE": "int8"}
ELEMENTWISE = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Rope": "rope"}
UNARY = {"Exp": "exp", "Gelu": "gelu", "Relu": "relu", "Rsqrt": "rsqrt", "Sigmoid": "sigmoid",
         "Sqrt": "sqrt", "Copy": "copy", "Cast": "cast", "ScalarAdd": "scalar_add",
         "ScalarMul": "scalar_mul"}
REDUCE = {"ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMean": "reduce_mean"}


def fmap_shape(shape: Sequence[int]) -> list[int]:
    """[..., rows, columns] -> [N = leading dims, C = columns, H = rows, W = 1]."""
    shape = list(shape)
    if len(shape) == 1:
        return [1, shape[0], 1, 1]
    return [math.prod(shape[:-2]), shape[-1], shape[-2], 1]


def dtype_of(tensor: ark.TensorType) -> str:
    dtype = DTYPES.get(tensor.data_type)
    if dtype is None:
        raise PlancError(f"tensor {tensor.tensor_id}: data type {tensor.data_type} has no "
                         f"Gemini counterpart")
    return dtype


def fmap_type(tensor: ark.TensorType, shape: Sequence[int] | None = None) -> dnn.FmapType:
    return dnn.FmapType.get(fmap_shape(tensor.shape_list if shape is None else shape),
                            dtype_of(tensor))


def _at_least_2d(shape: Sequence[int]) -> list[int]:
    return [1] * (2 - len(shape)) + list(shape)


def _dense(tensor: ark.TensorType) -> bool:
    return tensor.strides_list == tensor.shape_list and not any(tensor.offsets_list)


def _flat_index(index: Sequence[int], shape: Sequence[int]) -> int:
    flat = 0
    for i, d in zip(index, shape, strict=True):
        flat = flat * d + i
    return flat


def _side_by_side(tensor: ark.TensorType, writes: list[tuple[ark.TensorType, SSAValue]],
                  axis: int) -> list[SSAValue] | None:
    """What `writes` wrote, in order along `axis`, when they lie side by side along it and
    cover `tensor` exactly once (same frame, same extent along every other dim)."""
    shape, offsets = tensor.shape_list, tensor.offsets_list
    others = [d for d in range(len(shape)) if d != len(shape) + axis]
    parts = []
    for written, value in writes:
        if written.strides_list != tensor.strides_list or \
                any(written.shape_list[d] != shape[d] or written.offsets_list[d] != offsets[d]
                    for d in others):
            return None
        parts.append((written.offsets_list[axis], written.shape_list[axis], value))
    parts.sort(key=lambda part: part[:2])
    at = offsets[axis]
    for start, width, _ in parts:
        if start != at:
            return None
        at += width
    return [value for _, _, value in parts] if at == offsets[axis] + shape[axis] else None


def _named(op: ark.ArkOp) -> str:
    return f"{op.ark_type} '{op.label.data}'"


HOST_CUT = ("lower it on the host side and cut the network there (run the part before it and "
            "the part after it as two Gemini networks)")


@dataclass
class Converter:
    block: Block
    values: dict[SSAValue, SSAValue]
    names: set[str]
    batch: int = 1
    carries: dict[SSAValue, bool] = field(default_factory=dict)
    """Does a feature map carry samples (True) or is it shared by all (weights, fills)?"""
    written: set[int] = field(default_factory=set)
    """Buffers that converted operators wrote."""
    writes: dict[int, list[tuple[ark.TensorType, SSAValue]]] = field(default_factory=dict)
    """Per buffer, the tensors operators wrote into it and the feature maps they wrote."""
    assembled: dict[SSAValue, int] = field(default_factory=dict)
    """ARK values read as a concatenation of writes, and their buffer (a later write makes
    them stale)."""

    def fail(self, op, message: str) -> PlancError:
        return PlancError(message, path=source_path(op))

    def unique(self, name: str) -> str:
        candidate, i = name, 1
        while candidate in self.names:
            candidate, i = f"{name}_{i}", i + 1
        self.names.add(candidate)
        return candidate

    # -- shapes -------------------------------------------------------------------------------

    def logical(self, shape: Sequence[int], carries: bool) -> list[int]:
        """The ARK shape with the batch in front (when batching): [batch or 1, *shape]."""
        shape = _at_least_2d(shape)
        return [self.batch if carries else 1, *shape] if self.batch > 1 else shape

    def ftype(self, tensor: ark.TensorType, carries: bool,
              shape: Sequence[int] | None = None) -> dnn.FmapType:
        shape = tensor.shape_list if shape is None else shape
        return dnn.FmapType.get(fmap_shape(self.logical(shape, carries)), dtype_of(tensor))

    def carrying(self, values: Sequence[SSAValue]) -> bool:
        return any(self.carries.get(v, True) for v in values)

    # -- values -------------------------------------------------------------------------------

    def input(self, name: str, ftype: dnn.FmapType, tensor_id: int, constant: bool = False,
              fill: float | None = None, transposed: bool = False) -> SSAValue:
        op = dnn.InputOp.new(self.unique(name), ftype, constant=constant, fill=fill)
        op.attributes["ark.tensor"] = IntegerAttr(tensor_id, i64)
        if transposed:
            op.attributes["ark.transposed"] = IntegerAttr(1, 1)
        self.block.insert_op_before(op, self.block.first_op) if self.block.first_op \
            else self.block.add_op(op)
        self.carries[op.output] = not constant and fill is None
        return op.output

    def value(self, ark_value: SSAValue, reader) -> SSAValue:
        """The feature map holding `ark_value` (model inputs become network inputs)."""
        found = self.values.get(ark_value)
        if found is not None:
            return found
        tensor = ark_value.type
        owner = ark_value.owner
        if isinstance(owner, ark.ViewOp) and owner.source is not None:
            base = self.value(owner.source, reader)
            found = self.view(reader, owner.source.type, tensor, base, f"view{tensor.tensor_id}")
            if owner.source in self.assembled:
                self.assembled[ark_value] = self.assembled[owner.source]
        else:
            found = self.concatenation(reader, tensor)
            if found is not None:
                self.assembled[ark_value] = tensor.buffer_id
            else:
                self.refuse_stale(reader, tensor)
                found = self.input(f"tensor{tensor.tensor_id}", self.ftype(tensor, True),
                                   tensor.tensor_id)
        self.values[ark_value] = found
        return found

    def concatenation(self, reader, tensor: ark.TensorType) -> SSAValue | None:
        """`tensor` when operators wrote it as a concat, through slices side by side along
        its columns or its rows that cover it exactly once (what ONNX's Concat lowers to): a
        `dnn.concat` of what they wrote along channels or H, which Gemini's readers read at
        the parts' offsets; None for any other writes (partial or overlapping ones, or side
        by side along leading dims, which are N)."""
        writes = self.writes.get(tensor.buffer_id)
        if not writes or len(tensor.shape_list) < 2:
            return None
        for ark_axis, fmap_axis in ((-1, 1), (-2, 2)):
            values = _side_by_side(tensor, writes, ark_axis)
            if values is None:
                continue
            carries = self.carrying(values)
            out = self.ftype(tensor, carries)
            if any([d for i, d in enumerate(dnn.fmap(v).nchw) if i != fmap_axis] !=
                   [d for i, d in enumerate(out.nchw) if i != fmap_axis] for v in values):
                return None     # samples broadcast into some parts: not side by side
            layer = dnn.ConcatOp.new(self.unique(f"concat{tensor.tensor_id}"), "concat",
                                     values, out, axis=IntegerAttr(fmap_axis, i64))
            layer.location = reader.location
            self.block.add_op(layer)
            self.carries[layer.output] = carries
            return layer.output
        return None

    def refuse_stale(self, reader, tensor: ark.TensorType) -> None:
        if tensor.buffer_id in self.written:
            raise self.fail(reader, f"{_named(reader)} reads tensor "
                                    f"{tensor.tensor_id} of buffer {tensor.buffer_id}, which "
                                    f"earlier operators wrote through other tensors, in slices "
                                    f"that are no concat along its columns or rows (a partial "
                                    f"or in-place update, a concat of leading dims); Gemini "
                                    f"layers produce whole, fresh feature maps: read the "
                                    f"writers' results, or {HOST_CUT}")

    def view(self, reader, src: ark.TensorType, tensor: ark.TensorType, base: SSAValue,
             name: str) -> SSAValue:
        """`tensor` as a view of `src` (whose data `base` holds): a slice box or a reshape."""
        carries = self.carries.get(base, True)
        frame = tensor.strides_list
        if src.strides_list == frame and (
                src.shape_list != tensor.shape_list or src.offsets_list != tensor.offsets_list):
            return self.slice(reader, src, tensor, base, carries, name)
        if tensor.num_elements == src.num_elements and (
                src.shape_list == tensor.shape_list or _dense(src) and _dense(tensor)):
            return self.reshape(base, self.ftype(tensor, carries), name)
        if _dense(src) and math.prod(frame) == src.num_elements:
            # A slice of a reshape of `src` (files name the buffer's producer as the source):
            # the reshape to the slice's frame, then the slice.
            whole = ark.TensorType.get(src.tensor_id, src.data_type, frame, src.buffer)
            framed = self.reshape(base, self.ftype(whole, carries), f"{name}_frame")
            return self.slice(reader, whole, tensor, framed, carries, name)
        raise self.fail(reader, f"{_named(reader)} reads tensor {tensor.tensor_id} (shape "
                                f"{tensor.shape_list}, strides "
                                f"{tensor.strides_list}, offsets {tensor.offsets_list}) views "
                                f"tensor {src.tensor_id} (shape {src.shape_list}, strides "
                                f"{src.strides_list}) in a layout no feature map holds (a "
                                f"strided view); copy it into a tensor of its own, or "
                                f"{HOST_CUT}")

    def slice(self, reader, src: ark.TensorType, tensor: ark.TensorType, base: SSAValue,
              carries: bool, name: str) -> SSAValue:
        outer = self.logical(src.shape_list, carries)
        inner = self.logical(tensor.shape_list, carries)
        rel = [t - s for t, s in zip(tensor.offsets_list, src.offsets_list, strict=True)]
        rel = [0] * (len(inner) - len(rel)) + rel
        lead = len(inner) - 2
        differ = [j for j in range(lead) if inner[j] != outer[j] or rel[j]]
        if min(rel) < 0:
            raise self.fail(reader, f"{_named(reader)} reads tensor {tensor.tensor_id} at "
                                    f"offsets {tensor.offsets_list}, before the start of "
                                    f"tensor {src.tensor_id} (offsets {src.offsets_list}) it "
                                    f"views; {HOST_CUT}")
        if differ and (any(inner[j] != 1 for j in range(differ[0])) or
                       any(inner[j] != outer[j] or rel[j]
                           for j in range(differ[0] + 1, lead))):
            # Not one range of N (one head of every sample): a copy on the transfer engine.
            layer = dnn.StridedSliceOp.new(self.unique(name), "strided_slice", [base],
                                           self.ftype(tensor, carries),
                                           from_shape=dnn._ints(outer),
                                           offsets=dnn._ints(rel), shape=dnn._ints(inner))
            layer.location = reader.location
            self.block.add_op(layer)
            self.carries[layer.output] = carries
            return layer.output
        n0 = _flat_index(rel[:lead], outer[:lead]) if lead else 0
        layer = dnn.SliceOp.new(self.unique(name), "slice", [base],
                                self.ftype(tensor, carries),
                                offsets=dnn._ints([n0, rel[-1], rel[-2], 0]))
        self.block.add_op(layer)
        self.carries[layer.output] = carries
        return layer.output

    def reshape(self, value: SSAValue, target: dnn.FmapType, name: str) -> SSAValue:
        if value.type == target:
            return value
        layer = dnn.ReshapeOp.new(self.unique(name), "reshape", [value], target,
                                  row_major=IntegerAttr(1, 1))
        self.block.add_op(layer)
        self.carries[layer.output] = self.carries.get(value, True)
        return layer.output

    def add(self, op: ark.ArkOp, layer: dnn.LayerOp, result_shape: Sequence[int] | None = None,
            ) -> None:
        layer.location = op.location
        self.block.add_op(layer)
        carries = self.carrying(layer.activations)
        self.carries[layer.output] = carries
        out = layer.output
        if result_shape is not None:
            out = self.reshape(out, self.ftype(op.results_types[0], carries),
                               f"{layer.name_}_view")
        for result in op.result_tensors:
            self.values[result] = out

    # -- operators ----------------------------------------------------------------------------

    def convert(self, op: ark.ArkOp) -> None:
        self.convert_op(op)
        self.written.update(t.buffer_id for t in op.outputs)
        for tensor, result in zip(op.outputs, op.result_tensors, strict=False):
            for stale in [v for v, b in self.assembled.items() if b == tensor.buffer_id]:
                del self.assembled[stale]       # read again, the writes no longer fit
                del self.values[stale]
            if result in self.values:
                self.writes.setdefault(tensor.buffer_id, []).append((tensor, self.values[result]))

    def convert_op(self, op: ark.ArkOp) -> None:
        kind = op.ark_type
        name = self.unique(op.label.data or kind.lower())
        if isinstance(op, ark.GenericOp):
            raise ark.unknown_type_error(op)
        if isinstance(op, ark.CommOp) or kind in ("Embedding",):
            what = "communication" if isinstance(op, ark.CommOp) else "a table lookup"
            raise self.fail(op, f"ARK operator {kind} ('{op.label.data}') has no Gemini "
                                f"counterpart ({what}; Gemini cores run layers on the PE "
                                f"array, the vector processor and the data-transfer engine); "
                                f"{HOST_CUT}")
        if kind == "Noop":
            return
        if kind in ("Tensor", "Reshape"):
            if op.read_tensors and op.result_tensors:
                src = self.value(op.read_tensors[0], op)
                self.values[op.result_tensors[0]] = self.view(
                    op, op.inputs[0], op.results_types[0], src, name)
            return
        if kind == "ScalarAssign":
            return self.scalar_assign(op, name)
        out = op.results_types[0] if op.results_types else op.outputs[0]
        if kind == "Matmul":
            return self.matmul(op, name, out)
        inputs = [self.value(v, op) for v in op.read_tensors]
        carries = self.carrying(inputs)
        if kind in ELEMENTWISE:
            shapes = [self.broadcast_view(op, v, t, out, carries)
                      for v, t in zip(inputs, op.inputs, strict=True)]
            layer = dnn.EltwiseOp.new(name, f"element_wise_{ELEMENTWISE[kind]}", shapes,
                                      self.ftype(out, carries))
        elif kind in UNARY:
            factor = getattr(op, "factor", None)
            layer = dnn.UnaryOp.new(name, UNARY[kind], inputs[:1], self.ftype(out, carries),
                                    factor=FloatAttr(factor.value.data, f64) if factor else None)
        elif kind in REDUCE:
            return self.reduce(op, name, inputs[0], out)
        elif kind == "Transpose":
            layer = self.transpose_layer(name, inputs[0], op.inputs[0].shape_list, op.perm,
                                         self.ftype(out, carries))
        else:
            raise self.fail(op, f"ARK operator {kind} ('{op.label.data}') has no Gemini "
                                f"counterpart; {HOST_CUT}")
        self.add(op, layer)

    def transpose_layer(self, name: str, value: SSAValue, shape: Sequence[int],
                        perm: Sequence[int], out: dnn.FmapType) -> dnn.TransposeOp:
        carries = self.carries.get(value, True)
        from_shape = self.logical(shape, carries)
        extra = len(from_shape) - len(perm)
        perm = [*range(extra), *(p + extra for p in perm)]
        return dnn.TransposeOp.new(name, "transpose", [value], out, perm=dnn._ints(perm),
                                   from_shape=dnn._ints(from_shape))

    def scalar_assign(self, op: ark.ArkOp, name: str) -> None:
        tensor = op.outputs[0]
        value = self.input(name, self.ftype(tensor, False), tensor.tensor_id,
                           fill=op.value.value.data)
        for result in op.result_tensors:
            self.values[result] = value

    def expanded(self, op, value: SSAValue, shape: Sequence[int], lead: Sequence[int],
                 name: str, whole_n: bool = True) -> SSAValue:
        """`value` (row-major `shape`, logical) with its leading dims broadcast to `lead`: a
        view when N maps one to one or (`whole_n`: the layer broadcasts N of size 1) is
        broadcast whole, else a `dnn.broadcast` copy."""
        own = list(shape[:-2])
        target = fmap_shape([*own, *shape[-2:]])
        view = self.reshape(value, dnn.FmapType.get(target, dnn.fmap(value).dtype_name), name)
        if math.prod(own) == math.prod(lead) or whole_n and math.prod(own) == 1:
            return view
        to_shape = [*lead, *shape[-2:]]
        layer = dnn.BroadcastOp.new(self.unique(name), "broadcast", [view],
                                    dnn.FmapType.get(fmap_shape(to_shape),
                                                     dnn.fmap(value).dtype_name),
                                    from_shape=dnn._ints(shape), to_shape=dnn._ints(to_shape))
        layer.location = op.location
        self.block.add_op(layer)
        self.carries[layer.output] = self.carries.get(value, True)
        return layer.output

    def broadcast_view(self, op, value: SSAValue, tensor: ark.TensorType,
                       out: ark.TensorType, out_carries: bool) -> SSAValue:
        """An operand padded with leading 1s to the output's rank, its leading dims broadcast
        to the output's where N does not map one to one."""
        rank = max(len(out.shape_list), len(tensor.shape_list))
        padded = [1] * (rank - len(tensor.shape_list)) + tensor.shape_list
        out_shape = self.logical([1] * (rank - len(out.shape_list)) + out.shape_list,
                                 out_carries)
        shape = self.logical(padded, self.carries.get(value, True))
        return self.expanded(op, value, shape, out_shape[:-2], f"{op.label.data}_bcast")

    def matmul(self, op: ark.MatmulOp, name: str, out: ark.TensorType) -> None:
        a_value, b_value = op.read_tensors
        a_tensor, b_tensor = op.inputs
        x = self.value(a_value, op)
        m, n, k = op.problem_mnk()
        owner = b_value.owner
        is_weight = isinstance(owner, ark.ViewOp) and owner.source is None and \
            math.prod(b_tensor.shape_list[:-2]) == 1 and b_value not in self.values and \
            b_tensor.buffer_id not in self.written
        carries = self.carries.get(x, True)
        rank = max(len(a_tensor.shape_list), len(b_tensor.shape_list), 2)
        a_shape = self.logical([1] * (rank - len(a_tensor.shape_list)) + a_tensor.shape_list,
                               carries)
        if op.trans_input:      # the PE array reads rows of the input: transpose it first
            perm = [*range(len(a_shape) - 2), len(a_shape) - 1, len(a_shape) - 2]
            swapped = [*a_shape[:-2], a_shape[-1], a_shape[-2]]
            layer = dnn.TransposeOp.new(self.unique(f"{name}_input_t"), "transpose", [x],
                                        dnn.FmapType.get(fmap_shape(swapped),
                                                         dnn.fmap(x).dtype_name),
                                        perm=dnn._ints(perm), from_shape=dnn._ints(a_shape))
            layer.location = op.location
            self.block.add_op(layer)
            self.carries[layer.output] = carries
            x, a_shape = layer.output, swapped
        if is_weight:
            weight = self.input(f"tensor{b_tensor.tensor_id}",
                                dnn.FmapType.get([n, k, 1, 1], dtype_of(b_tensor)),
                                b_tensor.tensor_id, constant=True,
                                transposed=not op.trans_other)
            layer = dnn.Conv2dOp.new(name, "conv2d", [x, weight], self.ftype(out, carries),
                                     kernel_size=dnn._ints([1, 1]), stride=dnn._ints([1, 1]),
                                     padding=dnn._ints([0, 0, 0, 0]))
            return self.add(op, layer)
        y = self.value(b_value, op)
        carries = carries or self.carries.get(y, True)
        b_shape = self.logical([1] * (rank - len(b_tensor.shape_list)) + b_tensor.shape_list,
                               self.carries.get(y, True))
        lead = [max(p, q) for p, q in zip(a_shape[:-2], b_shape[:-2], strict=True)]
        x = self.expanded(op, x, a_shape, lead, f"{name}_a", whole_n=False)
        y = self.expanded(op, y, b_shape, lead, f"{name}_b")
        layer = dnn.MatmulOp.new(name, "matmul", [x, y],
                                 dnn.FmapType.get(fmap_shape([*lead, m, n]), dtype_of(out)),
                                 transpose_b=IntegerAttr(int(op.trans_other), 1))
        self.add(op, layer, result_shape=out.shape_list)

    def reduce(self, op: ark.ReduceOp, name: str, x: SSAValue, out: ark.TensorType) -> None:
        shape = op.inputs[0].shape_list
        axis = op.axis_index
        rank = len(shape)
        carries = self.carries.get(x, True)
        if axis == rank - 1:
            fmap_axis = 1
        elif axis == rank - 2:
            fmap_axis = 2
        elif math.prod(shape[:-2]) == shape[axis] and not (carries and self.batch > 1):
            fmap_axis = 0
        else:
            raise self.fail(op, f"{op.ark_type} '{op.label.data}' reduces leading axis {axis} "
                                f"of {shape}, which would mix "
                                f"{'samples' if self.batch > 1 else 'other leading dims'} in "
                                f"the feature map's N; Gemini reduces along channels or rows: "
                                f"transpose that axis to the last two first, or {HOST_CUT}")
        kept = dnn.fmap(x).nchw
        kept[fmap_axis] = 1
        layer = dnn.ReduceOp.new(name, REDUCE[op.ark_type], [x],
                                 dnn.FmapType.get(kept, DTYPES[out.data_type]),
                                 axis=IntegerAttr(fmap_axis, i64))
        self.add(op, layer, result_shape=out.shape_list)


LAYER_KINDS = frozenset({"Matmul", "Transpose", *ELEMENTWISE, *UNARY, *REDUCE})
"""ARK operator types each of which `convert_op` turns into at least one layer."""


def _refuse_more_layers_than(operators: Sequence[ark.ArkOp], cap: int) -> None:
    """Refuse, at its operator, the first computing operator beyond `cap`: counting operator
    types, not converting them."""
    computing = [o for o in operators if o.ark_type in LAYER_KINDS]
    if len(computing) > cap:
        raise PlancError(f"the network has at least {len(computing)} layers to schedule (one "
                         f"per computing operator), each at least one workload: more than the "
                         f"{cap} workloads planc schedules", path=source_path(computing[cap]))


@dataclass(frozen=True)
class DnnFromArkPass(ModulePass):
    """Replace the ark.model by the equivalent dnn.graph."""

    name = "dnn-from-ark"

    batch: int = 1
    """Samples the network runs at once (see the module docstring)."""
    max_layers: int = 0
    """With a positive value, a model of more computing operators than that (each becomes at
    least one layer) is refused before any is converted: the Gemini target passes its workload
    cap, which the scheduler would otherwise enforce only after converting every layer (20,000
    operators took over 30 s to reach that refusal)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [m for m in op.ops if isinstance(m, ark.ModelOp)]
        if not models:
            raise PlancError("dnn-from-ark needs an ARK model")
        if not 1 <= self.batch <= 2**63 - 1:    # the graph records it as i64
            raise PlancError(f"dnn-from-ark: batch must be >= 1 and < 2^63, got {self.batch}")
        for model in models:
            graph = self.convert(model)
            op.body.block.insert_op_before(graph, model)
            model.detach()
            model.erase(safe_erase=False)

    def convert(self, model: ark.ModelOp) -> dnn.GraphOp:
        block = Block()
        converter = Converter(block, {}, set(), self.batch)
        operators = model.operators()
        if self.max_layers > 0:
            _refuse_more_layers_than(operators, self.max_layers)
        for operator in operators:
            converter.convert(operator)
        read = {v for o in operators for v in o.read_tensors}
        read |= {o.source for o in model.body.block.ops
                 if isinstance(o, ark.ViewOp) and o.source is not None}
        for operator in operators:
            for result in operator.result_tensors:
                value = converter.values.get(result)
                # A filled constant nobody reads is no work for Gemini: the host has it.
                if result not in read and value is not None and \
                        not isinstance(value.owner, dnn.InputOp):
                    name = converter.unique(f"output_{operator.label.data}")
                    output = dnn.OutputOp.new(name, value)
                    output.attributes["ark.tensor"] = IntegerAttr(result.type.tensor_id, i64)
                    block.add_op(output)
        if not any(isinstance(o, dnn.LayerOp) for o in block.ops):
            raise PlancError("the ARK model has no operator Gemini can run")
        graph = dnn.GraphOp.create(regions=[Region(block)])
        graph.location = model.location
        return graph

