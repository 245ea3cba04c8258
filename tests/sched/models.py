"""Small models for the planning pipeline's tests, one per pattern it must handle."""

from __future__ import annotations

from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp

from frontends.model_builder import ModelBuilder
from frontends.model_zoo import llama_decoder_layer


def epilogue() -> ModuleOp:
    """matmul + bias + gelu + scale + cast: one kernel."""
    m = ModelBuilder()
    y = m.matmul(m.tensor([1, 64, 96]), m.tensor([128, 96]), transpose_other=True)
    y = m.scalar_mul(m.gelu(m.add(y, m.tensor([128]))), 0.5)
    m.cast(y, "FP32")
    return m.finish()


def norms() -> ModuleOp:
    """softmax, layer norm and RMS norm in FP32."""
    m = ModelBuilder()
    m.softmax(m.tensor([1, 4, 16, 48], "FP32"))
    m.layer_norm(m.tensor([1, 32, 80], "FP32"))
    m.rms_norm(m.tensor([2, 8, 40], "FP32"), m.tensor([1, 1, 40], "FP32"))
    return m.finish()


def transposed() -> ModuleOp:
    """A transpose with an element-wise consumer, and a reduction along a middle axis."""
    m = ModelBuilder()
    t = m.transpose(m.tensor([1, 3, 40, 24], "FP32"), [0, 2, 1, 3])
    m.relu(m.scalar_add(t, -0.25))
    m.reduce_sum(m.tensor([2, 30, 20], "FP32"), 1)
    return m.finish()


def embedding() -> ModuleOp:
    """Token embedding followed by RMS norm."""
    m = ModelBuilder()
    rows = m.embedding(m.tensor([2, 8], "INT32"), m.tensor([50, 64], "FP32"))
    m.rms_norm(rows, m.tensor([1, 1, 64], "FP32"))
    return m.finish()


def matmul_layouts() -> ModuleOp:
    """Batched matmul with broadcasting, a transposed input, a lone matmul with a long K (split
    along K where one wave leaves processors idle) and its transposed twin."""
    m = ModelBuilder()
    m.matmul(m.tensor([2, 4, 32, 16]), m.tensor([4, 16, 48]))
    m.matmul(m.tensor([64, 32]), m.tensor([64, 80]), transpose_input=True)
    deep = m.matmul(m.tensor([1, 32, 4096]), m.tensor([64, 4096]), transpose_other=True)
    m.matmul(m.tensor([4096, 32]), m.tensor([4096, 64]), transpose_input=True)
    m.relu(deep)
    return m.finish()


def branches() -> ModuleOp:
    """Three projections of one input (independent kernels) summed afterwards."""
    m = ModelBuilder()
    x = m.tensor([1, 128, 64])
    q, k, v = (m.matmul(x, m.tensor([64, 64]), transpose_other=True) for _ in range(3))
    m.add(m.add(q, k), v)
    return m.finish()


def in_place() -> ModuleOp:
    """Operators writing into existing tensors: the write must wait for earlier readers."""
    m = ModelBuilder()
    x = m.tensor([8, 64], "FP32")
    acc = m.tensor([8, 64], "FP32")
    first = m.relu(x, output=acc)
    seen = m.exp(first)
    again = m.scalar_mul(x, 3.0, output=acc)
    m.add(seen, again)
    return m.finish()


def rotary() -> ModuleOp:
    """Rotary embedding on a [1, seq, heads, dim] view, and a constant fill."""
    m = ModelBuilder()
    x = m.reshape(m.tensor([1, 16, 64], "FP32"), [1, 16, 2, 32])
    m.rope(x, m.tensor([1, 16, 1, 32], "FP32"))
    m.add(m.scalar_assign([4, 64], 1.5, "FP32"), m.tensor([4, 64], "FP32"))
    return m.finish()


MODELS: dict[str, Callable[[], ModuleOp]] = {
    "epilogue": epilogue, "norms": norms, "transposed": transposed, "embedding": embedding,
    "matmul_layouts": matmul_layouts, "branches": branches, "in_place": in_place,
    "rotary": rotary,
}


def deep_matmul() -> ModuleOp:
    """A lone matmul with a long K and a handful of tiles, with an epilogue: split along K
    where one wave leaves processors idle, the epilogue running after the halves are summed."""
    m = ModelBuilder()
    deep = m.matmul(m.tensor([1, 32, 4096]), m.tensor([64, 4096]), transpose_other=True)
    m.relu(m.add(deep, m.tensor([64])))
    return m.finish()


def deep_transposed_matmul() -> ModuleOp:
    """The same with the input transposed and the other operand not: K runs along other dims."""
    m = ModelBuilder()
    m.matmul(m.tensor([4096, 32], "FP32"), m.tensor([4096, 64], "FP32"), transpose_input=True)
    return m.finish()


def gated_deep() -> ModuleOp:
    """Two matmuls of one input with a long K fused with a SwiGLU-style epilogue: both are cut
    along K together, the epilogue running after both sums."""
    m = ModelBuilder()
    x = m.tensor([1, 64, 4096])
    gate = m.matmul(x, m.tensor([128, 4096]), transpose_other=True)
    up = m.matmul(x, m.tensor([128, 4096]), transpose_other=True)
    m.mul(m.mul(gate, m.sigmoid(gate)), up)
    return m.finish()


def llama_layer() -> ModuleOp:
    """A Llama decoder layer at toy size: every pattern of the real one (RMSNorm, rotary Q/K,
    masked softmax attention, residuals, SwiGLU)."""
    return llama_decoder_layer(seq=64, hidden=128, heads=2, intermediate=256)


MODELS["llama_layer"] = llama_layer
MODELS["deep_matmul"] = deep_matmul
MODELS["deep_transposed_matmul"] = deep_transposed_matmul
MODELS["gated_deep"] = gated_deep
