"""The static-distribution roofline (`targets.ark.static_roofline`) and the decisions it is a
second opinion for: each checked against a second, simpler way (the format's task
distribution enumerated task by task; every split-K cut of small matmuls tried)."""

from __future__ import annotations

import itertools
import math

import pytest

from backends.ark_plan import single_plan
from compiler.pipeline import run_pipeline
from devices.hardware import gpu_device
from dialects import plan
from dialects.plan import Range
from frontends.model_builder import ModelBuilder
from passes.sched_partition import (
    Estimates,
    StaticCut,
    cut_candidates,
    k_parts,
    split_plan,
    split_shapes,
    splittable_matmuls,
)
from targets.ark import static_roofline as sr


def test_per_processor_counts_match_the_distribution_enumerated():
    for processors, tasks, gran in itertools.product(range(1, 7), range(0, 23), range(1, 4)):
        for first in range(processors):
            brute = plan.distribute(Range(0, processors), Range(0, tasks), gran, 1, first)
            expected = {p: len(slots[0]) for p, slots in brute.items() if slots[0]}
            got = dict(sr.per_processor_counts(processors, tasks, gran, first))
            assert got == expected, (processors, tasks, gran, first)


def _matmul(m: int, n: int, k: int):
    b = ModelBuilder()
    b.matmul(b.tensor([1, m, k]), b.tensor([n, k]), transpose_other=True)
    return b.finish()


def _planned(module, spec: str) -> plan.PlanOp:
    run_pipeline(module, spec)
    return single_plan(module)


def _brute_seconds(p: plan.PlanOp, device) -> float:
    """`plan_seconds` by enumerating every task's processor with `plan.distribute`."""
    tasks, operators = p.tasks(), p.task_operators()
    clock: dict[int, float] = {}
    groups = p.processor_groups()
    for pg, syncs in zip(groups, plan.barriers(groups), strict=True):
        for sync in syncs:
            start = max(clock.get(q, 0.0) for q in sync) + sr.BARRIER_S
            clock.update(dict.fromkeys(sync, start))
        runs = []
        for schedule in (s for rg in pg.resource_groups()
                         for s in plan.resource_group_schedule(rg, tasks)):
            ops = operators[schedule.task_group.task]
            work = sr.ops_work(ops).scaled(1 / p.num_tasks(schedule.task_group.task))
            for q, slots in schedule.assignment.items():
                count = sum(map(len, slots))
                if count:
                    warps = sum(1 for s in slots if s) * schedule.layout.slot_warps
                    runs.append((q, count, work, sr.dtype_of(ops), warps))
        busy = len({q for q, *_ in runs})
        for q, count, work, dtype, warps in runs:
            clock[q] = clock.get(q, 0.0) + sr.tasks_seconds(count, work, device, dtype, busy,
                                                             warps)
    return max(clock.values())


@pytest.mark.parametrize("arch", ["a100", "mi300x"])
@pytest.mark.parametrize("planner", ["ark-plan", "ark-default-plan{partial-tiles=true}"])
def test_plan_seconds_agree_with_the_enumerated_distribution(arch, planner):
    for m, n, k in ((256, 1024, 512), (64, 3000, 256), (512, 512, 2048)):
        spec = planner.replace("}", f" device={arch}}}") if "{" in planner else \
            f"{planner}{{device={arch}}}"
        p = _planned(_matmul(m, n, k), spec)
        device = gpu_device(arch)
        assert sr.plan_seconds(p, device) == pytest.approx(_brute_seconds(p, device))
        assert sr.plan_seconds(p, device) >= sr.plan_bound(p, device)


def test_bound_counts_inputs_and_outputs_once():
    device = gpu_device("a100")
    p = _planned(_matmul(256, 4096, 4096), "ark-default-plan{device=a100}")
    moved = (256 * 4096 + 4096 * 4096 + 256 * 4096) * 2
    flops = 2 * 256 * 4096 * 4096
    assert sr.plan_bound(p, device) == pytest.approx(
        max(flops / device.matmul_rate("FP16"), moved / device.memory_bandwidth))


def test_little_law_caps_a_processor_with_few_warps():
    device = gpu_device("a100")
    share = device.memory_bandwidth / device.processors
    assert sr.bandwidth(device, device.processors, 64) == share
    one_warp = device.warp_size * sr.BYTES_IN_FLIGHT_PER_THREAD / sr.DRAM_LATENCY_S
    assert sr.bandwidth(device, device.processors, 1) == pytest.approx(one_warp)
    assert sr.bandwidth(device, 1, 1000) == device.memory_bandwidth


SHAPES = [(m, n, k) for m in (64, 128, 256) for n in (1024, 2816, 11008) for k in (1024, 4096)]


def _lone_kernel(m: int, n: int, k: int, arch: str):
    """The tiled matmul kernel of a one-matmul model (what split-K is asked about)."""
    from passes.ark_to_sched import schedules_and_operators
    from passes.sched_fuse import SchedFusePass
    from passes.sched_tables import ScheduleTables
    from passes.sched_tile import SchedTilePass

    module = _matmul(m, n, k)
    ((schedule, operators),) = schedules_and_operators(module, arch, kernels=False)
    tables = ScheduleTables(schedule, planning=True, operators=operators)
    SchedFusePass().run(schedule, tables)
    SchedTilePass().run(schedule, tables)
    ((kernel_id, kernel_op),) = tables.kernels().items()
    device = gpu_device(arch)
    return Estimates(device).kernel(kernel_op, tables.kernel_operators()[kernel_id]), device


@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
def test_a_cut_is_taken_only_when_both_models_find_it_faster(arch):
    """Brute force: every candidate cut of small matmuls under both models; the pass's choice
    is the cost model's fastest of the cuts the static roofline also finds faster than the
    uncut kernel, and none when there is no such cut 5% faster by the cost model."""
    taken = 0
    for m, n, k in SHAPES:
        kernel, device = _lone_kernel(m, n, k, arch)
        chosen = split_plan(kernel, device)
        matmuls = splittable_matmuls(kernel)
        static = StaticCut(kernel, matmuls, device)
        depth, step = k, matmuls[0].config_value()["TileShapeMNK"][2]
        limit = min(32, depth // step)
        agreeing, every = [], set()
        for ranges, weights in split_shapes(kernel.op.tiles, kernel.slots, device.processors,
                                            limit):
            for rounding in (round, math.floor):
                parts = k_parts(depth, step, weights, rounding)
                if parts is not None:
                    every.add((tuple(ranges), tuple(parts)))
                if parts is not None and static.cut_seconds(parts, ranges) < static.whole:
                    agreeing.append((tuple(parts), tuple(ranges)))
        # (the list bench/plan_candidates.py enumerates is the one the pass weighs)
        assert set(cut_candidates(kernel, device)) == every, (m, n, k)
        if chosen is None:
            continue
        assert (chosen.parts, chosen.processors) in agreeing, (m, n, k)
        assert static.cut_seconds(chosen.parts, chosen.processors) < static.whole
        assert chosen.seconds < 0.95 * chosen.whole
        taken += 1
    assert taken > 0  # (the shapes include cuts worth taking)


def test_planned_cuts_are_no_slower_than_uncut_plans_under_the_static_roofline():
    """The whole plans (the sum kernel as the tiler really tiles it), with and without split-K:
    wherever planc cuts, the static roofline rates the cut plan no slower."""
    for arch in ("a100", "mi300x"):
        device = gpu_device(arch)
        for m, n, k in SHAPES[::2]:
            cut = _planned(_matmul(m, n, k), f"ark-plan{{device={arch}}}")
            if len(cut.tasks()) == 1:
                continue
            uncut = _planned(_matmul(m, n, k),
                             f"ark-to-sched{{device={arch}}},sched-fuse,sched-tile,"
                             "sched-partition{split-k=false},sched-allocate,sched-to-plan")
            assert sr.plan_seconds(cut, device) <= sr.plan_seconds(uncut, device) * 1.001, \
                (arch, m, n, k)


def _tiling_candidates(m: int, n: int, k: int, arch: str):
    """Every matmul tiling `sched-tile` considers for a one-matmul kernel, with its slots."""
    from passes.sched_tile import CANDIDATES, Tiling, kernel_space, slots
    from targets.ark.cost_model import kernel_estimate

    module = _matmul(m, n, k)
    ops = [op for op in module.walk() if type(op).__name__ == "MatmulOp"]
    device = gpu_device(arch)
    out = []
    for configs, tiles, warps, sram in CANDIDATES["matmul"](ops, kernel_space("matmul", ops),
                                                            device):
        count = slots(warps, sram, device)
        if count >= 1:
            estimate = kernel_estimate(ops, configs, tiles, warps, count, device)
            out.append((Tiling(tuple(configs), tiles, warps, sram, estimate.seconds), count))
    return ops, out, device


@pytest.mark.parametrize("arch", ["a100", "h100", "mi300x"])
def test_tiling_is_the_best_product_of_both_models_ratios(arch):
    """Brute force over the tilings of small and Llama-sized matmuls: the choice minimises
    (cost / cost-best) x (static / static of the cost-best) among the tilings within the
    slack that have a tile per processor, and is the cost model's best where that has fewer
    tiles than processors (split-K's case)."""
    from passes.sched_tile import COST_SLACK, robust_choice

    differs = 0
    for m, n, k in ((2048, 4096, 11008), (2048, 11008, 4096), (256, 1024, 512),
                    (512, 3000, 1024), (4096, 4096, 4096)):
        ops, candidates, device = _tiling_candidates(m, n, k, arch)
        chosen = robust_choice(ops, candidates, device)
        best, best_count = min(candidates, key=lambda c: (c[0].seconds, c[0].tiles))
        if best.tiles < device.processors:
            assert chosen is best
            continue
        work = sr.ops_work(ops)

        def static(t, count, work=work, device=device):
            return sr.launch_seconds(t.tiles, work.scaled(1 / t.tiles), device.processors,
                                     count, t.warps, device, "FP16")

        def product(t, count, best=best, best_count=best_count, static=static):
            return t.seconds / best.seconds * static(t, count) / static(best, best_count)

        admissible = [(t, c) for t, c in candidates if t.seconds <= COST_SLACK * best.seconds
                      and t.tiles >= device.processors]
        lowest = min(product(t, c) for t, c in admissible)
        count = next(c for t, c in candidates if t is chosen)
        assert product(chosen, count) == pytest.approx(lowest)
        assert chosen.seconds <= COST_SLACK * best.seconds
        differs += chosen is not best
    if arch == "a100":
        assert differs  # the Llama projections: 128 x 64 tiles instead of 128 x 256
