"""Gemini's L2 convention on multi-core schedules (issue 25).

In Gemini's own IRs an `ofmap` L2 entry is the staging copy of a DRAM store and its
`tensor_order` is that store's place in the DRAM queue (seed 004; the ResNet IRs); an output
that stays on chip is an `ifmap` entry whose source is a core. planc followed another
convention at 2x2 (ofmap entries with the sentinel order for outputs only other cores read).
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from pathlib import Path

import pytest

from backends.ark_model import emit_model
from tests.gemini.test_ark_models import gpt2_block, llama_block

HERE = Path(__file__).parent
B16 = HERE / "data" / "resnet34_b16_gemm_stschedule.json"
CORPUS = Path(os.environ.get("PLANC_CORPUS", HERE.parents[2] / "shared" / "corpus"))
RESNET34_LAYERS = CORPUS / "gemini" / "int8_resnet34.sim_quantized_b1.json"


def staged_without_store(doc: dict) -> list[tuple[str, int, str]]:
    """(core, workload id, layer) of every `ofmap` L2 entry that no DRAM store of the workload
    listing it first sends: read from the JSON alone, without planc's verifier."""
    stores = {(s["core_id"], s["workload_id"], s["layer_name"]) for s in doc["-1"]["in"]}
    bad = []
    for core, workloads in doc.items():
        if core == "-1" or not isinstance(workloads, list):
            continue
        born: dict[int, int] = {}
        for wl in workloads:
            for entry in wl.get("buffer", []):
                born.setdefault(entry["tensor_id"], wl["workload_id"])
                if entry["type"] != "ofmap":
                    continue
                if (int(core), born[entry["tensor_id"]], entry["layer_name"]) not in stores:
                    bad.append((core, wl["workload_id"], entry["layer_name"]))
    return bad


def on_chip_copies(doc: dict) -> int:
    """`ifmap` entries whose sources are blocks of the listing core's own workloads."""
    count = 0
    for core, workloads in doc.items():
        if core == "-1" or not isinstance(workloads, list):
            continue
        layers = {wl["layer_name"] for wl in workloads}
        for wl in workloads:
            for entry in wl.get("buffer", []):
                if entry["type"] == "ifmap" and entry.get("newly_added") and all(
                        s["type"] == "core" and s["core_id"] == int(core)
                        and s.get("layer_name") == wl["layer_name"] in layers
                        for s in entry["source"]):
                    count += 1
    return count


def _models(tmp_path) -> list[Path]:
    paths = [Path("examples/attention.json")]
    for name, build in (("gpt2", gpt2_block), ("llama", llama_block)):
        path = tmp_path / f"{name}.json"
        path.write_text(emit_model(build()))
        paths.append(path)
    if RESNET34_LAYERS.exists():
        paths.append(RESNET34_LAYERS)
    return paths


@pytest.fixture(scope="module")
def schedules(tmp_path_factory):
    from compiler.driver import main

    folder = tmp_path_factory.mktemp("mesh2x2")
    made = {}
    for source in _models(folder):
        out = folder / f"{source.stem}_stschedule.json"
        assert main([str(source), "-t", "gemini", "--mesh", "2x2", "-o", str(out)]) == 0
        made[source.stem] = json.loads(out.read_text())
    return made


def test_every_staged_output_at_2x2_is_a_dram_store(planc, schedules, tmp_path):
    for name, doc in schedules.items():
        assert staged_without_store(doc) == [], name
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc))
        assert planc("check", "--strict", path).code == 0, name
    # The outputs other cores read are there, as on-chip ifmap copies.
    assert sum(on_chip_copies(doc) for doc in schedules.values()) > 0


def test_the_old_convention_is_an_error_at_the_entry(planc, schedules, tmp_path):
    doc = copy.deepcopy(schedules["attention"])
    sentinel = len(doc["-1"]["in"]) + len(doc["-1"]["out"])
    # An on-chip copy written the way planc used to: an ofmap with the sentinel order (a
    # copy listed by its producer alone, not a consumer's tensor that outlives it).
    for core, workloads in doc.items():
        if core == "-1" or not isinstance(workloads, list):
            continue
        listed = Counter(e["tensor_id"] for wl in workloads for e in wl["buffer"])
        for i, wl in enumerate(workloads):
            for j, entry in enumerate(wl["buffer"]):
                srcs = entry.get("source", [])
                if entry["type"] == "ifmap" and listed[entry["tensor_id"]] == 1 and srcs and all(
                        s["type"] == "core" and s["core_id"] == int(core)
                        and s["layer_name"] == wl["layer_name"] for s in srcs):
                    wl["buffer"][j] = {"address": entry["address"], "align": entry["align"],
                                       "bitwidth": entry["bitwidth"],
                                       "layer_name": wl["layer_name"], "lower": entry["lower"],
                                       "size": entry["size"], "start_send": True,
                                       "tensor_id": entry["tensor_id"],
                                       "tensor_order": sentinel, "type": "ofmap",
                                       "upper": entry["upper"]}
                    path = tmp_path / "old.json"
                    path.write_text(json.dumps(doc))
                    result = planc("check", path)
                    assert result.code == 1
                    assert f"$['{core}'][{i}].buffer[{j}].type: an ofmap L2 entry is the " \
                           "staging copy of a DRAM store" in result.err, result.err
                    return
    pytest.fail("no on-chip copy in the attention schedule")


def test_resnet34_b16_staged_outputs_follow_their_store(planc):
    """Gemini's ResNet-34 batch-16 IR lists the staging copy of Gemm_125's output of one
    workload again in the next, which stores another block: the copy keeps its own store's
    place in the DRAM queue (the excerpt's SOURCES.md says what was trimmed)."""
    doc = json.loads(B16.read_text())
    assert staged_without_store(doc) == []
    assert planc("check", "--strict", B16).code == 0


def test_a_staged_output_given_the_next_stores_order_is_an_error(planc, tmp_path):
    doc = json.loads(B16.read_text())
    # Workload 1 lists workload 0's copy (store 189, order 4) and its own (store 190, order 5).
    entry = doc["0"][1]["buffer"][2]
    assert (entry["tensor_id"], entry["tensor_order"]) == (191, 4)
    entry["tensor_order"] = 5
    path = tmp_path / "b16.json"
    path.write_text(json.dumps(doc))
    result = planc("check", path)
    assert result.code == 1 and "$['0'][1].buffer[2].tensor_order" in result.err, result.err
