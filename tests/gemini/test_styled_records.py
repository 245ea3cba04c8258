"""`backends.gemini.emit` writes records straight from their attributes (`StyledRecord`,
texts kept per attribute); its output must equal the dict path it replaces,
`styled_json(schedule_json(...))`, on planc's schedules, Gemini's own IRs and mutated IRs
(extra members, empty and long lists, nulls, floats, one attribute at several indentations)."""

from __future__ import annotations

import argparse
import copy
import json
import random

import pytest

from backends.gemini import emit, find_schedule, schedule_json, schedule_pipeline
from backends.jsoncpp import styled_json
from compiler.pipeline import run_pipeline
from frontends.gemini_ir import import_document as import_ir
from frontends.gemini_layers import import_document as import_layers
from ground.json_reader import load_json_file, parse_json
from tests.conftest import corpus_params
from tests.gemini.fixtures import small_schedule
from tests.gemini.test_l2_quality import generated_network


def _slow(module) -> str:
    return styled_json(schedule_json(find_schedule(module)))


def _same(module) -> None:
    fast, slow = emit(module), _slow(module)
    if fast != slow:    # the first differing line (pytest's diff of megabytes takes minutes)
        line = next(i for i, (a, b) in enumerate(zip(fast.splitlines(), slow.splitlines(),
                                                     strict=False)) if a != b)
        pytest.fail(f"line {line + 1}: {fast.splitlines()[line]!r} != "
                    f"{slow.splitlines()[line]!r}")
    assert emit(module) == fast     # nothing of the first call is reused wrongly


@pytest.mark.parametrize("path", corpus_params("gemini", "*_stschedule.json"))
def test_gemini_irs(path):
    _same(import_ir(load_json_file(path)))


@pytest.mark.parametrize("path", corpus_params("gemini", "*_b1.json"))
@pytest.mark.parametrize("mesh", ["1x1", "2x2"])
def test_planc_schedules(path, mesh):
    module = import_layers(load_json_file(path))
    run_pipeline(module, schedule_pipeline(argparse.Namespace(mesh=mesh)))
    _same(module)


@pytest.mark.parametrize("seed", range(6))
def test_generated_schedules(seed):
    rng = random.Random(seed)
    module = import_layers(parse_json(json.dumps(generated_network(rng))))
    run_pipeline(module, schedule_pipeline(argparse.Namespace(
        mesh=rng.choice(["1x1", "2x1", "2x2"]), batch=rng.choice([None, 2]))))
    _same(module)


def _records(doc: dict):
    """Every JSON object of a schedule document below its top level."""
    pending = [v for v in doc.values() if isinstance(v, dict | list)]
    while pending:
        value = pending.pop()
        items = value.values() if isinstance(value, dict) else value
        if isinstance(value, dict):
            yield value
        pending.extend(v for v in items if isinstance(v, dict | list))


def _mutate(doc: dict, rng: random.Random) -> dict:
    doc = copy.deepcopy(doc)
    for record in _records(doc):
        for key in list(record):
            value = record[key]
            roll = rng.random()
            if "lower" in key or "upper" in key:
                continue                                # boxes are checked on import
            if roll < 0.08:
                record[f"zz_{key}"] = value            # an unknown member: extra
            elif roll < 0.14 and isinstance(value, list):
                record[key] = []
            elif roll < 0.2 and isinstance(value, list) and value and \
                    all(type(v) is int for v in value):
                record[key] = value * rng.choice([7, 30])   # past the one-line limits
            elif roll < 0.24 and key in ("time", "single_tile_time_pred"):
                record[key] = rng.choice([1.5, 40, 1e20, 0.1])
            elif roll < 0.28 and key == "tensor_order":
                record[key] = None
            elif roll < 0.32 and key == "layer_name":
                record[key] = rng.choice(["conv", "quant", "naïve \"x\""])
    return doc


@pytest.mark.parametrize("seed", range(12))
def test_mutated_irs(seed):
    rng = random.Random(seed)
    doc = _mutate(small_schedule(), rng)
    try:
        module = import_ir(parse_json(json.dumps(doc)))
    except Exception:   # noqa: BLE001 - a mutation the importer refuses proves nothing here
        pytest.skip("mutated IR not importable")
    _same(module)


def test_extra_members_and_shared_lists():
    doc = small_schedule()
    conv = doc["0"][1]
    conv["ofmap"][0]["destination"] = [{"core_id": -1, "type": "DRAM", "zz": {}}]
    doc["0"][0]["buffer"][1]["source"] = doc["0"][1]["buffer"][0]["source"]
    _same(import_ir(parse_json(json.dumps(doc))))


def test_one_attribute_at_several_indentations():
    """A list too long for one line, the same attribute in a DRAM load and in a workload's
    ifmap (written at other indentations)."""
    doc = small_schedule()
    ids = list(range(40))
    doc["-1"]["out"][1]["related_ifmap"] = ids
    doc["0"][0]["ifmap"][0]["transfer_id"] = ids
    doc["0"][0]["tile_padding_tblr"] = ids
    _same(import_ir(parse_json(json.dumps(doc))))


def test_attribute_members_follow_key_order():
    """Fields declared out of key order are written in key order (planc's own destination
    and source classes declare theirs sorted, so the corpus runs never reorder)."""
    from backends.gemini import _attr_shape
    from backends.jsoncpp import object_heads

    heads, order = _attr_shape("   ", ["type", "core_id", "size"])
    assert order == [1, 2, 0] and heads == object_heads("   ", ("core_id", "size", "type"))
    assert _attr_shape("   ", ["a", "b"])[1] is None
