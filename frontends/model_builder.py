"""Build ARK models in Python, the way ARK's own Python API does (`ark.matmul(x, w)` ...).

    m = ModelBuilder()
    x = m.tensor([1, 256, 1024], "FP16")
    w = m.tensor([2816, 1024], "FP16")
    y = m.sigmoid(m.matmul(x, w, transpose_other=True))
    module = m.finish()                      # an `ark.model`, ready for passes and targets

Every call appends one node holding one operator, with fresh tensor and buffer ids and ARK's
default names (`matmul`, `matmul_1`, ...), exactly as a compressed ARK model file has them.
Composites (`softmax`, `rms_norm`, `layer_norm`) expand into ARK's primitive operators.
Used for the shipped examples, the benchmarks' generated models and tests.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute, Block, Region, SSAValue
from xdsl.rewriter import Rewriter

from dialects import ark
from ground.diagnostics import ArgumentError

Value = SSAValue


def _snake(type_name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type_name).lower()


class ModelBuilder:
    def __init__(self, rank: int = 0, world_size: int = 1, *, view_nodes: bool = False):
        """`view_nodes`: record reshapes and slices as virtual `Tensor` nodes, as ARK's Python
        API writes a model before `Model::compress()` (`ark-compress` removes them); by
        default they are plain views, as in a compressed model."""
        self.rank = rank
        self.world_size = world_size
        self.view_nodes = view_nodes
        self.block = Block()
        self._tensor_ids = 0
        self._buffer_ids = 0
        self._nodes = 0
        self._names: Counter[str] = Counter()
        # ARK's Model::unique_tag() starts at INT_MIN.
        self._next_tag = -(2**31)
        self._tags: dict[int, tuple[list[tuple[int, int]], list[tuple[int, int]]]] = {}

    # -- tensors -----------------------------------------------------------------------------

    def _tensor_id(self) -> int:
        self._tensor_ids += 1
        return self._tensor_ids - 1

    def buffer(self, rank: int = -1, send: Sequence[tuple[int, int]] = (),
               recv: Sequence[tuple[int, int]] = ()) -> ark.BufferAttr:
        self._buffer_ids += 1
        return ark.BufferAttr.get(self._buffer_ids - 1, rank, send, recv)

    def _view(self, tensor: ark.TensorType, source: Value | None = None) -> Value:
        view = ark.ViewOp(tensor, source)
        view.result.name_hint = f"t{tensor.tensor_id}"
        self.block.add_op(view)
        return view.result

    def tensor(self, shape: Sequence[int], dtype: str = "FP16", *,
               buffer: ark.BufferAttr | None = None) -> Value:
        """A new tensor on a new buffer: an input, a weight, or an output to write into."""
        return self._view(ark.TensorType.get(self._tensor_id(), dtype, shape,
                                             buffer or self.buffer()))

    def reshape(self, x: Value, shape: Sequence[int]) -> Value:
        """The same contiguous data with another shape (a compressed ARK reshape)."""
        t = x.type
        if math.prod(shape) != t.num_elements or t.strides_list != t.shape_list:
            raise ArgumentError(f"cannot reshape {t.shape_list} (strides {t.strides_list}) "
                                f"to {list(shape)}")
        return self._derived(x, ark.TensorType.get(self._tensor_id(), t.data_type, shape,
                                                   t.buffer), "reshape")

    def slice(self, x: Value, offsets: Sequence[int], shape: Sequence[int]) -> Value:
        """A window of `x` (ARK's `refer`): same buffer and strides, other offsets/shape."""
        t = x.type
        offsets = [o + base for o, base in zip(offsets, t.offsets_list, strict=True)]
        return self._derived(x, ark.TensorType.get(self._tensor_id(), t.data_type, shape,
                                                   t.buffer, strides=t.strides_list,
                                                   offsets=offsets), "slice")

    def _derived(self, x: Value, tensor: ark.TensorType, name: str) -> Value:
        """A view of `x`: an `ark.view`, or a virtual `Tensor` node with `view_nodes`."""
        if not self.view_nodes:
            return self._view(tensor, source=x)
        op = ark.TensorOp(self._label("Tensor", name), [x], [], [tensor], node=self._nodes)
        self._nodes += 1
        op.result_tensors[0].name_hint = f"t{tensor.tensor_id}"
        self.block.add_op(op)
        return op.result_tensors[0]

    # -- operators ---------------------------------------------------------------------------

    def _label(self, type_name: str, name: str | None) -> str:
        base = name or _snake(type_name)
        count = self._names[base]
        self._names[base] += 1
        return base if count == 0 else f"{base}_{count}"

    def _append(self, cls: type[ark.ArkOp], reads: Sequence[Value], writes: Sequence[Value],
                args: dict[str, Attribute] | None = None, name: str | None = None,
                results_alias: Sequence[Value] | None = None) -> ark.ArkOp:
        aliased = writes if results_alias is None else results_alias
        result_types = [v.type.with_id(self._tensor_id()) for v in aliased[:1]]
        op = cls(self._label(cls.TYPE, name), list(reads), list(writes), result_types,
                 args=args, node=self._nodes)
        self._nodes += 1
        for value in op.result_tensors:
            value.name_hint = f"t{value.type.tensor_id}"
        self.block.add_op(op)
        return op

    def _compute(self, cls: type[ark.ArkOp], reads: Sequence[Value], shape: Sequence[int],
                 dtype: str, output: Value | None, args: dict[str, Attribute] | None = None,
                 name: str | None = None) -> Value:
        out = output if output is not None else self.tensor(shape, dtype)
        return self._append(cls, reads, [out], args, name).result_tensors[0]

    def _unary(self, cls: type[ark.ArkOp], x: Value, output: Value | None = None,
               name: str | None = None, **args: Attribute) -> Value:
        return self._compute(cls, [x], x.type.shape_list, x.type.data_type, output, args, name)

    def _binary(self, cls: type[ark.ArkOp], a: Value, b: Value, output: Value | None = None,
                name: str | None = None) -> Value:
        shape = ark.broadcast_shapes(a.type.shape_list, b.type.shape_list)
        if shape is None:
            raise ArgumentError(f"shapes {a.type.shape_list} and {b.type.shape_list} do not "
                                "broadcast")
        return self._compute(cls, [a, b], shape, a.type.data_type, output, None, name)

    def add(self, a: Value, b: Value, **kw) -> Value:
        return self._binary(ark.AddOp, a, b, **kw)

    def sub(self, a: Value, b: Value, **kw) -> Value:
        return self._binary(ark.SubOp, a, b, **kw)

    def mul(self, a: Value, b: Value, **kw) -> Value:
        return self._binary(ark.MulOp, a, b, **kw)

    def div(self, a: Value, b: Value, **kw) -> Value:
        return self._binary(ark.DivOp, a, b, **kw)

    def rope(self, x: Value, embedding: Value, **kw) -> Value:
        return self._binary(ark.RopeOp, x, embedding, **kw)

    def exp(self, x: Value, **kw) -> Value:
        return self._unary(ark.ExpOp, x, **kw)

    def gelu(self, x: Value, **kw) -> Value:
        return self._unary(ark.GeluOp, x, **kw)

    def relu(self, x: Value, **kw) -> Value:
        return self._unary(ark.ReluOp, x, **kw)

    def rsqrt(self, x: Value, **kw) -> Value:
        return self._unary(ark.RsqrtOp, x, **kw)

    def sigmoid(self, x: Value, **kw) -> Value:
        return self._unary(ark.SigmoidOp, x, **kw)

    def sqrt(self, x: Value, **kw) -> Value:
        return self._unary(ark.SqrtOp, x, **kw)

    def copy(self, x: Value, **kw) -> Value:
        return self._unary(ark.CopyOp, x, **kw)

    def cast(self, x: Value, dtype: str, output: Value | None = None,
             name: str | None = None) -> Value:
        return self._compute(ark.CastOp, [x], x.type.shape_list, dtype, output, None, name)

    def scalar_add(self, x: Value, factor: float, **kw) -> Value:
        return self._unary(ark.ScalarAddOp, x, factor=ark.float_arg(factor), **kw)

    def scalar_mul(self, x: Value, factor: float, **kw) -> Value:
        return self._unary(ark.ScalarMulOp, x, factor=ark.float_arg(factor), **kw)

    def scalar_assign(self, shape: Sequence[int], value: float, dtype: str = "FP16",
                      output: Value | None = None, name: str | None = None) -> Value:
        return self._compute(ark.ScalarAssignOp, [], shape, dtype, output,
                             {"value": ark.float_arg(value)}, name)

    def matmul(self, a: Value, b: Value, *, transpose_input: bool = False,
               transpose_other: bool = False, output: Value | None = None,
               name: str | None = None) -> Value:
        sa, sb = a.type.shape_list, b.type.shape_list
        m = sa[-1] if transpose_input else sa[-2]
        n = sb[-2] if transpose_other else sb[-1]
        batch = ark.broadcast_shapes(sa[:-2], sb[:-2]) or []
        args = {"transpose_input": ark.int_arg(ark.ArgKind.BOOL, transpose_input),
                "transpose_other": ark.int_arg(ark.ArgKind.BOOL, transpose_other)}
        return self._compute(ark.MatmulOp, [a, b], [*batch, m, n], a.type.data_type, output,
                             args, name)

    def _reduce(self, cls: type[ark.ReduceOp], x: Value, axis: int, keep_dim: bool,
                output: Value | None, name: str | None) -> Value:
        shape = x.type.shape_list
        axis = axis % len(shape)
        out = ([1 if i == axis else d for i, d in enumerate(shape)] if keep_dim
               else [d for i, d in enumerate(shape) if i != axis] or [1])
        args = {"axis": ark.int_arg(ark.ArgKind.INT, axis),
                "keep_dim": ark.int_arg(ark.ArgKind.BOOL, keep_dim)}
        return self._compute(cls, [x], out, x.type.data_type, output, args, name)

    def reduce_sum(self, x: Value, axis: int, keep_dim: bool = True,
                   output: Value | None = None, name: str | None = None) -> Value:
        return self._reduce(ark.ReduceSumOp, x, axis, keep_dim, output, name)

    def reduce_max(self, x: Value, axis: int, keep_dim: bool = True,
                   output: Value | None = None, name: str | None = None) -> Value:
        return self._reduce(ark.ReduceMaxOp, x, axis, keep_dim, output, name)

    def reduce_mean(self, x: Value, axis: int, keep_dim: bool = True,
                    output: Value | None = None, name: str | None = None) -> Value:
        return self._reduce(ark.ReduceMeanOp, x, axis, keep_dim, output, name)

    def transpose(self, x: Value, permutation: Sequence[int], output: Value | None = None,
                  name: str | None = None) -> Value:
        shape = [x.type.shape_list[p] for p in permutation]
        return self._compute(ark.TransposeOp, [x], shape, x.type.data_type, output,
                             {"permutation": ark.dims_arg(permutation)}, name)

    def embedding(self, indices: Value, weight: Value, output: Value | None = None,
                  name: str | None = None) -> Value:
        shape = [*indices.type.shape_list, weight.type.shape_list[-1]]
        return self._compute(ark.EmbeddingOp, [indices, weight], shape, weight.type.data_type,
                             output, None, name)

    def noop(self, x: Value, name: str | None = None) -> None:
        self._append(ark.NoopOp, [x], [], name=name)

    # -- composites (ARK's Python API builds these from primitives) ----------------------------

    def softmax(self, x: Value, axis: int = -1) -> Value:
        peak = self.reduce_max(x, axis)
        e = self.exp(self.sub(x, peak))
        return self.div(e, self.reduce_sum(e, axis))

    def rms_norm(self, x: Value, weight: Value, eps: float = 1e-6) -> Value:
        mean_square = self.reduce_mean(self.mul(x, x), -1)
        scale = self.rsqrt(self.scalar_add(mean_square, eps))
        return self.mul(self.mul(x, scale), weight)

    def layer_norm(self, x: Value, eps: float = 1e-5) -> Value:
        centered = self.sub(x, self.reduce_mean(x, -1))
        variance = self.reduce_mean(self.mul(centered, centered), -1)
        return self.mul(centered, self.rsqrt(self.scalar_add(variance, eps)))

    # -- communication -------------------------------------------------------------------------

    def _tag(self) -> int:
        self._next_tag += 1
        return self._next_tag - 1

    def send(self, x: Value, remote_rank: int, tag: int | None = None) -> Value:
        """Send `x` to `remote_rank`; returns the SendDone result (an alias of `x`)."""
        tag = self._tag() if tag is None else tag
        t = x.type
        self._tags.setdefault(t.buffer_id, ([], []))[0].append((remote_rank, tag))
        remote = self._view(ark.TensorType.get(
            self._tensor_id(), t.data_type, t.shape_list,
            self.buffer(rank=remote_rank, recv=[(-1, tag)])))
        sent = self._append(ark.SendOp, [x], [remote]).result_tensors[0]
        return self._append(ark.SendDoneOp, [sent], [], results_alias=[sent]).result_tensors[0]

    def recv(self, shape: Sequence[int], dtype: str, remote_rank: int,
             tag: int | None = None) -> Value:
        """Receive a tensor that `remote_rank` sends with `tag`."""
        tag = self._tag() if tag is None else tag
        remote = self._view(ark.TensorType.get(
            self._tensor_id(), dtype, shape, self.buffer(rank=remote_rank, send=[(-1, tag)])))
        out = self._view(ark.TensorType.get(
            self._tensor_id(), dtype, shape, self.buffer(recv=[(remote_rank, tag)])))
        return self._append(ark.RecvOp, [remote], [out]).result_tensors[0]

    # -- result --------------------------------------------------------------------------------

    def finish(self) -> ModuleOp:
        """The model built so far; the builder must not be used afterwards."""
        self._apply_tags()
        model = ark.ModelOp(self.rank, self.world_size, Region(self.block))
        return ModuleOp([model])

    def _apply_tags(self) -> None:
        """Give every tensor of a buffer the tags sends added to it later.

        ARK records tags on the buffer object and serializes the model at the end, so all
        tensors of a buffer show the same, final tags.
        """
        for op in self.block.ops:
            for value in list(op.results):
                tags = self._tags.get(value.type.buffer_id)
                if tags is None:
                    continue
                t, (send, recv) = value.type, tags
                buffer = ark.BufferAttr.get(t.buffer_id, t.buffer.rank.data,
                                            [*t.buffer.send_tag_pairs, *send],
                                            [*t.buffer.recv_tag_pairs, *recv])
                Rewriter.replace_value_with_new_type(
                    value, ark.TensorType(*t.parameters[:7], buffer, t.extra))
