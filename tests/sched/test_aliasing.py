"""Models whose operators meet through views of one buffer rather than through SSA values
(issue 11): a concat written by slices, a KV-cache row update, an in-place update read through
an earlier reshape, and 1-element tensors. Each is planned for every GPU and proven equal to the
model by the plan simulator, runs as a CPU program, and lowers to Tenstorrent; a generated
family of such models (`tests.sched.aliasing_models`) does the same. The dependency analysis is
checked against a brute-force per-byte one, and shown to be what makes the plans right."""

from __future__ import annotations

import itertools

import pytest

import passes.sched_fuse
import passes.sched_partition
from dialects import ark
from frontends.model_builder import ModelBuilder
from passes.sched_graph import data_producers, operator_dependencies
from targets.ark.byte_regions import ByteRegion, byte_set
from targets.ark.model_interpreter import run_model
from targets.ark.plan_simulator import simulate
from targets.tt.simulator import simulate_against
from tests.sched.aliasing_models import random_model
from tests.sched.test_cpu_programs import check_program, needs_compiler
from tests.sched.test_pipeline import ARCHES, planned
from tests.tt.fixtures import lower

# ---------------------------------------------------------------------------------------------
# The patterns of the issue
# ---------------------------------------------------------------------------------------------


def concat_by_slices():
    """Two matmuls write the column halves of `out` [40, 96] through slices; relu reads it."""
    m = ModelBuilder()
    out = m.tensor([40, 96], "FP32")
    x = m.tensor([40, 64], "FP32")
    for offset in (0, 48):
        m.matmul(x, m.tensor([64, 48], "FP32"), output=m.slice(out, [0, offset], [40, 48]))
    m.relu(out)
    return m.finish()


def kv_cache_update():
    """A matmul writes rows 40..47 of a cache; a matmul reads the whole cache."""
    m = ModelBuilder()
    cache = m.tensor([64, 32], "FP16")
    row = m.slice(cache, [40, 0], [8, 32])
    m.matmul(m.tensor([8, 16], "FP16"), m.tensor([16, 32], "FP16"), output=row)
    m.matmul(m.tensor([8, 32], "FP16"), cache, transpose_other=True)
    return m.finish()


def in_place_through_reshape():
    """A reshape of `t` is read, `t` is updated in place, the old reshape is read again."""
    m = ModelBuilder()
    t = m.tensor([4, 8, 16], "FP32")
    r = m.reshape(t, [32, 16])
    m.exp(r)
    m.scalar_mul(t, 2.0, output=t)
    m.relu(r)
    return m.finish()


def scalars():
    """1-element tensors: a scalar add, and a [1, 1, 1, 1] broadcast into a matrix."""
    m = ModelBuilder()
    m.scalar_add(m.tensor([1], "FP32"), 1.0)
    m.add(m.tensor([1, 1, 1, 1], "FP32"), m.tensor([4, 8], "FP32"))
    return m.finish()


PATTERNS = {"concat_by_slices": concat_by_slices, "kv_cache_update": kv_cache_update,
            "in_place_through_reshape": in_place_through_reshape, "scalars": scalars}

GENERATED_SEEDS = range(30)


def assert_plans_compute(build, arch: str) -> None:
    reference, p = planned(build, arch)
    report = simulate(p, model=reference)
    assert report["ok"], report["problems"]
    assert report["problem_counts"] == {}


def assert_tt_computes(build) -> None:
    module = build()
    reference = run_model(module, seed=7)
    lower(module, "tt-tile,tt-partition{grid=2x2},tt-place")
    report = simulate_against(module.ops.first.plans(), reference)
    assert report.kernels and report.ok, [k for k in report.kernels if not k.ok]


@pytest.mark.parametrize("arch", ARCHES)
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_patterns_plan_right(name, arch):
    assert_plans_compute(PATTERNS[name], arch)


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_patterns_lower_to_tt(name):
    assert_tt_computes(PATTERNS[name])


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_patterns_run_as_cpu_programs(name, tmp_path):
    check_program(PATTERNS[name](), "a100", tmp_path)


def test_the_model_reads_old_cache_rows_as_input():
    """The cache's rows nobody wrote are input; its updated rows are the matmul's."""
    run = run_model(kv_cache_update(), seed=3)
    cache = run.inputs[0]
    assert cache.shape == (64, 32) and abs(cache[:40]).sum() > 0
    written = next(t for t in run.outputs if run.types[t].shape_list == [8, 32]
                   and run.types[t].buffer_id == 0)
    assert (run.memory.read(run.types[0])[40:48] == run.tensors[written]).all()


def test_two_views_of_one_input_agree():
    """Before, each view read first drew its own random values: relu of the reshape and
    relu of the tensor disagreed."""
    m = ModelBuilder()
    t = m.tensor([4, 8], "FP32")
    flat = m.relu(m.reshape(t, [8, 4]))
    whole = m.relu(t)
    ids = flat.type.tensor_id, whole.type.tensor_id
    run = run_model(m.finish(), seed=1)
    assert len(run.inputs) == 1  # the second view finds its bytes filled
    assert (run.tensors[ids[0]].reshape(-1) == run.tensors[ids[1]].reshape(-1)).all()


# ---------------------------------------------------------------------------------------------
# Generated models
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [
    pytest.param(seed, marks=[pytest.mark.slow] if seed >= 10 else []) for seed in GENERATED_SEEDS])
def test_generated_models_plan_right_everywhere(seed):
    """Ten generated models in `-m "not slow"` (0.2 CPU s each), all thirty in CI."""
    for arch in ARCHES:
        assert_plans_compute(lambda: random_model(seed), arch)
    assert_tt_computes(lambda: random_model(seed))


@pytest.mark.slow
@needs_compiler
@pytest.mark.parametrize("seed", range(8))
def test_generated_models_run_as_cpu_programs(seed, tmp_path):
    check_program(random_model(seed), "mi300x" if seed % 2 else "a100", tmp_path)


# ---------------------------------------------------------------------------------------------
# The dependency sets
# ---------------------------------------------------------------------------------------------


def operators(module) -> list[ark.ArkOp]:
    return [op for op in module.ops.first.graph.ops if isinstance(op, ark.ArkOp)]


def dependencies(ops: list[ark.ArkOp]) -> dict[ark.ArkOp, set[ark.ArkOp]]:
    """`operator_dependencies(ops)`, with operators for positions."""
    return {op: {ops[p] for p in found}
            for op, found in zip(ops, operator_dependencies(ops), strict=True)}


def labels(deps, op) -> set[str]:
    return {d.label.data for d in deps[op]}


def test_disjoint_slices_are_independent_and_the_whole_waits_for_both():
    ops = operators(concat_by_slices())
    deps = dependencies(ops)
    first, second, relu = ops
    assert deps[second] == set()
    assert deps[relu] == {first, second}


def test_overlapping_slices_order_writes_and_reads():
    m = ModelBuilder()
    buf = m.tensor([16, 16], "FP32")
    m.relu(m.tensor([8, 16], "FP32"), output=m.slice(buf, [0, 0], [8, 16]), name="top")
    m.relu(m.tensor([8, 16], "FP32"), output=m.slice(buf, [4, 0], [8, 16]), name="middle")
    m.exp(m.slice(buf, [8, 0], [4, 16]), name="bottom_read")      # only `middle`'s rows
    m.exp(m.slice(buf, [0, 0], [4, 16]), name="top_read")         # only `top`'s rows
    m.relu(m.tensor([2, 16], "FP32"), output=m.slice(buf, [0, 0], [2, 16]), name="over_top")
    deps = dependencies(ops := operators(m.finish()))
    by = {op.label.data: op for op in ops}
    assert labels(deps, by["middle"]) == {"top"}                  # write after write
    assert labels(deps, by["bottom_read"]) == {"middle"}
    assert labels(deps, by["top_read"]) == {"top"}
    assert labels(deps, by["over_top"]) == {"top", "top_read"}    # and write after read


def test_column_slices_of_different_grids_are_ordered_conservatively():
    """An FP16 view and an FP32 view of one buffer: compared by hulls, so ordered."""
    m = ModelBuilder()
    buf = m.tensor([8, 16], "FP32")
    m.relu(m.tensor([8, 8], "FP32"), output=m.slice(buf, [0, 0], [8, 8]), name="left")
    m.exp(m.reshape(buf, [128]), name="flat")
    deps = dependencies(ops := operators(m.finish()))
    assert labels(deps, ops[1]) == {"left"}


def brute_conflicts(ops: list[ark.ArkOp]) -> set[tuple[int, int]]:
    """(i, j): operator j touches a byte operator i touched, one of them writing."""
    touched = []
    for op in ops:
        reads, writes = op.operand_groups()
        touched.append(([(v.type.buffer_id, byte_set(ByteRegion.of(v.type))) for v in reads],
                        [(v.type.buffer_id, byte_set(ByteRegion.of(v.type))) for v in writes]))
    found = set()
    for (i, (r1, w1)), (j, (r2, w2)) in itertools.combinations(enumerate(touched), 2):
        pairs = [(a, b) for a in w1 for b in (*r2, *w2)] + [(a, b) for a in r1 for b in w2]
        if any(ba == bb and sa & sb for (ba, sa), (bb, sb) in pairs):
            found.add((i, j))
    return found


@pytest.mark.parametrize("seed", range(40))
def test_dependencies_order_every_conflict_of_generated_models(seed):
    """Every pair of operators sharing a byte (one writing) is ordered, directly or through
    others (entries dropped because a later write covers them order transitively), and every
    direct dependency is a data use or a conflict the byte regions may see."""
    ops = operators(random_model(seed))
    deps = dependencies(ops)
    index = {op: i for i, op in enumerate(ops)}
    before: dict[int, set[int]] = {}
    for i, op in enumerate(ops):
        before[i] = set().union(*({index[d]} | before[index[d]] for d in deps[op]))
    conflicts = brute_conflicts(ops)
    assert all(i in before[j] for i, j in conflicts)
    for op in ops:
        for dep in deps[op]:
            used = any(dep in data_producers(v) for v in op.operands)
            assert used or (index[dep], index[op]) in conflicts or _hull_conflict(dep, op)


def _hull_conflict(a: ark.ArkOp, b: ark.ArkOp) -> bool:
    from targets.ark.byte_regions import overlaps

    ra, wa = a.operand_groups()
    rb, wb = b.operand_groups()
    pairs = [(x, y) for x in wa for y in (*rb, *wb)] + [(x, y) for x in ra for y in wb]
    return any(overlaps(ByteRegion.of(x.type), ByteRegion.of(y.type)) for x, y in pairs)


# ---------------------------------------------------------------------------------------------
# The checks can fail: with the old, buffer-level dependencies the plans are wrong
# ---------------------------------------------------------------------------------------------


def buffer_level_dependencies(ops, operands=None):
    """The analysis before issue 11: reads after writes only through SSA use-def, one writer
    per buffer (by position, as `operator_dependencies` gives them)."""
    deps, readers, writers = {}, {}, {}
    for op in ops:
        found = {p for value in op.operands for p in data_producers(value)}
        reads, writes = op.operand_groups()
        for value in writes:
            buffer = value.type.buffer_id
            found |= readers.pop(buffer, set()) | writers.get(buffer, set())
            writers[buffer] = {op}
        for value in reads:
            readers.setdefault(value.type.buffer_id, set()).add(op)
        found.discard(op)
        deps[op] = found
    position = {op: i for i, op in enumerate(ops)}
    return [{position[d] for d in deps[op] if d in position} for op in ops]


@pytest.mark.parametrize("name", ["concat_by_slices", "kv_cache_update",
                                  "in_place_through_reshape"])
def test_without_region_dependencies_the_plans_race(name, monkeypatch):
    monkeypatch.setattr(passes.sched_fuse, "operator_dependencies", buffer_level_dependencies)
    monkeypatch.setattr(passes.sched_partition, "operator_dependencies",
                        buffer_level_dependencies)
    reference, p = planned(PATTERNS[name], "a100")
    report = simulate(p, model=reference)
    assert not report["ok"] and report["problem_counts"], report["problems"]
