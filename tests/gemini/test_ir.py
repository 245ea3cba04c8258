"""Gemini scheduler IR: lossless import/export, and the verifier's rules with exact messages."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from backends.gemini import emit
from dialects.locations import verify_module
from frontends.gemini_ir import import_document
from ground.diagnostics import PlancError
from ground.json_reader import load_json_file, parse_json
from tests.conftest import corpus_params, write_json
from tests.gemini.fixtures import NETWORK_FACTS, small_schedule

SCHEDULES = corpus_params("gemini", "*_stschedule.json")
# The corruption tests name positions in Gemini's ResNet-34 IR.
RESNET34 = [p for p in SCHEDULES if p.values[0] is None or "resnet34" in p.values[0].name]


def _float_tokens_normalised(text: str) -> str:
    # Gemini's writer prints some floats with trailing zeros (244.2150); planc prints the
    # shortest text of the same double. Everything else must match byte for byte.
    return re.sub(r"-?\d+\.\d+(?:e[-+]?\d+)?", lambda m: repr(float(m.group())), text)


@pytest.mark.parametrize("path", SCHEDULES)
def test_corpus_schedule_round_trip(path):
    module = import_document(load_json_file(path))
    verify_module(module)
    text = emit(module)
    original = path.read_text()
    assert json.loads(text) == json.loads(original)
    assert _float_tokens_normalised(text) == _float_tokens_normalised(original)


@pytest.mark.parametrize("path", SCHEDULES)
def test_corpus_schedule_checks_through_the_cli(planc, path, tmp_path):
    r = planc("check", path)
    assert r.code == 0, r.err
    workloads = NETWORK_FACTS[path.name.split(".")[0]]["workloads"]
    assert "ok: gemini-ir" in r.out and f"{workloads} workloads" in r.out
    # Gemini's own output passes --strict too: its destinations name the consumers of the
    # whole on-chip tensor a block belongs to (ResNet-50's Add_110_1 blocks go to Conv_112,
    # which holds all eight in one L2 tensor and reads four), which is no waste.
    assert not r.err
    assert planc("check", "--strict", path).code == 0
    out = tmp_path / "again_stschedule.json"
    r = planc(path, "--target", "gemini", "-o", out)
    assert r.code == 0, r.err
    assert json.loads(out.read_text()) == json.loads(path.read_text())


def test_small_schedule_round_trips_with_its_quirks(planc, tmp_path):
    doc = small_schedule()
    conv = doc["0"][1]
    conv["wl1_buffer"] = conv.pop("wl0_buffer")          # the ResNet-34 files' key
    doc["0"][0]["wl0_buffer"] = None                     # a null WL0 list
    del conv["buffer"][1]["align"]                       # optional members may be missing
    del doc["-1"]["in"][0]["related_ofmap"]
    doc["0"][0]["tile_info"]["tile_num_0"]["future_key"] = {"kept": [1, None]}
    doc["0"][0]["buffer"][0]["source"][0]["vendor"] = "x"
    conv["ofmap"][0]["destination"][0]["note"] = 1.5
    doc["compiler_version"] = "9.9"
    src = write_json(tmp_path / "s.json", doc)
    out = tmp_path / "out_stschedule.json"
    r = planc(src, "--target", "gemini", "-o", out)
    assert r.code == 0, r.err
    assert json.loads(out.read_text()) == doc


def test_emits_jsoncpp_layout():
    module = import_document(parse_json(json.dumps(small_schedule())))
    text = emit(module)
    assert text.startswith('{\n   "-1" : {\n      "in" : [\n         {\n            "core_id" : 0,')
    assert '"lower" : [ 0, 0, 0, 0 ],' in text
    assert ('"workload" : [\n            [ 0, 0, 0, 0 ],\n            [ 0, 7, 7, 7 ]\n'
            '         ],') in text
    assert '"single_tile_time_pred" : 30.0,' in text and text.endswith("}\n")


# ---------------------------------------------------------------------------------------------
# Corruptions: each breaks one rule; the error names the rule and the exact place.
# ---------------------------------------------------------------------------------------------


def _set(path, value):
    def mutate(doc):
        *parents, last = path
        target = doc
        for step in parents:
            target = target[step]
        if isinstance(target, list) and last == len(target):
            target.append(value)
        else:
            target[last] = value
    return mutate


def _drop(path):
    def mutate(doc):
        *parents, last = path
        target = doc
        for step in parents:
            target = target[step]
        del target[last]
    return mutate


CORRUPTIONS = [
    ("overlap", _set(["0", 1, "buffer", 1, "address"], 600),
     "$['0'][1].buffer[1].address: tensor 2 at [600, 1112) overlaps tensor 1 at [512, 1024) in "
     "the same L2 snapshot"),
    ("beyond-buffer", _set(["0", 0, "buffer", 1, "address"], 70000),
     "$['0'][0].buffer[1].address: tensor 1 at [70000, 70512) does not fit the ring buffer "
     "regions [0, 65536)"),
    ("ring-wrap-overlap", _set(["0", 0, "buffer", 1, "address"], 65280),
     "$['0'][0].buffer[1].address: tensor 1 at [65280, 65792) overlaps tensor 0 at [0, 512) in "
     "the same L2 snapshot"),
    ("ring-region", _set(["0", 0, "ring_buffer_info"], [[0, 512], [1024, 1024]]),
     "$['0'][0].buffer[1].address: tensor 1 at [512, 1024) does not fit the ring buffer regions "
     "[0, 512), [1024, 2048)"),
    ("region-beyond-buffer", _set(["0", 0, "ring_buffer_info"], [[0, 70000]]),
     "$['0'][0].ring_buffer_info: ring buffer region [0, 70000) exceeds the buffersize 65536"),
    ("no-producer", _set(["0", 1, "weight", "transfer_id"], [7]),
     "$['0'][1].weight.transfer_id: transfer 7 has no producer (no ofmap or DRAM load has this "
     "id)"),
    ("ifmap-not-in-l2", _set(["0", 1, "ifmap", 0, "transfer_id"], [7]),
     "$['0'][1].ifmap[0].transfer_id: no tensor of the L2 snapshot holds transfers [7]"),
    ("producer-forgets-consumer", _set(["0", 0, "ofmap", 0, "destination", 0, "workload_id"], 0),
     "$['0'][1].ifmap[0].transfer_id: transfer 2 is consumed by workload 1 of core 0 but its "
     "producer (an ofmap of workload 0 of core 0) does not list it as a destination"),
    ("dangling-destination", _set(["-1", "out", 1, "destination", 0, "workload_id"], 5),
     "$['-1'].out[1].destination[0].workload_id: workload 5 of core 0 does not exist"),
    ("duplicate-transfer", _set(["0", 0, "ofmap", 0, "transfer_id"], 1),
     "$['0'][0].ofmap[0].transfer_id: transfer 1 is produced twice (also at a DRAM fmap load)"),
    ("weight-from-core", _set(["0", 1, "weight", "transfer_id"], [2]),
     "$['0'][1].weight.transfer_id: weight transfer 2 must be a DRAM weight load, it is an "
     "ofmap of workload 0 of core 0"),
    ("store-not-ofmap", _set(["-1", "in", 0, "workload_id"], 0),
     "$['-1'].in[0].transfer_id: stored block 3 is not an ofmap of workload 0 of core 0"),
    ("dram-dest-without-store", _drop(["-1", "in", 0]),
     "$['0'][1].ofmap[0].destination[0]: block 3 goes to DRAM but no DRAM \"in\" entry stores it"),
    ("related-ofmap", _set(["-1", "in", 0, "related_ofmap"], [9]),
     "$['-1'].in[0].related_ofmap[0]: related_ofmap 9 is not a DRAM load"),
    ("related-ifmap", _set(["-1", "out", 1, "related_ifmap"], [2]),
     "$['-1'].out[1].related_ifmap[0]: related_ifmap 2 is not a DRAM store"),
    ("related-not-symmetric", _set(["-1", "out", 1, "related_ifmap"], [3]),
     "$['-1'].out[1].related_ifmap[0]: store 3 does not list load 1 in its related_ofmap"),
    ("sparse-ids", _set(["0", 1, "workload_id"], 2),
     "$['0'][1].workload_id: workload ids must be dense per core: the workload at position 1 of "
     "core 0 has id 2"),
    ("box-inverted", _set(["0", 0, "workload"], [[0, 0, 0, 4], [0, 7, 7, 3]]),
     "$['0'][0].workload: lower [0, 0, 0, 4] is not <= upper [0, 7, 7, 3]"),
    ("box-rank", _set(["0", 0, "ifmap", 0, "upper"], [0, 7, 7]),
     "$['0'][0].ifmap[0]: lower and upper must have 4 coordinates (N, C, H, W), got 4 and 3"),
    ("ofmap-outside-tile", _set(["0", 0, "ofmap", 0, "upper"], [0, 7, 7, 8]),
     "$['0'][0].ofmap[0].upper: block [0, 0, 0, 0]..[0, 7, 7, 8] is outside the workload's "
     "output tile of size [1, 8, 8, 8]"),
    ("store-outside-layer", _set(["-1", "in", 0, "upper"], [0, 15, 7, 7]),
     "$['-1'].in[0].upper: block [0, 0, 0, 0]..[0, 15, 7, 7] is outside layer conv's ofmap "
     "[0, 0, 0, 0]..[0, 7, 7, 7]"),
    ("ifmap-outside-tensor", _set(["0", 1, "ifmap", 0, "upper"], [0, 7, 8, 7]),
     "$['0'][1].ifmap[0].upper: box [0, 0, 0, 0]..[0, 7, 8, 7] is outside L2 tensor 1 of size "
     "[1, 8, 8, 8]"),
    ("tile-outside", _set(["0", 1, "tile_info", "tile_num_0", "ofmap_upper"], [0, 8, 7, 7]),
     "$['0'][1].tile_info.tile_num_0.ofmap_upper: tile ofmap [0, 0, 0, 0]..[0, 8, 7, 7] is "
     "outside the workload [0, 0, 0, 0]..[0, 7, 7, 7]"),
    ("order-twice", _set(["0", 1, "buffer", 1, "tensor_order"], 0),
     "$['0'][1].buffer[1].tensor_order: tensor_order 0 is given to DRAM transfers 1 and 3"),
    ("order-sentinel", _set(["0", 0, "buffer", 1, "tensor_order"], 2),
     "$['0'][0].buffer[1].tensor_order: a tensor that does not touch DRAM must have "
     "tensor_order 3 (the number of DRAM transfers), got 2"),
    ("order-range", _set(["0", 0, "wl0_buffer", 0, "tensor_order"], 3),
     "$['0'][0].wl0_buffer[0].tensor_order: a DRAM tensor's tensor_order must be in [0, 3), got 3"),
    ("order-inconsistent", _set(["0", 1, "wl0_buffer", 0, "tensor_order"], None),
     "$['0'][1].wl0_buffer[0].tensor_order: a DRAM tensor's tensor_order must be in [0, 3), got "
     "None"),
    ("core-wl0-order", _set(["0", 1, "wl0_buffer", 0, "source"], "CORE"),
     "$['0'][1].wl0_buffer[0].tensor_order: a WL0 tensor fed from L2 (CORE) has tensor_order "
     "null"),
    ("order-missing", lambda d: [wl.__setitem__("wl0_buffer", []) for wl in d["0"]],
     "$['-1'].out[0].transfer_id: DRAM transfer 0 has no tensor_order: it never appears in an "
     "L2 or WL0 snapshot"),
    ("sources-vs-ids", _set(["0", 1, "buffer", 0, "source", 0, "transfer_id"], 1),
     "$['0'][1].buffer[0].source: the sources' transfer ids [1] must be the tensor's transfer ids "
     "[2]"),
    ("tensor-moves", _set(["0", 1, "buffer", 0, "address"], 1024),
     "$['0'][1].buffer[0].address: tensor 1 changes its address from 512 to 1024"),
    ("newly-added-twice", _set(["0", 1, "buffer", 0, "newly_added"], True),
     "$['0'][1].buffer[0].newly_added: tensor 1 is newly_added but was already in L2"),
    ("wl0-overlap", _set(["0", 1, "wl0_buffer"], [
        {"address": 0, "size": 13, "source": "DDR", "tensor_order": 1, "transfer_id": [0]},
        {"address": 8, "size": 4, "source": "CORE", "tensor_order": None, "transfer_id": [0]}]),
     "$['0'][1].wl0_buffer[1].address: WL0 tensor at [8, 12) overlaps the one at [0, 13)"),
    ("layer-type", _set(["0", 0, "layer_type"], "gpu"),
     "$['0'][0].layer_type: expected one of \"pe\", \"vp\", \"dt\", got \"gpu\""),
    ("dest-type", _set(["0", 0, "ofmap", 0, "destination", 0, "type"], "disk"),
     "$['0'][0].ofmap[0].destination[0]: destination type must be \"core\" or \"DRAM\", got "
     "\"disk\""),
    ("core-off-mesh", lambda d: d.__setitem__("3", d.pop("0")),
     "$['3']: core 3 is not on the 1x1 mesh"),
    ("wrong-type", _set(["0", 0, "buffer", 0, "size"], "512"),
     "$['0'][0].buffer[0].size: expected an integer, got a string (\"512\")"),
    ("missing-key", _drop(["0", 1, "ofmap", 0, "destination"]),
     "$['0'][1].ofmap[0]: missing required key 'destination'"),
    ("both-wl0-keys", _set(["0", 1, "wl1_buffer"], []),
     "$['0'][1]: a workload has one WL0 list, got both wl0_buffer and wl1_buffer"),
]


# A name that points nowhere is reported where it is written (before: at the ifmap or store
# that then found no producer, the symptom).
NAMED_PLACES = [
    ("dest-core-off-mesh", _set(["0", 0, "ofmap", 0, "destination", 0, "core_id"], 2),
     "$['0'][0].ofmap[0].destination[0].core_id: core 2 is not a core of the schedule (cores "
     "[0] on a 1x1 mesh)"),
    ("dest-no-workload", _set(["0", 0, "ofmap", 0, "destination", 0, "workload_id"], 7),
     "$['0'][0].ofmap[0].destination[0].workload_id: workload 7 of core 0 does not exist"),
    ("load-no-workload", _set(["-1", "out", 0, "destination", 0, "workload_id"], 7),
     "$['-1'].out[0].destination[0].workload_id: workload 7 of core 0 does not exist"),
    ("store-core-off-mesh", _set(["-1", "in", 0, "core_id"], 1),
     "$['-1'].in[0].core_id: core 1 is not a core of the schedule (cores [0] on a 1x1 mesh)"),
    ("source-core", _set(["0", 0, "buffer", 1, "source", 0, "core_id"], 3),
     "$['0'][0].buffer[1].source[0].core_id: source core 3 does not exist or does not produce "
     "transfer 2 (transfer 2 comes from core 0)"),
]


@pytest.mark.parametrize("mutate,message", [c[1:] for c in NAMED_PLACES],
                         ids=[c[0] for c in NAMED_PLACES])
def test_a_name_that_points_nowhere_is_reported_where_it_is_written(mutate, message):
    doc = small_schedule()
    mutate(doc)
    with pytest.raises(PlancError) as e:
        verify_module(import_document(parse_json(json.dumps(doc))))
    assert str(e.value) == message


def test_small_schedule_is_valid(planc, tmp_path):
    r = planc("check", write_json(tmp_path / "s.json", small_schedule()))
    assert r.code == 0, r.err
    assert r.out.strip().endswith("(1 core(s) on a 1x1 mesh, 2 workloads, DRAM 1 block in / 2 blocks out)")


@pytest.mark.parametrize("mutate,message", [c[1:] for c in CORRUPTIONS],
                         ids=[c[0] for c in CORRUPTIONS])
def test_corruption_is_reported_precisely(planc, tmp_path, mutate, message):
    doc = small_schedule()
    mutate(doc)
    src = write_json(tmp_path / "bad.json", doc)
    out = tmp_path / "out_stschedule.json"
    r = planc(src, "--target", "gemini", "-o", out)
    assert r.code == 1
    assert r.err == f"planc: error: {src}: {message}\n"
    assert not out.exists()


CORPUS_CORRUPTIONS = [
    (_set(["0", 33, "buffer", 4, "address"], 0),
     "$['0'][33].buffer[4].address: tensor 51 at [0, 50176) overlaps tensor 53 at [0, 100352) "
     "in the same L2 snapshot"),
    (_set(["-1", "out", 5, "destination", 0, "workload_id"], 3),
     "$['0'][12].weight.transfer_id: transfer 5 is consumed by workload 12 of core 0 but its "
     "producer (a DRAM weight load) does not list it as a destination"),
    (_set(["0", 40, "buffer", 1, "tensor_order"], 22),
     "$['0'][40].buffer[1].tensor_order: DRAM transfer 21 has tensor_order 22 here but 25 "
     "elsewhere"),

]


def test_unread_destination_warns_and_fails_strict(planc, tmp_path):
    doc = small_schedule()
    _set(["0", 0, "ofmap", 0, "destination", 1],
         {"core_id": 0, "type": "core", "workload_id": 0})(doc)
    src = write_json(tmp_path / "s.json", doc)
    r = planc("check", src)
    assert r.code == 0 and "1 warning" in r.out
    assert r.err == (f"planc: warning: {src}: $['0'][0].ofmap[0].destination[1]: destination "
                     "workload 0 of core 0 neither reads transfer 2 nor holds it in an input "
                     "L2 tensor (a transfer to nowhere) [gemini.unread-destination]\n")
    assert planc("check", "--strict", src).code == 1


@pytest.mark.parametrize("path", RESNET34)
def test_a_block_sent_to_a_workload_that_does_not_read_it_is_a_warning(path):
    from compiler.checking import check_module
    from frontends import format_named

    doc = json.loads(Path(path).read_text())
    doc["0"][58]["ofmap"][0]["destination"].append({"core_id": 0, "type": "core",
                                                    "workload_id": 60})
    report = check_module(format_named("gemini-ir"),
                          import_document(parse_json(json.dumps(doc))))
    assert report.ok and [(f.severity, f.rule, f.path) for f in report.findings] == [
        ("warning", "gemini.unread-destination", "$['0'][58].ofmap[0].destination[2]")]
    assert "neither reads transfer 97" in report.findings[0].message


@pytest.mark.parametrize("path", RESNET34)
@pytest.mark.parametrize("mutate,message", CORPUS_CORRUPTIONS)
def test_corpus_corruption_is_reported_precisely(path, mutate, message):
    doc = json.loads(Path(path).read_text())
    mutate(doc)
    with pytest.raises(PlancError) as e:
        verify_module(import_document(parse_json(json.dumps(doc))))
    assert str(e.value) == message
