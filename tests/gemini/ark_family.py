"""Generated ARK models for the Gemini target: random chains of the patterns users write
(fused projections split by slices, slices of rows, columns and leading dims, head reshapes
and transposes, batch-broadcast matmuls, filled constants, norms, concats by writing column or
row slices), plus a pattern Gemini must refuse cleanly (a partial write read whole).

`family(seed, count)` gives (name, module) pairs; run `python3 -m tests.gemini.ark_family
[COUNT] [SEED]` for a larger run than the test suite's, which prints what each model got.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable

from xdsl.dialects.builtin import ModuleOp

from frontends.model_builder import ModelBuilder, Value

Pattern = Callable[[ModelBuilder, Value, random.Random, str], Value]
"""Takes x [L, rows, cols] (dense), returns a dense [L', rows', cols']."""


def fused_qkv(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    lead, rows, cols = x.type.shape_list
    qkv = m.matmul(x, m.tensor([3 * cols, cols], dtype), transpose_other=True)
    q, k, v = (m.slice(qkv, [0, 0, i * cols], [lead, rows, cols]) for i in range(3))
    scores = m.scalar_mul(m.matmul(q, k, transpose_other=True), cols ** -0.5)
    return m.add(m.matmul(m.softmax(scores), v), x)


def row_slice(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    lead, rows, cols = x.type.shape_list
    if rows < 2:
        return m.relu(x)
    keep = rng.randint(1, rows - 1)
    start = rng.randint(0, rows - keep)
    col = rng.randint(0, cols // 2)
    return m.relu(m.slice(x, [0, start, col], [lead, keep, cols - col]))


def heads(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    lead, rows, cols = x.type.shape_list
    count = 2 if cols % 2 == 0 else 1
    t = m.transpose(m.reshape(x, [lead, rows, count, cols // count]), [0, 2, 1, 3])
    scores = m.softmax(m.matmul(t, t, transpose_other=True))
    context = m.transpose(m.matmul(scores, t), [0, 2, 1, 3])
    return m.reshape(m.copy(context), [lead, rows, cols])


def broadcast_matmul(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    lead, rows, cols = x.type.shape_list
    n = rng.choice([3, 5, 8])
    a = m.add(m.reshape(x, [1, lead, rows, cols]), m.tensor([2, 1, rows, cols], dtype))
    b = m.relu(m.tensor([1, lead, cols, n], dtype))
    return m.reshape(m.matmul(a, b), [2 * lead, rows, n])


def filled(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    lead, rows, cols = x.type.shape_list
    constant = m.scalar_assign([1, rows if rng.random() < 0.5 else 1, cols],
                               rng.choice([0.5, 2.0, -1.0]), dtype)
    return m.add(m.mul(x, constant), x)


def norm(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    return m.rms_norm(x, m.tensor([1, 1, x.type.shape_list[-1]], dtype))


def leading_slice(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    """A box of N (one whole sample), or no range of N (one head of every sample)."""
    lead, rows, cols = x.type.shape_list
    if lead == 1:
        x = m.add(m.reshape(x, [1, rows, cols]), m.tensor([2, 1, cols], dtype))
        lead = 2
    four = m.reshape(m.copy(x), [1, lead, rows, cols])
    if rng.random() < 0.5:      # one leading sample: a box of N
        return m.relu(m.reshape(m.copy(m.slice(four, [0, lead - 1, 0, 0], [1, 1, rows, cols])),
                                [1, rows, cols]))
    wide = m.add(four, m.tensor([2, 1, 1, cols], dtype))         # [2, lead, rows, cols]
    picked = m.slice(wide, [0, lead - 1, 0, 0], [2, 1, rows, cols])   # no range of N
    return m.reshape(m.copy(picked), [2, rows, cols])


def concat_by_slices(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    """Operators write column slices of one tensor side by side (two or three, of random
    widths); its readers read a concat along channels."""
    lead, rows, cols = x.type.shape_list
    widths = [cols, rng.choice([8, cols]), *([4] if rng.random() < 0.5 else [])]
    out = m.tensor([lead, rows, sum(widths)], dtype)
    at = 0
    for width in widths:
        m.matmul(x, m.tensor([width, cols], dtype), transpose_other=True,
                 output=m.slice(out, [0, 0, at], [lead, rows, width]))
        at += width
    return m.relu(out)


def concat_of_rows(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    """Two operators write the row halves of one tensor; its readers read a concat along H."""
    lead, rows, cols = x.type.shape_list
    out = m.tensor([lead, 2 * rows, cols], dtype)
    for half in range(2):
        m.matmul(x, m.tensor([cols, cols], dtype), transpose_other=True,
                 output=m.slice(out, [0, half * rows, 0], [lead, rows, cols]))
    return m.relu(out)


def partial_write(m: ModelBuilder, x: Value, rng: random.Random, dtype: str) -> Value:
    """An operator writes half the columns of a tensor that is then read whole; Gemini
    refuses the read (the other half was never written by the network)."""
    lead, rows, cols = x.type.shape_list
    out = m.tensor([lead, rows, 2 * cols], dtype)
    m.matmul(x, m.tensor([cols, cols], dtype), transpose_other=True,
             output=m.slice(out, [0, 0, 0], [lead, rows, cols]))
    return m.relu(out)


PATTERNS: dict[str, Pattern] = {
    "fused_qkv": fused_qkv, "row_slice": row_slice, "heads": heads,
    "broadcast_matmul": broadcast_matmul, "filled": filled, "norm": norm,
    "leading_slice": leading_slice, "concat_by_slices": concat_by_slices,
    "concat_of_rows": concat_of_rows, "partial_write": partial_write,
}
REFUSABLE = {"partial_write"}
"""Patterns that must be refused (with the operator's JSON path); the others must lower."""


def generate(rng: random.Random) -> tuple[str, ModuleOp]:
    dtype = rng.choice(["FP32", "FP16"])
    m = ModelBuilder()
    x = m.relu(m.tensor([rng.choice([1, 2]), rng.choice([4, 6, 8]), rng.choice([8, 12, 16])],
                        dtype))
    names = rng.sample(sorted(PATTERNS), rng.randint(2, 3))
    for name in names:
        x = PATTERNS[name](m, x, rng, dtype)
    return "+".join(names) + f"/{dtype}", m.finish()


def family(seed: int, count: int) -> list[tuple[str, ModuleOp]]:
    rng = random.Random(seed)
    return [generate(rng) for _ in range(count)]


def main(argv: list[str]) -> int:
    from backends.ark_model import emit_model
    from compiler.validation import prove_model
    from frontends.ark_model import import_document
    from ground.diagnostics import PlancError
    from ground.json_reader import parse_json

    count = int(argv[0]) if argv else 50
    seed = int(argv[1]) if len(argv) > 1 else 0
    rng = random.Random(seed + 1)
    tally: dict[str, int] = {}
    for name, built in family(seed, count):
        module = import_document(parse_json(emit_model(built)))    # with JSON paths
        mesh, batch = rng.choice(["1x1", "2x1", "2x2"]), rng.choice([None, 2])
        try:
            proof = prove_model(module, mesh=mesh, batch=batch)
            verdict = "proved" if proof.ok else f"WRONG: {proof.problem}"
        except PlancError as e:
            verdict = f"refused: {e.path}: {e}"
        except Exception as e:      # noqa: BLE001 - what the run is looking for
            verdict = f"INTERNAL: {type(e).__name__}: {e}"
        print(f"{name} mesh {mesh} batch {batch}: {verdict}")
        key = verdict.split(":")[0]
        tally[key] = tally.get(key, 0) + 1
    print(tally)
    return 1 if "WRONG" in tally or "INTERNAL" in tally else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
