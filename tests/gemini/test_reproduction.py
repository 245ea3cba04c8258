"""planc's Gemini models against Gemini's own IR: addresses, times, sizes.

The corpus pair is Gemini's scheduler IR for INT8 ResNet-34 (batch 1, one core, 16 GB/s) and the
layer description it was made from. These tests measure how much of that IR planc's allocator and
cycle model reproduce given the IR's own schedule, and print the figures (pytest -s).
"""

from __future__ import annotations

import json
import math

import pytest

from frontends.gemini_ir import import_document as import_ir
from frontends.gemini_layers import import_document as import_layers
from ground.json_reader import load_json_file, parse_json
from passes.gemini_allocate_l2 import reallocate
from passes.gemini_wl0 import reallocate as reallocate_wl0
from targets.gemini import model
from tests.conftest import corpus_params
from tests.gemini.fixtures import NETWORK_FACTS, network_pairs, small_schedule

SCHEDULES = corpus_params("gemini", "*_stschedule.json")
NETWORKS = network_pairs()

# Gemini rules planc reproduces on ResNet-34 but not (yet) on ResNet-50, stated exactly.
UNREPRODUCED = {
    "streaming": "Gemini stages in L2 and streams some 1x1 convolutions whose direct WL0 image "
                 "is below 9216 units ([256, 1024, 1, 1]: 4224; [256, 512, 1, 1]: 2176), and "
                 "streams [512, 1024, 1, 1] in 64-channel tiles where planc's rule gives 128 "
                 "and the 1000x2048 FC in 250-channel tiles of 16640 units; no rule found in the "
                 "two IRs decides this",
    "time": "the streaming time of ResNet-50's Conv_112 workloads is 499 cycles below "
            "L + sum(max(c, L)) + c_last, which holds on every ResNet-34 workload",
}


def _expected_failure(params, network: str, reason: str):
    return [pytest.param(*p.values, id=p.id, marks=pytest.mark.xfail(reason=reason,
                                                                      strict=True))
            if p.values[0] == network or (p.values[0] is not None and network in str(
                p.values[0])) else p for p in params]


def _schedule(module):
    return next(iter(module.ops))


def _addresses(schedule, kind: str) -> dict:
    entries = {}
    for core in schedule.cores:
        for position, wl in enumerate(core.workloads):
            for i, t in enumerate(wl.buffer if kind == "l2" else wl.wl0):
                entries[(core.id, position, i)] = t.value("address")
    return entries


def _scrambled(path):
    module = import_ir(load_json_file(path))
    schedule = _schedule(module)
    for wl in schedule.workloads():
        for t in [*wl.buffer, *wl.wl0]:
            t.address = t.address.__class__(123456789, t.address.type)
    return module, schedule


@pytest.mark.parametrize("path", SCHEDULES)
def test_allocator_reproduces_gemini_l2_addresses(path):
    truth = _addresses(_schedule(import_ir(load_json_file(path))), "l2")
    module, schedule = _scrambled(path)
    reallocate(schedule)
    got = _addresses(schedule, "l2")
    exact = sum(got[k] == v for k, v in truth.items()) / len(truth)
    print(f"\nL2 addresses reproduced: {exact:.1%} of {len(truth)} listings")
    assert exact >= 0.95


@pytest.mark.parametrize("path", SCHEDULES)
def test_wl0_first_fit_against_gemini(path):
    """The same first fit places Gemini's WL0 (weight buffer) entries, in WL0 units."""
    truth = _addresses(_schedule(import_ir(load_json_file(path))), "wl0")
    module, schedule = _scrambled(path)
    reallocate_wl0(schedule, model.GeminiHardware().wl0_capacity_units)
    got = _addresses(schedule, "wl0")
    exact = sum(got[k] == v for k, v in truth.items()) / len(truth)
    print(f"\nWL0 addresses reproduced: {exact:.1%} of {len(truth)} listings")
    assert exact >= 0.95


def test_allocator_places_lowest_first_fit():
    doc = small_schedule()
    module = import_ir(parse_json(json.dumps(doc)))
    schedule = _schedule(module)
    for wl in schedule.workloads():
        for t in wl.buffer:
            t.address = t.address.__class__(999, t.address.type)
    reallocate(schedule)
    # wl0: tensor 0 (input, live to wl0) and tensor 1 (quant's output, live to wl1) arrive
    # together: the longer-lived one goes first, at 0. wl1: the staging copy takes the hole.
    assert [t.value("address") for t in schedule.cores[0].workloads[0].buffer] == [512, 0]
    assert [t.value("address") for t in schedule.cores[0].workloads[1].buffer] == [0, 512]


@pytest.mark.parametrize("path", _expected_failure(SCHEDULES, "int8_resnet50",
                                                   UNREPRODUCED["time"]))
def test_time_model_matches_weight_streaming_workloads(path):
    schedule = _schedule(import_ir(load_json_file(path)))
    checked = 0
    for wl in schedule.workloads():
        streamed = [t for t in wl.wl0 if t.value("source") == "CORE"
                    and t.value("layer_name") == wl.layer]
        if not streamed:
            continue
        preds = [tile.pred for tile in wl.tiles]
        predicted = model.stream_time(preds, streamed[0].value("size"))
        assert abs(math.floor(predicted) - wl.value("time")) <= 1, (wl.id, predicted)
        checked += 1
    print(f"\nweight-streaming workloads within one cycle: {checked}/{checked}")
    assert checked >= 10


def _pairs(schedule_path, layers_path):
    schedule = _schedule(import_ir(load_json_file(schedule_path)))
    graph = next(iter(import_layers(load_json_file(layers_path)).ops))
    return schedule, {layer.name_: layer for layer in graph.layers}


@pytest.mark.parametrize("network, layers_path, path",
                         _expected_failure(NETWORKS, "int8_resnet50", UNREPRODUCED["streaming"]))
def test_sizes_and_wl0_units_follow_gemini_rules(network, layers_path, path):
    schedule, layers = _pairs(path, layers_path)
    weights = direct = streamed = 0
    for wl in schedule.workloads():
        layer = layers[wl.layer]
        assert model.fmap_bytes(wl.box, layer.out_type.bits) == wl.value("ofmap_size")
        if wl.weight is None:
            continue
        k = wl.weight.ints_of("upper")[1] + 1
        assert model.weight_bytes(layer, k) == wl.weight.value("size")
        weights += 1
        for entry in wl.wl0:
            if entry.value("layer_name") != wl.layer:
                continue
            if entry.value("source") == "DDR":
                assert entry.value("size") == model.wl0_direct_units(layer, k)
                assert not model.streams_weights(layer, k, model.GeminiHardware())
                direct += 1
            else:
                tile_k = model.stream_tile_channels(layer, k, model.GeminiHardware())
                assert entry.value("size") == model.wl0_stream_units(
                    layer, tile_k, model.GeminiHardware())
                assert len(wl.tiles) == k // tile_k
                streamed += 1
    assert weights == NETWORK_FACTS[network]["pe_workloads"] and direct > 10 and streamed > 10


@pytest.mark.parametrize("network, layers_path, path", NETWORKS)
def test_vector_costs_match_gemini(network, layers_path, path):
    schedule, layers = _pairs(path, layers_path)
    checked = 0
    for wl in schedule.workloads():
        if wl.value("layer_type") != "vp":
            continue
        layer = layers[wl.layer]
        cycles = model.vp_cycles(layer, wl.ifmaps[0].value("size"), wl.value("ofmap_size"))
        assert math.floor(cycles) == wl.value("time"), wl.layer
        checked += 1
    assert checked == NETWORK_FACTS[network]["vp_workloads"]


@pytest.mark.parametrize("network, layers_path, path", NETWORKS)
def test_receptive_fields_and_padding_match_gemini(network, layers_path, path):
    schedule, layers = _pairs(path, layers_path)
    for wl in schedule.workloads():
        layer = layers[wl.layer]
        if not isinstance(layer, model.dnn.WindowOp) or layer.LAYER_TYPE != "pe":
            continue
        box, pad = model.input_box(layer, 0, wl.box)
        ifmap = wl.ifmaps[0]
        assert model.box_size(box) == model.box_size((ifmap.ints_of("lower"),
                                                      ifmap.ints_of("upper"))), wl.layer
        assert pad == wl.ints_of("tile_padding_tblr"), wl.layer
