"""A workload over the planned L2 budget that fits the buffer runs whole where every cut of
it costs more (`choose_plan`, `part_rooms`), decided against each alternative's cost computed
here a second way; and on ResNet-34 at batch 4 the written IR still checks and its peak stays
within the buffer and Gemini's own."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from passes.gemini_group_layers import (
    LayerFacts,
    evaluate_segment,
    merge_whole_runs,
    part_rooms,
)
from targets.gemini.model import GeminiHardware

HW = GeminiHardware()
MB = 1_605_632
"""One sample-batch of ResNet-34's 7x7 convolution input at batch 4 (bytes)."""


def chain(*, next_weights: int = 0, skip: bool = False) -> list[LayerFacts]:
    """A quantize-like layer (network input to a 1.6 MB map) and a convolution-like layer
    (to a 3.2 MB map) at batch 4, then a layer reading the latter: as one group the second
    holds 4.8 MB, over the 4.6 MB budget and under the 7.5 MB the buffer may fill; in two
    groups each layer pays its cut (14 and 200 cycles). `next_weights`: weights the third
    layer loads; `skip`: the second layer reads a network input instead, and the third also
    reads the first map, which so lives beside the second workload."""
    first = LayerFacts(0, None, MB, 0, 0, [(-1, MB)], [1, 2] if skip else [1], False,
                       200_000.0, {2: 200_014.0, 4: 200_042.0})
    second = LayerFacts(1, None, 2 * MB, 0, 0, [(-1 if skip else 0, MB)], [2], False,
                        310_000.0, {2: 310_200.0, 4: 310_600.0})
    third = LayerFacts(2, None, 8, 0, next_weights,
                       [(0, MB), (1, 2 * MB)] if skip else [(1, 2 * MB)], [], True, 10.0)
    return [first, second, third]


def alternative(facts: list[LayerFacts], end: int, groups: int) -> float:
    """The segment [0, end)'s cost in `groups` batch groups, summed here from the facts: the
    larger of its compute and its DRAM time (input, weights, maps stored)."""
    segment = facts[:end]
    compute = sum(f.by_groups.get(groups, f.cycles) if groups > 1 else f.cycles for f in segment)
    dram = sum(size for f in segment for p, size in f.inputs if p < 0) + sum(
        f.weight_bytes for f in segment) + sum(
        f.out_bytes for f in segment if f.leaves or any(u >= end for u in f.users))
    return max(compute, dram / HW.dram_bytes_per_cycle)


def test_a_workload_over_the_budget_runs_whole_when_every_cut_costs_more():
    facts = chain()
    assert HW.planned_l2_bytes < 3 * MB <= HW.fill_l2_bytes
    # The search and the old rule: the largest group that fits the budget, two samples.
    assert evaluate_segment(facts, 0, 2, 4, 1, HW).sub_batch == 2
    plan = evaluate_segment(facts, 0, 2, 4, 1, HW, whole=True)
    whole, halves = alternative(facts, 2, 1), alternative(facts, 2, 2)
    assert whole < halves
    assert (plan.sub_batch, plan.whole, plan.peak_bytes, plan.cycles) == (4, True, 3 * MB, whole)


def test_a_whole_workload_pays_for_the_loads_it_keeps_waiting():
    """Nothing is prefetched while a workload over the budget runs: the loads after it up to
    the next segment's first layer wait, here 64 KB of weights (4,096 cycles), more than the
    214 cycles the cut costs."""
    facts = chain(next_weights=65_536)
    plan = evaluate_segment(facts, 0, 2, 4, 1, HW, whole=True)
    assert plan.sub_batch == 2 and not plan.whole
    assert alternative(facts, 2, 1) + 65_536 / HW.dram_bytes_per_cycle > plan.cycles
    assert plan.cycles == alternative(facts, 2, 2)


def test_a_workload_with_a_map_beside_it_keeps_the_budget():
    """The budget keeps room for what lives beside a workload: the first map, read again by
    the third layer, stays in L2 while the second runs (6.4 MB whole, within the fill)."""
    facts = chain(skip=True)
    plan = evaluate_segment(facts, 0, 3, 4, 1, HW, whole=True)
    assert 4 * MB <= HW.fill_l2_bytes
    assert not plan.whole and plan.sub_batch < 4
    # Without the map beside it, the same segment runs whole.
    assert evaluate_segment(chain(), 0, 3, 4, 1, HW, whole=True).whole


def test_a_workload_that_does_not_fit_the_buffer_is_cut():
    small = GeminiHardware(buffer_bytes=3 * MB * 10 // 9 - 64)
    assert small.fill_l2_bytes < 3 * MB
    plan = evaluate_segment(chain(), 0, 2, 4, 1, small, whole=True)
    assert not plan.whole and plan.sub_batch < 4


def test_part_rooms():
    """gemini-partition's share of L2 gives way where the plan leaves a layer more and a cut
    buys nothing: the whole workload (the buffer's fill), and an on-chip vector layer of a
    one-group segment (the budget less the maps beside it and the next layer's loads). A
    layer that loads its input from DRAM or a PE layer keeps the share (0)."""
    facts = chain()
    plan = evaluate_segment(facts, 0, 2, 4, 1, HW, whole=True)
    share = 0.4 * HW.fill_l2_bytes
    assert part_rooms(facts, 0, 2, plan, 4, 1, HW, share) == [0.0, HW.fill_l2_bytes]
    # Three layers in one group: a map, a vector layer reading it, a layer after both.
    vp, pe = SimpleNamespace(LAYER_TYPE="vp"), SimpleNamespace(LAYER_TYPE="pe")
    maps = [LayerFacts(0, pe, MB, 0, 0, [(-1, MB)], [1, 2], False, 1.0),
            LayerFacts(1, vp, MB, 0, 0, [(0, MB)], [2], False, 1.0),
            LayerFacts(2, pe, 8, 0, 4096, [(0, MB), (1, MB)], [], True, 1.0)]
    plan = evaluate_segment(maps, 0, 3, 1, 1, HW)
    assert plan.sub_batch == 1
    rooms = part_rooms(maps, 0, 3, plan, 1, 1, HW, MB / 2)
    # The vector layer: its own input and output; nothing lives beside it (the first map
    # is its input); the last layer loads 4,096 bytes of weights.
    assert rooms == [0.0, HW.planned_l2_bytes - 4096, 0.0]
    maps[1].layer = pe
    assert part_rooms(maps, 0, 3, plan, 1, 1, HW, MB / 2)[1] == 0.0


@pytest.fixture(scope="module")
def resnet34_b4(tmp_path_factory):
    """planc's single-core schedule of the corpus ResNet-34 at batch 4 (written once for the
    tests that read it), which `planc check` passes."""
    from compiler.driver import main as planc_main
    from tests.conftest import corpus_root

    layers = corpus_root() / "gemini" / "int8_resnet34.sim_quantized_b1.json"
    if not layers.exists():
        pytest.skip(f"upstream corpus not found at {layers.parent} (set PLANC_CORPUS)")
    out = tmp_path_factory.mktemp("resnet34") / "resnet34_b4.json"
    assert planc_main([str(layers), "--target", "gemini", "--batch", "4", "-o", str(out),
                       "-q"]) == 0
    assert planc_main(["check", "-q", str(out)]) == 0
    return out


def test_resnet34_at_batch_4_runs_its_7x7_convolution_whole(resnet34_b4):
    """Gemini's batch-4 ResNet-34 IR runs Conv_1 as one workload over four samples (4.8 MB
    of maps, over planc's 4.6 MB budget); planc ran it in two sample halves, 200 cycles
    more. It now runs it whole: the written IR checks, its peak L2 stays within the buffer's
    fill and Gemini's batch-1 peak, and every add is one workload."""
    workloads = json.loads(resnet34_b4.read_text())["0"]
    by_layer: dict[str, int] = {}
    for wl in workloads:
        by_layer[wl["layer_name"]] = by_layer.get(wl["layer_name"], 0) + 1
    assert by_layer["Conv_1"] == 1
    assert all(count == 1 for name, count in by_layer.items() if name.startswith("Add"))
    peak = max(sum(entry["size"] for entry in wl["buffer"]) for wl in workloads)
    assert HW.planned_l2_bytes < peak <= min(HW.fill_l2_bytes, 4_876_800)


def long_chain(weights: int, compute: float, count: int) -> list[LayerFacts]:
    """`chain()`'s two layers (the second over the budget as one group), then `count`
    layers each reading the previous one's map, each `compute` cycles, the first (like a
    max-pool) loading nothing, the others `weights` bytes each; the last is a network
    output."""
    facts = chain()[:2]
    facts[1].users = [2]
    for i in range(2, 2 + count):
        last = i == 1 + count
        facts.append(LayerFacts(i, None, 4096, 0, weights if i > 2 else 0,
                                [(i - 1, 2 * MB if i == 2 else 4096)],
                                [] if last else [i + 1], last, compute))
    return facts


def simulated_end(facts: list[LayerFacts]) -> float:
    """A second way to the whole-batch run's time: the layers one after another, each after
    its own loads; the DRAM idle while the workload over the budget (the second) runs, then
    loading the later layers' weights in layer order."""
    rate = HW.dram_bytes_per_cycle
    end = facts[0].cycles + facts[1].cycles
    dram = end
    for fact in facts[2:]:
        dram += fact.weight_bytes / rate
        end = max(end, dram) + fact.cycles
    return end


@pytest.mark.parametrize("compute", [30_000.0, 1_000.0])
def test_a_long_segment_after_a_workload_over_the_budget_runs_whole(compute):
    """A segment that starts with a workload over the budget and goes on: the weights the
    later layers load stream while the earlier ones compute. They were charged in full on
    top of the compute (a whole ResNet-34 at batch 4 after its 7x7 convolution: 1.4M cycles
    for its weights, which streamed under 4.4M cycles of compute). Compute-bound (30k cycles
    a layer, 27.5k cycles of weights each) the estimate is the simulated time to the cycle;
    DRAM-bound (1k cycles a layer) within one layer's compute. (4 MB of weights: every
    batch cut keeps them all in L2, which does not fit, so the segment runs whole.)"""
    facts = long_chain(440_000, compute, 10)
    plan = evaluate_segment(facts, 0, len(facts), 4, 1, HW, whole=True)
    assert plan.whole and plan.sub_batch == 4
    assert simulated_end(facts) - compute <= plan.cycles <= simulated_end(facts)
    if compute == 30_000.0:
        assert plan.cycles == simulated_end(facts)


def test_a_segment_run_whole_takes_in_the_next_when_that_saves_a_round_trip():
    """The search ends a segment at a workload over the budget and the batch cut runs it
    whole; the map it ends with is stored and read back by the next segment's first layer,
    which waits for both (the load reads what the store writes). Merged, the map stays in
    L2: here 3.2 MB each way, 401k cycles. The segment the search ended there runs whole
    because the layer after it loads nothing that would wait."""
    facts = long_chain(440_000, 30_000.0, 10)
    bounds = [(0, 2), (2, len(facts))]
    merged = merge_whole_runs(facts, bounds, 4, 1, HW)
    assert merged == [(0, len(facts))]
    apart = [evaluate_segment(facts, s, e, 4, 1, HW, whole=True) for s, e in bounds]
    both = evaluate_segment(facts, 0, len(facts), 4, 1, HW, whole=True)
    trip = 2 * 2 * MB / HW.dram_bytes_per_cycle
    assert apart[0].whole and both.whole
    assert both.cycles < apart[0].cycles + apart[1].cycles + trip
    # A segment that fits the budget is left as the search made it.
    small = long_chain(440_000, 30_000.0, 10)
    small[1].out_bytes = MB
    small[2].inputs = [(1, MB)]
    assert merge_whole_runs(small, bounds, 4, 1, HW) == bounds


def test_resnet34_at_batch_4_keeps_its_first_maps_on_chip(planc, resnet34_b4):
    """Gemini's batch-4 ResNet-34 IR runs the 7x7 convolution and the first max-pool in one
    segment, each one workload over all four samples. planc ended a segment at the
    convolution (its 4.8 MB are over the budget), stored its 3.2 MB output and read it back
    for the max-pool in two parts: 16 cycles of workload time and a round trip the max-pool
    waited for (latency 1.096x the summed workload time). Now nothing but the network
    output is stored, the max-pool is one workload, and the written IR checks."""
    out = resnet34_b4
    ir = json.loads(out.read_text())
    assert [store["layer_name"] for store in ir["-1"]["in"]] == ["Gemm_125"]
    assert [wl["layer_name"] for wl in ir["0"]].count("MaxPool_4_1") == 1
    summed = sum(wl["time"] for wl in ir["0"])
    result = planc("simulate", out, "--json", "-q")
    assert result.code == 0
    latency = json.loads(result.out)["latency_cycles"]
    assert latency < 1.03 * summed
