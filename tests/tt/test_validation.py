"""Every rule of tt.plan.json is checked, with one message at the offending JSON path, exit
code 1 and no output file. Each case breaks one rule of an otherwise valid plan."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import write_json
from tests.tt.fixtures import kernelless_plan, matmul_plan

WP = "$.work_partition"


def item(doc: dict, core: str = "(0,0)", index: int = 0) -> dict:
    return doc["work_partition"][core][index]


def _set(path: list, value) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def _delete(*path) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        target = doc
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


def _move_tile(src: str, dst: str) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        doc["work_partition"].setdefault(dst, []).extend(doc["work_partition"].pop(src))
    return mutate


def _extra_core(key: str, tile: tuple[int, int], len_k: int = 2) -> Callable[[dict], None]:
    def mutate(doc: dict) -> None:
        doc["work_partition"][key] = [{"io": tile[0], "jo": tile[1], "len_k": len_k}]
    return mutate


def _split_ranges(ranges: list[dict]) -> Callable[[dict], None]:
    return _set(["core_ranges"], ranges)


CASES = [
    # -- structure ---------------------------------------------------------------------------
    ("missing layouts", _delete("layouts"), "$", "missing required key 'layouts'"),
    ("missing core_ranges", _delete("core_ranges"), "$", "missing required key 'core_ranges'"),
    ("missing work_partition", _delete("work_partition"), "$",
     "missing required key 'work_partition'"),
    ("grid of one number", _set(["core_grid"], [4]), "$.core_grid",
     "expected 2 integers, got 1"),
    ("grid of zero", _set(["core_grid"], [0, 2]), "$.core_grid",
     "core_grid [0, 2] must be at least [1, 1]"),
    ("schema_version 0", _set(["schema_version"], 0), "$.schema_version",
     "schema_version must be >= 1, got 0"),
    ("schema_version string", _set(["schema_version"], "1"), "$.schema_version",
     'expected an integer, got a string ("1")'),
    ("backend_version number", _set(["backend_version"], 3), "$.backend_version",
     "expected a string, got an integer (3)"),
    # -- core ranges -------------------------------------------------------------------------
    ("range without extent", _delete("core_ranges", 0, "extent"), "$.core_ranges[0]",
     "missing required key 'extent'"),
    ("negative start", _set(["core_ranges", 0, "start"], [-1, 0]), "$.core_ranges[0].start",
     "core range has a negative start [-1, 0]"),
    ("empty extent", _set(["core_ranges", 0, "extent"], [0, 2]), "$.core_ranges[0].extent",
     "core range extent [0, 2] must be at least [1, 1]"),
    ("range outside the grid", _set(["core_ranges", 0, "extent"], [3, 2]), "$.core_ranges[0]",
     "core range start [0, 0] extent [3, 2] exceeds grid bounds: it reaches core (2,1) of a "
     "2x2 grid"),
    ("overlapping ranges", _split_ranges([{"start": [0, 0], "extent": [2, 2]},
                                          {"start": [1, 1], "extent": [1, 1]}]),
     "$.core_ranges[1]",
     'core range 1 (start [1, 1] extent [1, 1]) overlaps core range 0 (start [0, 0] extent '
     '[2, 2]) at core (1,1); ranges may overlap only when both are "replicated": true'),
    ("one replicated range is not enough",
     _split_ranges([{"start": [0, 0], "extent": [2, 2], "replicated": True},
                    {"start": [1, 1], "extent": [1, 1]}]),
     "$.core_ranges[1]", "core range 1 (start [1, 1] extent [1, 1]) overlaps core range 0"),
    # -- work partition ----------------------------------------------------------------------
    ("key without parentheses", _move_tile("(0,0)", "0,0"), f"{WP}['0,0']",
     'core key "0,0" is not of the form "(x,y)" with integers x and y'),
    ("same core twice", _extra_core("(0, 1)", (0, 1)), f"{WP}['(0, 1)']",
     'core key "(0, 1)" names core (0,1) again (also key "(0,1)")'),
    ("core outside the grid", _move_tile("(1,1)", "(2,1)"), f"{WP}['(2,1)']",
     "core (2,1) is outside the 2x2 core grid"),
    ("core in no range", _split_ranges([{"start": [0, 0], "extent": [2, 1]}]),
     f"{WP}['(0,1)']", "core (0,1) is in the work partition but in no core range"),
    ("items not an array", _set(["work_partition", "(0,0)"], {"io": 0}), f"{WP}['(0,0)']",
     "expected an array, got an object"),
    ("item without jo", _delete("work_partition", "(0,0)", 0, "jo"), f"{WP}['(0,0)'][0]",
     "missing required key 'jo'"),
    ("negative io", _set(["work_partition", "(0,0)", 0, "io"], -1), f"{WP}['(0,0)'][0].io",
     "io must be >= 0, got -1"),
    ("negative len_k", _set(["work_partition", "(0,0)", 0, "len_k"], -2),
     f"{WP}['(0,0)'][0].len_k", "len_k must be >= 0, got -2"),
    ("tile order 'block' (TileLang-TT's block partition writes it)",
     _set(["work_partition", "(0,0)", 0, "tile_order"], "block"),
     f"{WP}['(0,0)'][0].tile_order",
     'tile_order must be one of row_major, column_major, match_shard, z_order, got "block"'),
    ("tile outside the output", _set(["work_partition", "(0,0)", 0, "io"], 5),
     f"{WP}['(0,0)'][0]", "tile (5,0) is outside the 2x2 output tiles of Matmul 'matmul'"),
    ("tile assigned twice", _set(["work_partition", "(1,1)", 0, "io"], 0),
     f"{WP}['(1,1)'][0]", "tile (0,1) is assigned twice: to core (0,1) and to core (1,1); a "
     "tile is computed once unless both cores are in replicated core ranges"),
    ("tile listed twice by a core",
     lambda d: d["work_partition"]["(0,0)"].append(dict(item(d))), f"{WP}['(0,0)'][1]",
     "tile (0,0) is listed twice by core (0,0)"),
    ("tile assigned to no core", _delete("work_partition", "(1,1)"), WP,
     "tile (1,1) is assigned to no core (1 of the 2x2 output tiles of Matmul 'matmul' are "
     "unassigned)"),
    ("TileLang-TT's idle-core placeholder in place of a core's work",
     _extra_core("(1,1)", (0, 0), len_k=0), WP,
     "tile (1,1) is assigned to no core (1 of the 2x2 output tiles of Matmul 'matmul' are "
     "unassigned)"),
    ("len_k is not K in tiles", _set(["work_partition", "(0,0)", 0, "len_k"], 64),
     f"{WP}['(0,0)'][0].len_k", "len_k is 64, but Matmul 'matmul' reduces over 2 K tiles"),
    # -- layouts -----------------------------------------------------------------------------
    ("shard DDR", _set(["layouts", "A", "shard"], "DDR"), "$.layouts.A.shard",
     'shard must be "DRAM" or "L1", got "DDR"'),
    ("layout without shard", _delete("layouts", "B", "shard"), "$.layouts.B",
     "missing required key 'shard'"),
    ("interleave not a boolean", _set(["layouts", "A", "interleave"], 1),
     "$.layouts.A.interleave", "expected a boolean, got an integer (1)"),
    ("zero stride", _set(["layouts", "A", "stride"], [0, 32]), "$.layouts.A.stride",
     "stride [0, 32] must be positive"),
    ("stride of three", _set(["layouts", "A", "stride"], [1, 2, 3]), "$.layouts.A.stride",
     "expected 2 integers, got 3"),
    ("tile_id_order unknown", _set(["layouts", "C", "tile_id_order"], "snake"),
     "$.layouts.C.tile_id_order",
     'tile_id_order must be one of row_major, column_major, match_shard, z_order, got "snake"'),
    ("layout of no buffer", _set(["layouts", "D"], {"shard": "DRAM"}), "$.layouts.D",
     'layout "D" names no buffer of Matmul \'matmul\' (its buffers: A, B, C)'),
    # -- kernel ------------------------------------------------------------------------------
    ("grid_tiles wrong", _set(["kernel", "grid_tiles"], [3, 2]), "$.kernel.grid_tiles",
     "grid_tiles is [3, 2], but the output [64, 64] of Matmul 'matmul' has 2x2 tiles of 32x32"),
    ("kernel len_k wrong", _set(["kernel", "len_k"], 4), "$.kernel.len_k",
     "len_k is 4, but Matmul 'matmul' reduces over 2 K tiles"),
    ("kernel operator shapes wrong",
     _set(["kernel", "operator", "ReadTensors", 1, "Shape"], [32, 64]), "$.kernel.operator",
     "Matmul 'matmul': inner dimensions differ"),
]


@pytest.mark.parametrize(("mutate", "path", "message"),
                         [pytest.param(m, p, msg, id=name) for name, m, p, msg in CASES])
def test_rule_violation_is_one_error_at_its_path(planc, tmp_path, mutate, path, message):
    doc = matmul_plan()
    mutate(doc)
    source = write_json(tmp_path / "bad.plan.json", doc)
    out = tmp_path / "out.plan.json"
    result = planc(source, "--target", "tt", "-o", out)
    assert result.code == 1
    assert result.err.startswith(f"planc: error: {source}: {path}: {message}"), result.err
    assert result.err.count("\n") == 1
    assert not out.exists()
    assert planc("check", source).code == 1


def test_replicated_ranges_may_overlap_and_share_tiles(planc, tmp_path):
    doc = matmul_plan()
    doc["core_ranges"] = [{"start": [0, 0], "extent": [2, 2], "replicated": True},
                          {"start": [1, 1], "extent": [1, 1], "replicated": True}]
    doc["work_partition"]["(1,1)"].append({"io": 0, "jo": 0, "len_k": 2})
    source = write_json(tmp_path / "replicated.plan.json", doc)
    assert planc("check", source).code == 0
    # The tile shared by a replicated core must not be shared with a core outside.
    doc["core_ranges"][1] = {"start": [1, 0], "extent": [1, 1], "replicated": True}
    doc["core_ranges"][0] = {"start": [0, 0], "extent": [1, 2]}
    doc["core_ranges"].append({"start": [1, 1], "extent": [1, 1]})
    result = planc("check", write_json(tmp_path / "half.plan.json", doc))
    assert result.code == 1 and "tile (0,0) is assigned twice" in result.err


def test_kernelless_plan_rules_use_the_tiles_it_spans(planc, tmp_path):
    doc = kernelless_plan()
    assert planc("check", write_json(tmp_path / "ok.json", doc)).code == 0
    doc["work_partition"]["(1,0)"][0]["len_k"] = 3
    result = planc("check", write_json(tmp_path / "len_k.json", doc))
    assert result.code == 1
    assert (f"{WP}['(1,0)'][0].len_k: len_k is 3, but other work items have len_k 2; a plan's "
            "kernel has one K extent") in result.err
    doc = kernelless_plan()
    del doc["work_partition"]["(0,1)"]
    result = planc("check", write_json(tmp_path / "hole.json", doc))
    assert result.code == 1
    assert (f"{WP}: tile (0,1) is assigned to no core (1 of the 2x2 tiles the partition spans "
            "are unassigned)") in result.err


def test_layout_names_are_free_without_a_kernel(planc, tmp_path):
    doc = kernelless_plan()
    doc["layouts"]["weights"] = {"shard": "DRAM"}
    assert planc("check", write_json(tmp_path / "named.json", doc)).code == 0


def test_errors_in_a_list_of_plans_name_the_plan(planc, tmp_path):
    good, bad = matmul_plan(), matmul_plan()
    bad["layouts"]["A"]["shard"] = "SRAM"
    source = write_json(tmp_path / "list.json", [good, bad])
    result = planc("check", source)
    assert result.code == 1
    assert result.err == (f'planc: error: {source}: $[1].layouts.A.shard: shard must be "DRAM" '
                          'or "L1", got "SRAM" [tt.layout]\n')
    empty = write_json(tmp_path / "empty.json", [])
    assert "cannot tell the format" in planc("check", empty).err


def test_failed_output_keeps_the_existing_file(planc, tmp_path):
    doc = matmul_plan()
    doc["core_grid"] = [1, 1]
    out = tmp_path / "keep.json"
    out.write_text("precious")
    result = planc(write_json(tmp_path / "bad.json", doc), "-t", "tt", "-o", out)
    assert result.code == 1 and out.read_text() == "precious"


def test_unknown_members_and_explicit_nulls_survive(planc, tmp_path):
    doc = matmul_plan()
    doc["vendor"] = {"note": [1, None]}
    doc["core_ranges"][0]["label"] = "all"
    item(doc)["len_k"] = None
    item(doc)["priority"] = 3
    doc["layouts"]["A"] = {"tile_id_order": "row_major", "shard": "DRAM", "banks": 12}
    doc["kernel"]["origin"] = "hand-written"
    out = tmp_path / "out.json"
    assert planc(write_json(tmp_path / "in.json", doc), "-t", "tt", "-o", out).code == 0
    assert json.loads(out.read_text()) == doc
    assert list(json.loads(out.read_text())["layouts"]["A"]) == ["tile_id_order", "shard", "banks"]


def test_models_with_operators_tt_cannot_run_are_refused_at_their_node(planc, tmp_path):
    from tests.conftest import EXAMPLES
    out = tmp_path / "plan.json"
    result = planc(EXAMPLES / "sendrecv_rank0.json", "-t", "tt", "-o", out)
    assert result.code == 1 and not out.exists()
    assert result.err == (f"planc: error: {EXAMPLES / 'sendrecv_rank0.json'}: $.Nodes[1].Op: "
                          "Send 'send': communication operators have no Tenstorrent plan (plans "
                          "run on one device)\n")


def test_idle_core_placeholders_are_a_warning(planc, tmp_path):
    """TileLang-TT's partitioners give a core with no tiles {io: 0, jo: 0, len_k: 0}: real
    producer output, not a second assignment of tile (0,0)."""
    doc = matmul_plan()
    doc["core_grid"] = [3, 2]
    doc["core_ranges"] = [{"start": [0, 0], "extent": [3, 2]}]
    doc["work_partition"]["(2,0)"] = [{"io": 0, "jo": 0, "len_k": 0, "tile_order": "row_major"}]
    source = write_json(tmp_path / "idle.json", doc)
    result = planc("check", source)
    assert result.code == 0, result.err
    assert "[tt.idle-placeholder]" in result.err and "1 warning" in result.out
    assert planc("check", "--strict", source).code == 1
    # A placeholder beside real work is no placeholder: tile (0,0) assigned twice.
    doc["work_partition"]["(2,0)"].append({"io": 1, "jo": 1, "len_k": 2,
                                           "tile_order": "row_major"})
    assert planc("check", write_json(tmp_path / "busy.json", doc)).code == 1


def test_huge_tile_indices_are_decided_without_walking_them(planc, tmp_path):
    """A plan without a kernel member spans the tiles its items name: an index of 2^41 makes
    that grid 2^41 tiles, which are counted, not visited."""
    doc = matmul_plan()
    del doc["kernel"]
    doc["work_partition"]["(0,0)"][0]["io"] = 3298534883335
    result = planc("check", write_json(tmp_path / "huge.json", doc))
    assert result.code == 1
    assert "are unassigned" in result.err and "[tt.coverage]" in result.err
