"""`planc check` on Gemini scheduler IRs: generated families of realistic mistakes about what
the workloads compute, each rejected with its rule at the entry where it is, beside look-alike
legal edits that pass (issue 25).

Schedules: Gemini's ResNet-34 layers at batch 4 (batch groups of two samples) and a GPT-2
block on a 2x2 mesh, both made by planc. What each mistake breaks is said from the boxes in
the JSON (which samples and rows each workload computes and reads)."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest

from backends.ark_model import emit_model
from tests.gemini.test_ark_models import gpt2_block

HERE = Path(__file__).parent
CORPUS = Path(os.environ.get("PLANC_CORPUS", HERE.parents[2] / "shared" / "corpus"))
RESNET34 = CORPUS / "gemini" / "int8_resnet34.sim_quantized_b1.json"


@pytest.fixture(scope="module")
def schedules(tmp_path_factory):
    from compiler.driver import main

    folder = tmp_path_factory.mktemp("gemini-family")
    made = {}
    model = folder / "gpt2.json"
    model.write_text(emit_model(gpt2_block()))
    runs = [("gpt2", model, ["--mesh", "2x2"])]
    if RESNET34.exists():
        runs.append(("resnet34", RESNET34, ["--batch", "4", "--buffer-size", "2097152"]))
    for name, source, flags in runs:
        out = folder / f"{name}_stschedule.json"
        assert main([str(source), "-t", "gemini", *flags, "-o", str(out)]) == 0
        made[name] = json.loads(out.read_text())
    return made


def _rules(planc, tmp_path, doc) -> tuple[int, set[tuple[str, str]]]:
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    report = planc("check", "--strict", "--json", path).json()
    return (0 if report["ok"] else 1), {(f["rule"], f["path"]) for f in report["findings"]}


def _workloads(doc):
    for core, workloads in doc.items():
        if core != "-1" and isinstance(workloads, list):
            for i, wl in enumerate(workloads):
                yield core, i, wl


def test_the_schedules_pass(planc, schedules, tmp_path):
    for doc in schedules.values():
        assert _rules(planc, tmp_path, doc) == (0, set())


# Each family's mistakes are made together in one copy of a schedule, and one `planc check`
# must report every one at its own place: each mistake is in a workload of its own (the
# coverage family: one per layer), and what each breaks is said from that workload's boxes
# alone, so the mistakes do not hide one another. One check per schedule instead of one per
# mistake (21 and 30 checks of 0.4-0.8 CPU s took 28 CPU s, the whole families in CI).
def test_a_batch_group_shifted_by_one_sample_is_a_coverage_error(planc, schedules, tmp_path):
    """A workload of the second batch group computes samples 1-2 instead of 2-3 (its box, its
    tiles and the blocks it stores to DRAM shifted alike, as a scheduler off by one would
    write them): sample 1 is computed twice and sample 3 never."""
    doc = schedules.get("resnet34")
    if doc is None:
        pytest.skip("needs Gemini's ResNet-34 layers from the corpus (PLANC_CORPUS)")
    bad = copy.deepcopy(doc)
    expected = {}
    for core, i, wl in _workloads(doc):
        (n0, *_), (n1, *_) = wl["workload"]
        if (n0, n1) != (2, 3) or wl["layer_name"] in expected.values():
            continue
        shifted = bad[core][i]
        shifted["workload"][0][0] -= 1
        shifted["workload"][1][0] -= 1
        for tile in shifted.get("tile_info", {}).values():
            for key in ("ofmap_lower", "ofmap_upper"):
                tile[key][0] -= 1
        for store in bad["-1"]["in"]:
            if (store["core_id"], store["workload_id"]) == (int(core), wl["workload_id"]):
                store["lower"][0] -= 1
                store["upper"][0] -= 1
        expected[("gemini.layer-coverage", f"$['{core}'][{i}].workload")] = wl["layer_name"]
    assert len(expected) >= 20
    code, found = _rules(planc, tmp_path, bad)
    missed = sorted(layer for finding, layer in expected.items() if finding not in found)
    assert code == 1 and not missed, (missed, found)


def test_an_input_box_one_row_short_is_a_tile_input_error(planc, schedules, tmp_path):
    """A convolution's (or any layer's) ifmap holds one row fewer than its tiles read: the
    last row comes from whatever L2 held there."""
    mistakes = 0
    for doc in schedules.values():
        bad = copy.deepcopy(doc)
        expected = {}
        for core, i, wl in _workloads(doc):
            tiles = wl.get("tile_info", {})
            if not wl.get("ifmap") or not tiles or mistakes + len(expected) >= 30:
                continue
            extents = [ifm["upper"][2] - ifm["lower"][2] + 1 for ifm in wl["ifmap"]]
            rows = max(t["ifmap_upper"][2] - t["ifmap_lower"][2] + 1 for t in tiles.values())
            if len(wl["ifmap"]) != 1 or extents[0] != rows or rows < 2:
                continue
            bad[core][i]["ifmap"][0]["upper"][2] -= 1
            first = next(name for name, t in tiles.items()
                         if t["ifmap_upper"][2] - t["ifmap_lower"][2] + 1 == rows)
            expected[("gemini.tile-input", f"$['{core}'][{i}].tile_info.{first}."
                      "ifmap_upper")] = wl["layer_name"]
        if not expected:
            continue
        code, found = _rules(planc, tmp_path, bad)
        missed = sorted(layer for finding, layer in expected.items() if finding not in found)
        assert code == 1 and not missed, (missed, found)
        mistakes += len(expected)
    assert mistakes >= 20


def test_look_alikes_pass(planc, schedules, tmp_path):
    for doc in schedules.values():
        # Every layer renamed, everywhere it is named.
        renamed = json.loads(json.dumps(doc).replace('"layer_name": "',
                                                       '"layer_name": "renamed_'))
        assert _rules(planc, tmp_path, renamed) == (0, set())
        # Tensor ids renumbered (shifted by 1000 on every snapshot).
        renumbered = copy.deepcopy(doc)
        for _, _, wl in _workloads(renumbered):
            for entry in wl.get("buffer", []):
                entry["tensor_id"] += 1000
        assert _rules(planc, tmp_path, renumbered) == (0, set())
        # Each workload's members in reverse order (JSON objects are unordered).
        reordered = copy.deepcopy(doc)
        for core, i, wl in _workloads(reordered):
            reordered[core][i] = dict(reversed(list(wl.items())))
        assert _rules(planc, tmp_path, reordered) == (0, set())
