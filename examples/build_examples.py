"""Write the example model files of this folder (run: python examples/build_examples.py).

The examples are planc's own, built with `frontends.model_builder` (ARK's Python-API style):

* ffn.json             Llama-style FFN block w2(silu(w1 x) * w3 x), the ARK tutorial's model at
                       1/4 of its width (x [1,256,1024], intermediate 2816), FP16;
* attention.json       a pre-norm attention block: RMSNorm, Q/K/V projections, rotary
                       embedding, per-head softmax attention, output projection, residual;
* sendrecv_rank0.json  two ranks: rank 0 scales a tensor and sends it to rank 1, which adds
  sendrecv_rank1.json  its own bias to what it receives.
* allreduce_rank0.json two ranks: each all-reduces its [4096, 1024] FP16 tensor the way ARK's
  allreduce_rank1.json Model::all_reduce writes it (send, receive, add), then adds a bias;
                       `planc allreduce_rank*.json -t mscclpp` finds the all-reduce.

A test checks that this script reproduces the committed files exactly.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from backends.ark_model import emit_model  # noqa: E402
from frontends.model_builder import ModelBuilder  # noqa: E402
from frontends.model_zoo import attention_block  # noqa: E402

HERE = Path(__file__).resolve().parent


def ffn(seq: int = 256, hidden: int = 1024, intermediate: int = 2816) -> str:
    m = ModelBuilder()
    x = m.tensor([1, seq, hidden])
    w1 = m.tensor([intermediate, hidden])
    w2 = m.tensor([hidden, intermediate])
    w3 = m.tensor([intermediate, hidden])
    gate = m.matmul(x, w1, transpose_other=True)
    silu = m.mul(gate, m.sigmoid(gate))
    up = m.matmul(x, w3, transpose_other=True)
    m.matmul(m.mul(silu, up), w2, transpose_other=True)
    return emit_model(m.finish())


def attention(seq: int = 128, hidden: int = 512, heads: int = 4, *,
              view_nodes: bool = False) -> str:
    """Self-attention; with `view_nodes`, its reshapes are virtual nodes, as ARK's Python API
    writes a model before compressing it (`ark-compress` removes them)."""
    head_dim = hidden // heads
    m = ModelBuilder(view_nodes=view_nodes)
    x = m.tensor([1, seq, hidden])
    norm_weight = m.tensor([1, 1, hidden])
    wq, wk, wv, wo = (m.tensor([hidden, hidden]) for _ in range(4))
    rope_table = m.tensor([1, seq, 1, head_dim])

    attention_block(m, x, norm_weight, (wq, wk, wv, wo), rope_table, heads)
    return emit_model(m.finish())


def sendrecv(rank: int, shape: tuple[int, ...] = (64, 256)) -> str:
    m = ModelBuilder(rank=rank, world_size=2)
    if rank == 0:
        m.send(m.scalar_mul(m.tensor(shape, "FP32"), 2.0), remote_rank=1)
    else:
        received = m.recv(shape, "FP32", remote_rank=0)
        m.add(received, m.tensor(shape, "FP32"))
    return emit_model(m.finish())


def allreduce(rank: int, ranks: int = 2) -> str:
    from frontends.collective_models import all_reduce_models

    return emit_model(all_reduce_models(ranks, (4096, 1024))[rank])


EXAMPLES = {
    "ffn.json": ffn,
    "attention.json": attention,
    "attention_nodes.json": lambda: attention(view_nodes=True),
    "sendrecv_rank0.json": lambda: sendrecv(0),
    "sendrecv_rank1.json": lambda: sendrecv(1),
    "allreduce_rank0.json": lambda: allreduce(0),
    "allreduce_rank1.json": lambda: allreduce(1),
}


def main() -> None:
    for name, build in EXAMPLES.items():
        (HERE / name).write_text(build(), encoding="utf-8")
        print(f"wrote examples/{name}")


if __name__ == "__main__":
    main()
