"""The ark dialect: tensor layout rules, per-op verifiers, argument encoding, IR text."""

from __future__ import annotations

import pytest
from xdsl.parser import Parser
from xdsl.utils.exceptions import VerifyException

from compiler.context import planc_context
from dialects import ark
from frontends.model_builder import ModelBuilder


def tensor(tid, shape, dtype="FP32", **kw):
    return ark.TensorType.get(tid, dtype, shape, ark.BufferAttr.get(kw.pop("buffer", tid)), **kw)


class TestTensorType:
    def test_defaults_follow_ark(self):
        t = tensor(0, [2, 3])
        assert t.strides_list == [2, 3] and t.offsets_list == [0, 0]
        assert t.padded_list == [2, 3]

    def test_byte_offset_is_arks_offset_value(self):
        # A window starting at row 1, column 4 of a [4, 8] FP16 array: (1*8 + 4) * 2 bytes.
        t = tensor(0, [2, 4], "FP16", strides=[4, 8], offsets=[1, 4])
        assert t.byte_offset == 24
        assert t.span_bytes == 4 * 8 * 2

    @pytest.mark.parametrize("kw, message", [
        ({"shape": [1, 2, 3, 4, 5]}, "expected 1 to 4 dims, got 5"),
        ({"shape": [4, 8], "strides": [4, 8], "offsets": [1, 0]}, "offsets + shape exceed strides in dim 0"),
        ({"shape": [4], "strides": [4, 4]}, "strides [4, 4] has 2 dims but shape [4] has 1"),
        ({"shape": [4], "padded_shape": [2]}, "padded shape [2] is smaller than shape [4]"),
        ({"shape": [0]}, "shapes and strides must be >= 1"),
        ({"shape": [4], "dtype": "FP8"}, "unknown data type 'FP8'"),
    ])
    def test_layout_rules(self, kw, message):
        shape = kw.pop("shape")
        dtype = kw.pop("dtype", "FP32")
        with pytest.raises(VerifyException, match=message.replace("[", r"\[").replace("+", r"\+")):
            ark.TensorType.get(0, dtype, shape, ark.BufferAttr.get(0), **kw)


class TestArguments:
    @pytest.mark.parametrize("kind, value", [
        (ark.ArgKind.INT, -5), (ark.ArgKind.UINT32, 7), (ark.ArgKind.INT64, 2**40),
        (ark.ArgKind.UINT64, 2**63), (ark.ArgKind.BOOL, True)])
    def test_integer_kinds_are_told_apart_by_their_type(self, kind, value):
        attr = ark.int_arg(kind, value)
        assert ark.ArgKind.of(attr) is kind
        assert ark.arg_value(attr) == value

    def test_float_keeps_the_decimal_of_the_file(self):
        # float32 storage would turn 0.1 into 0.10000000149011612.
        assert ark.arg_value(ark.float_arg(0.1)) == 0.1

    def test_uint32_range_is_checked(self):
        with pytest.raises(VerifyException):
            ark.int_arg(ark.ArgKind.UINT32, -1)


def build_one(build):
    m = ModelBuilder()
    build(m)
    module = m.finish()
    return module.ops.first.operators()[-1]


class TestVerifiers:
    def test_matmul_transposes_decide_k(self):
        op = build_one(lambda m: m.matmul(m.tensor([4, 8]), m.tensor([16, 8]),
                                          transpose_other=True))
        assert op.problem_mnk() == (4, 16, 8)
        op.verify_()

    def test_matmul_batch_dims_broadcast(self):
        op = build_one(lambda m: m.matmul(m.tensor([2, 1, 4, 8]), m.tensor([3, 8, 5])))
        assert op.outputs[0].shape_list == [2, 3, 4, 5]
        op.verify_()

    def test_matmul_inner_mismatch(self):
        op = build_one(lambda m: m.matmul(m.tensor([4, 8]), m.tensor([16, 8])))
        with pytest.raises(VerifyException, match="inner dimensions differ"):
            op.verify_()

    def test_binary_broadcast_output_must_be_the_broadcast_shape(self):
        def build(m):
            m.add(m.tensor([4, 1]), m.tensor([1, 8]), output=m.tensor([4, 4]))
        with pytest.raises(VerifyException, match=r"output shape \[4, 4\] is not the broadcast shape \[4, 8\]"):
            build_one(build).verify_()

    def test_dtype_mismatch(self):
        def build(m):
            m.add(m.tensor([4], "FP16"), m.tensor([4], "FP32"))
        with pytest.raises(VerifyException, match="data types differ"):
            build_one(build).verify_()

    def test_reduce_keepdim_shapes(self):
        assert build_one(lambda m: m.reduce_max(m.tensor([2, 3, 4]), 1, keep_dim=False)
                         ).outputs[0].shape_list == [2, 4]
        op = build_one(lambda m: m.reduce_sum(m.tensor([2, 3, 4]), -1))
        assert op.outputs[0].shape_list == [2, 3, 1]
        op.verify_()

    def test_reduce_output_shape_checked(self):
        def build(m):
            m.reduce_sum(m.tensor([2, 3]), 1, output=m.tensor([2, 3]))
        with pytest.raises(VerifyException, match="expected \\[2, 1\\]"):
            build_one(build).verify_()

    def test_transpose_uses_numpy_convention(self):
        op = build_one(lambda m: m.transpose(m.tensor([2, 3, 4]), [2, 0, 1]))
        assert op.outputs[0].shape_list == [4, 2, 3]
        op.verify_()

    def test_embedding_shape(self):
        op = build_one(lambda m: m.embedding(m.tensor([2, 7], "INT32"), m.tensor([100, 16])))
        assert op.outputs[0].shape_list == [2, 7, 16]
        op.verify_()

    def test_arity(self):
        m = ModelBuilder()
        a = m.tensor([4])
        out = m.tensor([4])
        op = ark.ExpOp("e", [a, a], [out], [out.type.with_id(9)])
        with pytest.raises(VerifyException, match="expected 1 read tensor, got 2"):
            op.verify_()

    def test_missing_argument(self):
        m = ModelBuilder()
        a, out = m.tensor([4]), m.tensor([4])
        op = ark.ScalarMulOp("s", [a], [out], [out.type.with_id(9)])
        with pytest.raises(VerifyException, match="missing argument Factor"):
            op.verify_()

    def test_buffers_must_be_described_consistently(self):
        m = ModelBuilder()
        m.tensor([4], buffer=ark.BufferAttr.get(7))
        m.tensor([4], buffer=ark.BufferAttr.get(7, rank=1))
        with pytest.raises(VerifyException, match="buffer 7 is described differently"):
            m.finish().ops.first.verify_()


def test_registry_covers_every_registered_ark_type():
    # ARK's ModelOpT::from_name registers exactly these 33 names.
    assert set(ark.OPERATOR_BY_TYPE) == {
        "Add", "Cast", "Copy", "Div", "Embedding", "Exp", "Gelu", "Matmul", "Mul", "Noop",
        "Recv", "ReduceMax", "ReduceMean", "ReduceSum", "Relu", "Reshape", "Rope", "Rsqrt",
        "ScalarAdd", "ScalarAssign", "ScalarMul", "Send", "SendDone", "Sigmoid", "Sqrt", "Sub",
        "Tensor", "Transpose", "SendPacket", "RecvPacket", "RecvReduceSendPacket",
        "RecvReduceSend", "DeviceSync"}


def test_ir_text_round_trips():
    m = ModelBuilder()
    x = m.tensor([4, 8])
    m.softmax(m.slice(x, [0, 4], [4, 4]))
    module = m.finish()
    text = str(module)
    again = Parser(planc_context(), text).parse_module()
    assert again.is_structurally_equivalent(module)
    assert str(again) == text
