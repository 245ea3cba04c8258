"""The segment search of gemini-group-layers against `evaluate_segment` evaluated afresh for
every segment (the search before it grew segments layer by layer), on generated networks."""

from __future__ import annotations

import json
import random

import pytest

from passes.gemini_group_layers import (
    MAX_SEGMENT_LAYERS,
    LayerFacts,
    SegmentGrowth,
    best_segmentation,
    evaluate_segment,
    wl0_residents,
)
from targets.gemini.model import GeminiHardware


def random_facts(rng: random.Random, n: int) -> list[LayerFacts]:
    """A network in topological order: each layer reads one to three earlier layers (often
    the previous one, sometimes a long skip) or a network input."""
    facts = []
    for i in range(n):
        producers = {i - 1} if i and rng.random() < 0.8 else {-1}
        for _ in range(rng.randrange(3)):
            producers.add(rng.randrange(-1, i) if i else -1)
        sizes = [rng.choice([0, 64, 4096, 50_000, 300_000, 2_000_000]) for _ in range(9)]
        weights = sizes[0] if rng.random() < 0.6 else 0
        streamed = rng.random() < 0.5
        facts.append(LayerFacts(
            i, None, sizes[1] or 1, weights if streamed else 0, weights,
            [(p, sizes[2 + k] or 8) for k, p in enumerate(sorted(producers))], [],
            rng.random() < 0.1, rng.uniform(0, 5e5),
            {g: rng.uniform(0, 2e6) for g in (2, 3, 4, 6, 8, 16) if rng.random() < 0.3},
            # weights read straight to WL0 (when not streamed), of 64 to 9,216 units
            rng.choice([64, 448, 2_304, 9_216]) if weights and not streamed else None,
            {g: rng.uniform(0, 1e6) for g in (2, 3, 4, 6, 8, 16) if rng.random() < 0.3}))
    for f in facts:
        for producer, _ in f.inputs:
            if producer >= 0:
                facts[producer].users.append(f.index)
    for f in facts:
        f.users.sort()
    return facts


def reference_segmentation(facts, batch, cores, hw, evaluated=None):
    """The search as it was: every segment of up to MAX_SEGMENT_LAYERS layers evaluated
    from scratch, ends in order, starts in order. `evaluated` holds `evaluate_segment`'s
    plans by (start, end) where the caller has them already (the same calls, made once)."""
    n = len(facts)
    best = [None] * (n + 1)
    best[0] = (0.0, 0, -1)
    for end in range(1, n + 1):
        for start in range(max(0, end - MAX_SEGMENT_LAYERS), end):
            if best[start] is None:
                continue
            plan = evaluated[start, end] if evaluated is not None else \
                evaluate_segment(facts, start, end, batch, cores, hw)
            if plan is None:
                continue
            cost = (best[start][0] + plan.cycles, best[start][1] + 1, start)
            if best[end] is None or cost[:2] < best[end][:2]:
                best[end] = cost
    bounds, end = [], n
    while end > 0:
        bounds.append((best[end][2], end))
        end = best[end][2]
    return bounds[::-1]


CASES = [(seed, *config) for seed in range(8)
         for config in [(1, 1, 1 << 20), (4, 1, 4 << 20), (6, 4, 8 << 20), (16, 16, 64 << 20)]]


@pytest.mark.parametrize("seed, batch, cores, buffer", CASES)
def test_grown_segments_are_evaluated_segments(seed, batch, cores, buffer):
    rng = random.Random(seed)
    facts = random_facts(rng, rng.randrange(2, 60))
    hw = GeminiHardware(buffer_bytes=buffer)
    growth = SegmentGrowth(facts, batch, cores, hw)
    stopped = 0
    evaluated = {}      # every segment the reference search looks at, evaluated afresh once
    for start in range(len(facts)):
        limit = min(len(facts), start + MAX_SEGMENT_LAYERS)
        grown = dict(growth.grow(start, limit))
        for end in range(start + 1, limit + 1):
            expected = evaluated[start, end] = evaluate_segment(facts, start, end, batch,
                                                                cores, hw)
            assert grown.get(end) == expected, (start, end)
        stopped += len(grown) < limit - start
    assert best_segmentation(facts, batch, cores, hw) == \
        reference_segmentation(facts, batch, cores, hw, evaluated)
    if buffer == 1 << 20:       # the small buffer stops growth somewhere: the cut-off is used
        assert stopped


def test_a_long_chain_is_searched_in_linear_steps():
    """3,000 layers: the search before this took about 3,000 x 96 segment evaluations of up
    to 96 layers each (seconds per thousand layers); growth touches each (start, end) once."""
    rng = random.Random(7)
    facts = random_facts(rng, 3000)
    hw = GeminiHardware()
    bounds = best_segmentation(facts, 1, 1, hw)
    assert bounds[0][0] == 0 and bounds[-1][1] == 3000
    assert all(a[1] == b[0] for a, b in zip(bounds, bounds[1:], strict=False))


def test_more_layers_than_workloads_are_refused_before_the_search(monkeypatch):
    import argparse
    import json

    import passes.gemini_partition
    from backends.gemini import schedule_pipeline
    from compiler.pipeline import run_pipeline
    from frontends.gemini_layers import import_document
    from ground.diagnostics import PlancError
    from ground.json_reader import parse_json
    from tests.gemini.fixtures import small_network

    def schedule():
        module = import_document(parse_json(json.dumps(small_network())))
        run_pipeline(module, schedule_pipeline(argparse.Namespace(
            mesh="1x1", batch=None, buffer_size=None, dram_bw=None)))

    schedule()                                              # the control
    monkeypatch.setattr(passes.gemini_partition, "MAX_WORKLOADS", 3)
    with pytest.raises(PlancError, match=r"network has \d+ layers to schedule, each at least "
                                         r"one workload: more than the 3 workloads"):
        schedule()


def test_an_ark_model_of_more_operators_than_workloads_is_refused_before_converting(
        monkeypatch):
    """`-t gemini` on an ARK model counts its computing operators before converting any: the
    refusal names the first operator beyond the cap, and no layer is built."""
    import argparse

    import passes.gemini_partition
    from backends.gemini import pipeline
    from compiler.pipeline import run_pipeline
    from frontends.model_zoo import generated
    from ground.diagnostics import PlancError
    from passes.dnn_from_ark import LAYER_KINDS, Converter

    options = argparse.Namespace(mesh="1x1", batch=None, buffer_size=None, dram_bw=None)
    run_pipeline(generated(20), pipeline("ark-model", options))          # the control
    monkeypatch.setattr(passes.gemini_partition, "MAX_WORKLOADS", 3)

    def converted(*args):
        raise AssertionError("an operator was converted before the refusal")

    monkeypatch.setattr(Converter, "convert_op", converted)
    with pytest.raises(PlancError, match=r"network has at least \d+ layers to schedule \(one "
                                         r"per computing operator\), each at least one "
                                         r"workload: more than the 3 workloads") as refused:
        run_pipeline(generated(20), pipeline("ark-model", options))
    model = generated(20)
    computing = [o for o in next(iter(model.ops)).operators() if o.ark_type in LAYER_KINDS]
    assert f"at least {len(computing)} layers" in str(refused.value)


def test_a_layer_whose_weights_fit_no_cut_runs_as_one_group():
    """Several batch groups keep a layer's weights resident from the first group to the last,
    which no later cut can shrink; a layer whose weights alone exceed the budget streams them
    in one group (AlexNet's 38 MB dense layer at batch 4 was cut into 4 groups and overflowed
    L2). A layer of large feature maps that fits no cut keeps the smallest sub-batch."""
    hw = GeminiHardware()
    heavy = LayerFacts(0, None, 16_384, 37_879_808, 37_879_808, [(-1, 36_864)], [], True, 1e6)
    plan = evaluate_segment([heavy], 0, 1, 4, 1, hw)
    assert plan.sub_batch == 4
    maps = LayerFacts(0, None, 40_000_000, 0, 0, [(-1, 40_000_000)], [], True, 1e6)
    assert evaluate_segment([maps], 0, 1, 4, 1, hw).sub_batch == 1
    for facts in ([heavy], [maps]):
        assert dict(SegmentGrowth(facts, 4, 1, hw).grow(0, 1))[1] == \
            evaluate_segment(facts, 0, 1, 4, 1, hw)


def test_batch_groups_pay_for_their_weight_streaming():
    """A segment of several batch groups streams its weights from L2 in every group, each
    tile reading the group's input again (`LayerFacts.by_groups`, from `grouped_cycles`).
    Costed as one whole-batch pass, ResNet-50's first stages ran in four one-sample groups,
    1.05x slower than whole-batch workloads; a segment now costs its group count's compute,
    in the search (`SegmentGrowth`) as in `evaluate_segment`."""
    hw = GeminiHardware(buffer_bytes=1 << 20)
    # Maps that fit L2 only half the batch at a time; the first layer is cheap whole but
    # costly in groups.
    first = LayerFacts(0, None, 300_000, 0, 50_000, [(-1, 300_000)], [1], False, 1e5,
                       {2: 3e5, 4: 5e5})
    second = LayerFacts(1, None, 300_000, 0, 50_000, [(0, 300_000)], [], True, 1e5)
    facts = [first, second]
    together = evaluate_segment(facts, 0, 2, 4, 1, hw)
    assert together.sub_batch == 2
    assert together.cycles == first.by_groups[2] + second.cycles
    assert dict(SegmentGrowth(facts, 4, 1, hw).grow(0, 2))[2] == together
    assert evaluate_segment([second], 0, 1, 4, 1, hw).cycles == second.cycles


def test_batch_groups_keep_the_weights_that_fit_wl0_there():
    """A segment of several batch groups keeps the weights that go straight to WL0 there
    across the groups, in layer order while `wl0_resident_units` has room (Gemini's batch-4
    ResNet-50 IR: its first stages' weights in WL0, source DDR, in the second batch group).
    They take no L2, and each group runs the layer as one tile (`resident_by_groups`), not
    streamed from L2 (`by_groups`). Before, every weight of such a segment stayed in L2: the
    segment below then fit only one sample per group, at its streamed cost."""
    hw = GeminiHardware()
    budget = hw.planned_l2_bytes
    # Two samples' maps take 0.8 of the budget; the first two layers' weights 0.3 of it.
    maps, weights = int(0.8 * budget), int(0.15 * budget)
    first = LayerFacts(0, None, maps, 0, weights, [(-1, maps)], [1, 2], False, 1e5,
                       {2: 9e5, 4: 9e5}, 5_000, {2: 2e5, 4: 4e5})
    second = LayerFacts(1, None, maps, 0, weights, [(0, maps)], [2], False, 1e5,
                        {2: 9e5, 4: 9e5}, 5_000, {2: 2e5, 4: 4e5})
    # Room for 1,136 more units of WL0: this one's weights stay in L2.
    third = LayerFacts(2, None, 8, 0, 64, [(0, maps), (1, maps)], [], True, 1e5,
                       {2: 3e5, 4: 3e5}, 2_000, {2: 1e5, 4: 1e5})
    facts = [first, second, third]
    assert hw.wl0_resident_units == 11_136
    assert wl0_residents(facts, hw) == [True, True, False]
    plan = evaluate_segment(facts, 0, 3, 4, 1, hw)
    assert plan.sub_batch == 2
    assert plan.peak_bytes == 64 + (2 * maps + 8) / 2
    assert plan.cycles == 2e5 + 2e5 + 3e5
    assert dict(SegmentGrowth(facts, 4, 1, hw).grow(0, 3))[3] == plan
    # With no WL0 room they count against the budget and only one sample per group fits.
    small = GeminiHardware(wl0_capacity_units=hw.stream_tile_max_units)
    assert wl0_residents(facts, small) == [False, False, False]
    plan = evaluate_segment(facts, 0, 3, 4, 1, small)
    assert plan.sub_batch == 1
    assert plan.cycles == 9e5 + 9e5 + 3e5
    assert dict(SegmentGrowth(facts, 4, 1, small).grow(0, 3))[3] == plan


def test_grouped_cycles_are_the_workload_times_of_each_group():
    """`grouped_cycles` of a layer is what gemini-cycles makes of it run in g batch groups:
    g workloads of batch/g samples, weights streamed from L2 tile by tile, each tile reading
    the group's whole input (the small network's strided 1x1 convolution at batch 4)."""
    from compiler.pipeline import run_pipeline
    from dialects import dnn
    from frontends.gemini_layers import import_document
    from ground.json_reader import parse_json
    from passes.gemini_group_layers import grouped_cycles, quick_cycles
    from targets.gemini import model
    from tests.gemini.fixtures import small_network

    module = import_document(parse_json(json.dumps(small_network())))
    run_pipeline(module, "dnn-rebatch{batch=4}")
    layer = next(x for x in dnn.find_graph(module).layers if x.name_ == "conv3")
    hw = GeminiHardware()
    in_bytes = sum(model.fmap_bytes(model.whole(dnn.fmap(v).nchw), dnn.fmap(v).bits)
                   for v in layer.activations)
    found = grouped_cycles(layer, in_bytes, hw)
    assert set(found) == {2, 4}
    k = layer.out_type.nchw[1]
    tile_k = model.stream_tile_channels(layer, k, hw)
    n, _, h, w = layer.out_type.nchw
    for groups, cycles in found.items():
        tiles = [model.pe_cycles(layer, ([0, c, 0, 0], [n // groups - 1,
                                                        min(c + tile_k, k) - 1, h - 1, w - 1]),
                                 in_bytes // groups, 0) for c in range(0, k, tile_k)]
        units = model.wl0_stream_units(layer, tile_k, hw)
        assert cycles == groups * model.stream_time(tiles, units)
        assert cycles > quick_cycles(layer, in_bytes, 0)


def test_a_vector_layer_too_large_for_l2_is_cut_by_samples_first():
    """gemini-partition's `refine` cuts a part that does not fit its share of L2. A window
    (the small network's 3x3 max-pool) cut by rows reads a halo of input rows twice; cut by
    samples it reads each input row once. ResNet-34's first max-pool at batch 4 was cut by
    rows (912 cycles more than whole); a part of several samples is now cut by samples."""
    from compiler.pipeline import run_pipeline
    from dialects import dnn
    from frontends.gemini_layers import import_document
    from ground.json_reader import parse_json
    from passes.gemini_partition import refine, working_set
    from tests.gemini.fixtures import small_network

    module = import_document(parse_json(json.dumps(small_network())))
    run_pipeline(module, "dnn-rebatch{batch=4}")
    pool = next(x for x in dnn.find_graph(module).layers if x.name_ == "pool")
    whole = working_set(pool, (1, 1, 1, 1), 4, GeminiHardware())
    # A buffer whose part limit (40% of 90%) holds about two samples' worth.
    hw = GeminiHardware(buffer_bytes=int(whole / 0.36 * 0.6))
    split = refine(pool, (1, 1, 1, 1), 4, hw)
    assert split == (2, 1, 1, 1)
    assert working_set(pool, split, 4, hw) * 2 == whole
    # Cut by rows instead, the two halves' input rows overlap (the window's halo).
    from targets.gemini import model
    top, _ = model.input_box(pool, 0, ([0, 0, 0, 0], [3, 15, 3, 7]))
    bottom, _ = model.input_box(pool, 0, ([0, 0, 4, 0], [3, 15, 7, 7]))
    assert bottom[0][2] <= top[1][2]
    # So is a convolution whose weights go straight to WL0: cut by output channels, each part
    # would read the whole input again.
    conv = next(x for x in dnn.find_graph(module).layers if x.name_ == "conv1")
    conv_hw = GeminiHardware(buffer_bytes=int(working_set(conv, (1, 1, 1, 1), 4, hw)
                                              / 0.36 * 0.6))
    assert refine(conv, (1, 1, 1, 1), 4, conv_hw) == (2, 1, 1, 1)
    # A one-sample part is cut by rows as before.
    assert refine(pool, (1, 1, 1, 1), 1, GeminiHardware(buffer_bytes=int(
        working_set(pool, (1, 1, 1, 1), 1, hw) / 0.36 * 0.6)))[2] == 2


def test_a_model_of_100k_operators_is_within_the_workload_cap():
    """Every Gemini pass is linear in the workloads, so the cap bounds memory and IR size,
    not a quadratic step: a generated model of 100k operators (1,000 times the computing
    operators of one of 100, each at least one layer) passes both refusals, which the
    20,000-workload cap refused; one more layer than the cap is still refused at the layer
    beyond it."""
    from frontends.model_zoo import generated
    from ground.diagnostics import PlancError
    from passes.dnn_from_ark import LAYER_KINDS, _refuse_more_layers_than
    from passes.gemini_group_layers import _refuse_too_many_layers
    from passes.gemini_partition import MAX_WORKLOADS

    operators = list(next(iter(generated(100).ops)).operators())
    computing = [o for o in operators if o.ark_type in LAYER_KINDS]
    layers = 1000 * len(computing)
    assert layers >= 100_000
    _refuse_more_layers_than(computing * 1000, MAX_WORKLOADS)
    layer = next(iter(scheduled_small_network_layers()))
    _refuse_too_many_layers([layer] * layers)
    with pytest.raises(PlancError, match=rf"more than the {MAX_WORKLOADS} workloads"):
        _refuse_more_layers_than(computing * (MAX_WORKLOADS // len(computing) + 1),
                                 MAX_WORKLOADS)
    with pytest.raises(PlancError, match=rf"{MAX_WORKLOADS + 1} layers to schedule"):
        _refuse_too_many_layers([layer] * (MAX_WORKLOADS + 1))


def scheduled_small_network_layers():
    """The dnn layers of the small test network (as gemini-group-layers lists them)."""
    import json

    from dialects import dnn
    from frontends.gemini_layers import import_document
    from ground.json_reader import parse_json
    from passes.gemini_group_layers import scheduled_layers
    from tests.gemini.fixtures import small_network

    module = import_document(parse_json(json.dumps(small_network())))
    return scheduled_layers(dnn.find_graph(module))
