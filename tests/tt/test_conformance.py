"""The upstream TileLang-TT plans: lossless round trip, validation, and planc's partitioner
reproducing them from the matmuls they were made for."""

from __future__ import annotations

import json

import pytest

from backends.tt_plan import document_json, emit_plans
from dialects.locations import verify_module
from frontends.tt_plan import import_document
from ground.json_reader import load_json_file
from tests.conftest import corpus_params
from tests.tt.fixtures import lower, matmul_model

PLANS = [p for p in corpus_params("tt") if p.values[0] is None or "plan" in p.values[0].name]


@pytest.mark.parametrize("path", PLANS)
def test_plan_round_trip_is_lossless(path):
    module = import_document(load_json_file(path))
    verify_module(module)
    text = emit_plans(module)
    assert json.loads(text) == json.loads(path.read_text())
    # Stronger than required: the same bytes as TileLang-TT's json.dump(indent=2).
    assert text == path.read_text()


@pytest.mark.parametrize("path", PLANS)
def test_plan_checks_and_simulates_as_the_gemm_it_describes(planc, path):
    result = planc("check", path, "--json")
    assert result.code == 0 and result.json()["format"] == "tt"
    report = planc("simulate", path, "--json")
    assert report.code == 0
    data = report.json()
    assert data["ok"] and data["max_abs_error"] < 1e-3
    assert data["tiles"] == sum(len(items) for items in
                                json.loads(path.read_text())["work_partition"].values())


@pytest.mark.parametrize("path", PLANS)
def test_row_major_partitioner_reproduces_the_plan(path):
    """The plans came from TileLang-TT's row_major partitioner with len_k 4: a matmul with K =
    128 over the tiles the plan spans, on its grid, gives the same work partition."""
    upstream = json.loads(path.read_text())
    tiles = [(w["io"], w["jo"]) for items in upstream["work_partition"].values() for w in items]
    m = 32 * (1 + max(t[0] for t in tiles))
    n = 32 * (1 + max(t[1] for t in tiles))
    gx, gy = upstream["core_grid"]
    module = lower(matmul_model(m, 128, n),
                   f"tt-tile,tt-partition{{grid={gx}x{gy} strategy=row_major}},tt-place")
    ours = document_json(module)
    assert ours["work_partition"] == upstream["work_partition"]
    assert ours["core_ranges"] == upstream["core_ranges"]
    assert ours["core_grid"] == upstream["core_grid"]


@pytest.mark.parametrize("path", [p for p in corpus_params("tt", "*.schema.json")])
def test_planc_plans_satisfy_the_upstream_schema(path):
    """The JSON Schema of TileLang-TT's HEAD: required keys and member types, checked by hand
    (no jsonschema dependency) for the structure it states."""
    schema = json.loads(path.read_text())
    plans = document_json(lower(matmul_model(96, 64, 160),
                                "tt-tile,tt-partition{grid=2x3},tt-place"))
    plans = plans if isinstance(plans, list) else [plans]
    for plan in plans:
        assert set(schema["required"]) <= set(plan)
        assert isinstance(plan["schema_version"], int) and plan["schema_version"] >= 1
        assert len(plan["core_grid"]) == 2 and all(isinstance(v, int) for v in plan["core_grid"])
        for core_range in plan["core_ranges"]:
            assert {"start", "extent"} <= set(core_range)
        for items in plan["work_partition"].values():
            for item in items:
                assert isinstance(item["io"], int) and isinstance(item["jo"], int)
                assert item.get("len_k") is None or isinstance(item["len_k"], int)
                assert item.get("tile_order") is None or isinstance(item["tile_order"], str)
        assert all(isinstance(v, dict) for v in plan["layouts"].values())
