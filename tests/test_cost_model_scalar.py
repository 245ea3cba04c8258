"""The cost model's plain-Python path (`first_task_work`, `saturation`, `plan_cxx.float32`)
against the numpy one it stands in for, bit for bit: on every estimate the planning pipeline
asks for (examples and generated models, three GPUs), and on generated operators under
generated configurations, hostile ones included (where the plain path must hand over to numpy
and numpy's answer or error is what comes out)."""

from __future__ import annotations

import functools
import math
import random
import struct
import warnings

import numpy as np
import pytest

from backends.ark_plan import model_pipeline
from backends.plan_cxx import float32
from compiler.pipeline import run_pipeline
from devices.hardware import gpu_device
from dialects import ark
from frontends.ark_model import import_document
from frontends.model_builder import ModelBuilder
from frontends.model_zoo import generated
from ground.json_reader import load_json_file
from targets.ark import cost_model
from targets.ark.cost_model import (
    _NumpyOnly,
    _saturation,
    first_task_work,
    first_task_work_numpy,
    kernel_estimate,
    saturation,
)
from tests.conftest import EXAMPLES
from tests.sched.models import MODELS


def _bits(values) -> tuple[str, ...]:
    return tuple(float(v).hex() for v in values)


def _outcome(compute):
    """What `compute()` returns (as bits) or raises (type and message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", _bits(compute())
    except _NumpyOnly:
        raise
    except Exception as error:  # noqa: BLE001 - the two paths must fail alike
        return "error", type(error).__name__, str(error)


def _agree(ops, configs, total) -> bool:
    """The plain path equals numpy's; True if the plain path answered itself."""
    expected = _outcome(lambda: first_task_work_numpy(ops, configs, total))
    try:
        plain = _outcome(lambda: first_task_work(ops, configs, total))
        used = True
    except _NumpyOnly:
        used = False
    estimate = _outcome(lambda: kernel_estimate(ops, configs, total, 4, 1,
                                                gpu_device("a100")).work)
    assert estimate == expected, (ops, configs)
    if used:
        assert plain == expected, (ops, configs)
    return used


# ---------------------------------------------------------------------------------------------
# Every estimate the pipeline asks for
# ---------------------------------------------------------------------------------------------


def _example(name: str):
    return lambda: import_document(load_json_file(EXAMPLES / name))


PIPELINE_MODELS = {
    **{name: _example(name) for name in ("ffn.json", "attention.json", "attention_nodes.json")},
    "generated-60": lambda: generated(60),
    **MODELS,
}


@pytest.mark.slow
@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
def test_every_estimate_of_the_pipeline_is_numpys(arch, monkeypatch):
    import passes.sched_partition
    import passes.sched_tile

    calls = {"all": 0, "plain": 0}
    original = cost_model.kernel_estimate

    def checked(ops, configs, num_tasks, slot_warps, num_slots, device, memo=None):
        calls["all"] += 1
        calls["plain"] += _agree(ops, configs, max(num_tasks, 1))
        found = original(ops, configs, num_tasks, slot_warps, num_slots, device, memo)
        # `choose_tiling`'s memo (task 0's work by tile shapes) answers as a fresh estimate
        fresh = original(ops, configs, num_tasks, slot_warps, num_slots, device)
        assert _bits(found.work) == _bits(fresh.work) and found.seconds == fresh.seconds
        return found

    for module in (passes.sched_partition, passes.sched_tile):
        monkeypatch.setattr(module, "kernel_estimate", checked)
    for build in PIPELINE_MODELS.values():
        run_pipeline(build(), model_pipeline(arch, "planc"))
    assert calls["all"] > 100 and calls["plain"] == calls["all"]


# ---------------------------------------------------------------------------------------------
# Generated operators and configurations
# ---------------------------------------------------------------------------------------------


def _shape(rng: random.Random, rank: int) -> list[int]:
    return [rng.choice((1, 2, 3, rng.randint(1, 300), rng.randint(1, 5000))) for _ in range(rank)]


def _broadcast(rng: random.Random, shape: list[int]) -> list[int]:
    """A shape that broadcasts onto `shape` (some dims 1, leading dims dropped)."""
    kept = shape[rng.randint(0, len(shape) - 1):]
    return [1 if rng.random() < 0.4 else d for d in kept]


def _random_model(rng: random.Random):
    m = ModelBuilder()
    dtype = rng.choice(("FP16", "FP32", "BF16"))
    shape = _shape(rng, rng.randint(1, 4))
    x = m.tensor(shape, dtype)
    for _ in range(rng.randint(1, 6)):
        kind = rng.choice(("add", "mul", "gelu", "exp", "div", "reduce", "transpose",
                           "matmul", "scalar", "embedding"))
        shape = list(x.type.shape_list) if hasattr(x, "type") else shape
        if kind in ("add", "mul", "div"):
            x = getattr(m, kind)(x, m.tensor(_broadcast(rng, shape), dtype))
        elif kind in ("gelu", "exp"):
            x = getattr(m, kind)(x)
        elif kind == "scalar":
            x = m.scalar_mul(x, rng.uniform(-3, 3))
        elif kind == "reduce":
            x = m.reduce_sum(x, rng.randint(0, len(shape) - 1))
        elif kind == "transpose" and len(shape) == 4:
            x = m.transpose(x, rng.sample(range(4), 4))
        elif kind == "matmul" and len(shape) >= 2:
            n = rng.randint(1, 700)
            x = m.matmul(x, m.tensor([n, shape[-1]], dtype), transpose_other=True)
        elif kind == "embedding":
            m.embedding(m.tensor([rng.randint(1, 4), rng.randint(1, 64)], "INT32"),
                        m.tensor([rng.randint(2, 90), rng.randint(1, 300)], dtype))
    return m.finish()


def _config(rng: random.Random, op: ark.ArkOp, hostile: bool) -> dict:
    def extent() -> int | float:
        if hostile and rng.random() < 0.15:
            return rng.choice((0, -3, 2.0, True, 1 << 70, 1 << 40))
        return rng.choice((1, 8, 16, 32, 64, 128, 256, rng.randint(1, 3000)))

    if isinstance(op, ark.MatmulOp):
        return {"TileShapeMNK": [extent(), extent(), 32]}
    if rng.random() < 0.3:
        return {}
    rank = rng.choice((4, 4, 4, 1, 2, 3, 5)) if hostile else 4
    return {"Tile": [extent() for _ in range(rank)]}


@pytest.mark.parametrize("hostile", [False, True])
def test_generated_operators_and_configs_cost_what_numpy_says(hostile):
    rng = random.Random(1400 + hostile)
    plain = checked = 0
    for _ in range(150):
        ops = [op for op in _random_model(rng).walk() if isinstance(op, ark.ArkOp)
               and not isinstance(op, ark.TensorOp)]
        for _ in range(4 if ops else 0):
            start = rng.randint(0, len(ops) - 1)
            group = ops[start:start + rng.randint(1, 4)]      # consecutive: fused reads count
            configs = [_config(rng, op, hostile) for op in group]
            total = rng.choice((1, 7, rng.randint(1, 10**6)))
            plain += _agree(group, configs, total)
            checked += 1
    # The plain path answers the ordinary cases itself (else this tested numpy twice).
    assert plain == checked if not hostile else 0 < plain < checked


@pytest.mark.parametrize("hostile", [False, True])
def test_a_memo_of_task_work_answers_as_a_fresh_estimate(hostile):
    """`kernel_estimate`'s memo keys task 0's work by the configs' tile shapes (and their
    values' types) and the task count: candidates that differ elsewhere (warps, shared memory)
    share it, and every estimate equals one made without the memo, error or value."""
    rng = random.Random(1500 + hostile)
    device = gpu_device("a100")
    shared = asked = 0
    for _ in range(60):
        ops = [op for op in _random_model(rng).walk() if isinstance(op, ark.ArkOp)
               and not isinstance(op, ark.TensorOp)]
        if not ops:
            continue
        start = rng.randint(0, len(ops) - 1)
        group = ops[start:start + rng.randint(1, 4)]
        pool = [[_config(rng, op, hostile) for op in group] for _ in range(3)]
        if hostile:  # the same extents as floats or booleans: equal keys but for the types
            pool.append([{k: [float(v) if type(v) is int else v for v in value]
                          if type(value) is list else value for k, value in c.items()}
                         for c in pool[0]])
        memo: dict = {}
        for _ in range(12):
            configs = [{**c, "NumWarps": rng.choice((1, 2, 4, 8)),
                        "SramBytes": rng.choice((0, 4096))} for c in rng.choice(pool)]
            total, warps = rng.choice((1, 7)), rng.choice((1, 4))
            estimate = functools.partial(kernel_estimate, group, configs, total, warps, 1,
                                         device)
            fresh = _outcome(lambda: estimate().work)  # noqa: B023 -- called at once
            size = len(memo)
            found = _outcome(lambda: estimate(memo=memo).work)  # noqa: B023 -- called at once
            assert found == fresh, (group, configs)
            asked += 1
            shared += len(memo) == size and found[0] == "ok"
    assert 0 < shared < asked


def test_int64_edges_hand_over_to_numpy():
    """A tile whose element or byte count leaves int64 is numpy's (it wraps); below, plain."""
    m = ModelBuilder()
    m.relu(m.tensor([1 << 20, 1 << 20, 1 << 20, 16], "FP32"))
    (relu,) = [op for op in m.finish().walk() if isinstance(op, ark.ReluOp)]
    big = [1 << 20, 1 << 20, 1 << 20]
    assert _agree([relu], [{"Tile": [*big, 1]}], 1)         # 2^60 elements, 2^62 bytes
    assert not _agree([relu], [{"Tile": [*big, 4]}], 1)     # 2^64 bytes
    assert not _agree([relu], [{"Tile": [*big, 16]}], 1)    # 2^64 elements


# ---------------------------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------------------------


def test_saturation_is_numpys():
    rng = random.Random(7)
    cases = [(w, f) for w in (0, 1, 3, 4, 8, 64, 1 << 60) for f in (0, 1, 4, 7, 16)]
    cases += [(rng.randint(0, 10**6), rng.randint(1, 10**4)) for _ in range(500)]
    for warps, full in cases:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = float(_saturation(warps, full))
            got = saturation(warps, full)
        assert _bits([got]) == _bits([expected]), (warps, full)


def test_float32_is_numpys():
    rng = random.Random(11)
    most = float(np.finfo(np.float32).max)
    values = [0.0, -0.0, 1e-46, -1e-46, 1e-40, 0.1, -2.5, most, -most, most * (1 + 2**-25),
              most * (1 + 2**-23), 1e39, -1e300, math.inf, -math.inf, 1e-6, 2**-149, 2**-150]
    values += [struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0] for _ in range(2000)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(2000)]
    for value in values:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = float(np.float32(value))
            got = float32(value)
        if math.isnan(expected):
            assert math.isnan(got)
        else:
            assert _bits([got]) == _bits([expected]), value
