"""Reference models built with `ModelBuilder`, for benchmarks and tests: a Llama-2-7B decoder
layer (any size) and generated stacks of any number of operators."""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from frontends.model_builder import ModelBuilder, Value


def attention_block(m: ModelBuilder, x: Value, norm_weight: Value,
                    weights: tuple[Value, Value, Value, Value], rope_table: Value, heads: int,
                    mask: Value | None = None) -> Value:
    """Pre-norm multi-head attention with residual: RMSNorm, Q/K/V projections (rotary
    embeddings on Q and K), scaled (and masked) softmax attention, output projection, x + it.
    `x` is [1, seq, hidden]; `weights` are Wq, Wk, Wv, Wo ([hidden, hidden], used transposed)."""
    _, seq, hidden = x.type.shape_list
    head_dim = hidden // heads
    wq, wk, wv, wo = weights
    h = m.rms_norm(x, norm_weight)

    def heads_first(t: Value, rotate: bool) -> Value:
        t = m.reshape(t, [1, seq, heads, head_dim])
        if rotate:
            t = m.rope(t, rope_table)
        return m.transpose(t, [0, 2, 1, 3])

    q = heads_first(m.matmul(h, wq, transpose_other=True), rotate=True)
    k = heads_first(m.matmul(h, wk, transpose_other=True), rotate=True)
    v = heads_first(m.matmul(h, wv, transpose_other=True), rotate=False)
    scores = m.scalar_mul(m.matmul(q, k, transpose_other=True), head_dim ** -0.5)
    if mask is not None:
        scores = m.add(scores, mask)
    context = m.matmul(m.softmax(scores), v)
    merged = m.reshape(m.transpose(context, [0, 2, 1, 3]), [1, seq, hidden])
    return m.add(x, m.matmul(merged, wo, transpose_other=True))


def llama_decoder_layer(seq: int = 2048, hidden: int = 4096, heads: int = 32,
                        intermediate: int = 11008, dtype: str = "FP16") -> ModuleOp:
    """One Llama-2-7B decoder layer, batch 1: RMSNorm, Q/K/V projections with rotary
    embeddings, causal-masked softmax attention, output projection and residual, RMSNorm,
    SwiGLU feed-forward and residual."""
    head_dim = hidden // heads
    m = ModelBuilder()
    x = m.tensor([1, seq, hidden], dtype)
    norm1, norm2 = m.tensor([1, 1, hidden], dtype), m.tensor([1, 1, hidden], dtype)
    wq, wk, wv, wo = (m.tensor([hidden, hidden], dtype) for _ in range(4))
    w1, w3 = m.tensor([intermediate, hidden], dtype), m.tensor([intermediate, hidden], dtype)
    w2 = m.tensor([hidden, intermediate], dtype)
    rope = m.tensor([1, seq, 1, head_dim], dtype)
    mask = m.tensor([1, 1, seq, seq], dtype)

    x2 = attention_block(m, x, norm1, (wq, wk, wv, wo), rope, heads, mask)
    h2 = m.rms_norm(x2, norm2)
    gate = m.matmul(h2, w1, transpose_other=True)
    silu = m.mul(gate, m.sigmoid(gate))
    up = m.matmul(h2, w3, transpose_other=True)
    m.add(x2, m.matmul(m.mul(silu, up), w2, transpose_other=True))
    return m.finish()


def generated(ops: int, width: int = 256, seq: int = 64) -> ModuleOp:
    """A deep stack of small pre-norm MLP blocks (RMSNorm, matmul, bias, GELU, matmul,
    residual: 10 operators each) with `ops` operators in all."""
    m = ModelBuilder()
    x = m.tensor([1, seq, width])
    made = 0
    while made + 10 <= ops:
        h = m.rms_norm(x, m.tensor([1, 1, width]))
        h = m.gelu(m.add(m.matmul(h, m.tensor([width, width]), transpose_other=True),
                         m.tensor([width])))
        x = m.add(x, m.matmul(h, m.tensor([width, width]), transpose_other=True))
        made += 10
    while made < ops:
        x = m.relu(x)
        made += 1
    return m.finish()
