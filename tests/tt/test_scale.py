"""What makes `-t tt` linear and cheap per kernel (issue 26) without changing a verdict or a
plan: a plan checks its nested ops' rules once per module verification, an op whose generic
constraints fail is still reported at its own path, and the memos of tt-partition give the
partitions and strategies computed afresh."""

from __future__ import annotations

from collections import Counter

import pytest
from xdsl.dialects.builtin import IntegerAttr, i32

from compiler.pipeline import run_pipeline
from devices.tt import device_named
from dialects import tt
from dialects.locations import verify_module
from frontends.model_zoo import generated
from ground.diagnostics import PlancError
from passes import tt_partition

PIPELINE = "tt-tile,tt-partition,tt-place"


def planned(blocks: int = 3):
    module = generated(blocks * 10)
    run_pipeline(module, PIPELINE)
    return module


def test_nested_rules_run_once_per_module_verification(monkeypatch):
    module = planned()
    calls: Counter[int] = Counter()
    for cls in (tt.CoreOp, tt.WorkListOp, tt.LayoutOp):
        original = cls.check

        def counting(self, original=original):
            calls[id(self)] += 1
            original(self)

        monkeypatch.setattr(cls, "check", counting)
    verify_module(module)
    assert len(calls) > 50
    assert set(calls.values()) == {1}


def test_a_nested_op_failing_its_constraints_is_reported_at_its_path():
    # len_k = 4 : i32 meets every rule of the plan (the value is the kernel's), and only the
    # generic constraint (IntegerAttr[I64]) refuses it: the plan must not vouch for the op.
    module = planned()
    plan = next(op for op in module.walk() if isinstance(op, tt.PlanOp)
                and op.kernel.len_k_value is not None)
    work = next(op for op in plan.walk() if isinstance(op, tt.WorkListOp))
    work.properties["len_k"] = IntegerAttr(work.len_k_value, i32)
    with pytest.raises(PlancError, match="Expected attribute i64 but got i32") as caught:
        verify_module(module)
    assert caught.value.rule == "tt.work_list"


def test_memoised_strategies_and_partitions_are_the_fresh_ones(monkeypatch):
    module = planned(4)
    device = device_named(None)
    plans = [op for op in module.walk() if isinstance(op, tt.PlanOp)]
    chosen = [tt_partition.choose_strategy(p, device.compute_grid, device) for p in plans]
    monkeypatch.setattr(tt_partition, "_CHOSEN", _Forgetful())   # each kernel afresh
    assert [tt_partition.choose_strategy(p, device.compute_grid, device)
            for p in plans] == chosen
    for plan in plans:
        strategy = tt_partition.choose_strategy(plan, device.compute_grid, device)
        fresh = tt_partition.partition_work(plan.kernel.grid_tiles, device.compute_grid,
                                            strategy)
        cores = plan.work_partition.cores()
        assert [c.coordinates for c in cores] == list(fresh)
        assert [list(c.tiles()) for c in cores] == [list(t) for t in fresh.values()]


class _Forgetful(dict):
    """A memo that never finds anything."""

    def get(self, key, default=None):
        return default
