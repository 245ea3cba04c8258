"""Generated models whose tensors alias: what users write with views of buffers.

`random_model(seed)` builds a small model of one data type (FP32, FP16, BF16 or INT32) from a
random sequence of the patterns that make operators depend on each other through memory rather
than through SSA values:

* concat by slices: two operators write the column (or row) halves of a new tensor through
  `slice` views, and the whole tensor is read afterwards;
* KV-cache update: an operator writes some rows of a cache, and the whole cache is read (its
  other rows are model input);
* in-place update read through an earlier view: a tensor is reshaped (or sliced), read, then
  updated in place, and read again through the old view;
* reads of slices of earlier results, and fan-out (one result read by several operators);

mixed with element-wise and scalar operators and, for floating types,
matmuls. The models are valid ARK models; the planner must order them from their byte regions.
Used by `tests/sched/test_aliasing.py` (a fixed seed range) and `bench/aliasing_models.py`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from frontends.model_builder import ModelBuilder, Value

DTYPES = ("FP32", "FP16", "BF16", "INT32")
ROWS = (4, 8, 12, 16)
COLS = (8, 16, 24, 32)


@dataclass
class Generator:
    rng: random.Random
    dtype: str
    m: ModelBuilder
    pool: list[Value]
    """Values later operators may read (results, inputs, views of written tensors)."""

    @property
    def floating(self) -> bool:
        return self.dtype != "INT32"

    # -- helpers ---------------------------------------------------------------------------

    def shape(self, v: Value) -> list[int]:
        return v.type.shape_list

    def pick(self) -> Value:
        return self.rng.choice(self.pool)

    def fresh(self, shape) -> Value:
        return self.m.tensor(list(shape), self.dtype)

    def compute(self, shape: list[int], output: Value | None = None) -> Value:
        """An operator producing `shape` from values of the pool (matmul, binary, unary)."""
        rows, cols = shape
        source = self.operand(shape)
        choice = self.rng.random()
        if self.floating and choice < 0.35:
            k = self.rng.choice(COLS)
            x = self.operand([rows, k])
            w = self.fresh([cols, k])
            return self.m.matmul(x, w, transpose_other=True, output=output)
        if choice < 0.7:
            other = self.operand(shape) if self.rng.random() < 0.6 else self.fresh([1, cols])
            op = self.rng.choice([self.m.add, self.m.sub] + ([self.m.mul] if self.rng.random()
                                                               < 0.3 else []))
            return op(source, other, output=output)
        return self.unary(source, output)

    def unary(self, x: Value, output: Value | None = None) -> Value:
        ops = [lambda v, **kw: self.m.relu(v, **kw),
               lambda v, **kw: self.m.scalar_add(v, 1.0 if self.floating else 3, **kw),
               lambda v, **kw: self.m.scalar_mul(v, 0.5 if self.floating else -2, **kw)]
        if self.floating:
            ops.append(lambda v, **kw: self.m.sigmoid(v, **kw))
        return self.rng.choice(ops)(x, output=output)

    def operand(self, shape: list[int], avoid: int | None = None) -> Value:
        """A value of `shape`: from the pool (whole or a window of a larger one), else new;
        never on buffer `avoid` (an in-place update reads its target only in its own layout)."""
        fits = [v for v in self.pool if len(self.shape(v)) == 2 and v.type.buffer_id != avoid
                and self.shape(v)[0] >= shape[0] and self.shape(v)[1] >= shape[1]]
        if not fits or self.rng.random() < 0.2:
            return self.fresh(shape)
        v = self.rng.choice(fits)
        have = self.shape(v)
        if have == shape:
            return v
        r0 = self.rng.randrange(have[0] - shape[0] + 1)
        c0 = self.rng.randrange(have[1] - shape[1] + 1)
        return self.m.slice(v, [r0, c0], shape)

    # -- patterns ----------------------------------------------------------------------------

    def concat(self) -> None:
        rows, cols = self.rng.choice(ROWS), self.rng.choice(COLS)
        out = self.fresh([rows, cols * 2] if self.rng.random() < 0.5 else [rows * 2, cols])
        full = self.shape(out)
        halves = ([[0, 0], [0, cols]] if full[1] == cols * 2 else [[0, 0], [rows, 0]])
        for offset in halves:
            self.compute([rows, cols], output=self.m.slice(out, offset, [rows, cols]))
        self.pool.append(out)

    def kv_cache(self) -> None:
        length, width = self.rng.choice((16, 24, 32)), self.rng.choice(COLS)
        cache = self.fresh([length, width])
        rows = self.rng.choice((1, 2, 4))
        start = self.rng.randrange(length - rows + 1)
        self.compute([rows, width], output=self.m.slice(cache, [start, 0], [rows, width]))
        self.pool.append(cache)

    def in_place(self) -> None:
        contiguous = [v for v in self.pool if v.type.strides_list == self.shape(v)
                      and not any(v.type.offsets_list) and len(self.shape(v)) == 2]
        target = self.rng.choice(contiguous) if contiguous else \
            self.fresh([self.rng.choice(ROWS), self.rng.choice(COLS)])
        rows, cols = self.shape(target)
        view = (self.m.reshape(target, [cols, rows]) if self.rng.random() < 0.5
                else self.m.slice(target, [0, 0], [max(1, rows // 2), cols]))
        if self.rng.random() < 0.5:
            self.pool.append(self.unary(view))          # read before the update
        if self.rng.random() < 0.5:
            self.unary(target, output=target)           # element-wise, in place
        else:
            self.m.add(target, self.operand([rows, cols], target.type.buffer_id), output=target)
        self.pool.append(view)                          # read after it, through the old view

    def slice_read(self) -> None:
        v = self.pick()
        have = self.shape(v)
        if len(have) != 2:
            self.pool.append(self.unary(v))
            return
        shape = [self.rng.randint(1, have[0]), self.rng.randint(1, have[1])]
        r0 = self.rng.randrange(have[0] - shape[0] + 1)
        c0 = self.rng.randrange(have[1] - shape[1] + 1)
        self.pool.append(self.unary(self.m.slice(v, [r0, c0], shape)))

    def fan_out(self) -> None:
        v = self.pick()
        for _ in range(self.rng.randint(2, 3)):
            self.pool.append(self.unary(v))

    def plain(self) -> None:
        self.pool.append(self.compute([self.rng.choice(ROWS), self.rng.choice(COLS)]))


PATTERNS = ("concat", "kv_cache", "in_place", "slice_read", "fan_out", "plain")


def random_model(seed: int, *, steps: int | None = None) -> ModuleOp:
    """A model of 3 to 7 patterns (see the module docstring), reproducible from `seed`."""
    rng = random.Random(seed)
    dtype = DTYPES[seed % len(DTYPES)]
    m = ModelBuilder()
    gen = Generator(rng, dtype, m, [m.tensor([rng.choice(ROWS), rng.choice(COLS)], dtype)])
    for _ in range(steps or rng.randint(3, 7)):
        getattr(gen, rng.choice(PATTERNS))()
    # Everything left in the pool is read once more, so later writes must wait for it.
    for v in gen.pool[-3:]:
        gen.unary(v)
    return m.finish()

