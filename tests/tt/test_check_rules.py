"""`planc check` on Tenstorrent plans: L1 capacity and kernel order, each on a generated family
of realistic mistakes beside look-alike legal edits."""

from __future__ import annotations

import copy
import json

import pytest

from backends.ark_model import emit_model
from frontends.model_builder import ModelBuilder

TINY = {"name": "tiny_tt", "kind": "tenstorrent", "compute_grid": [2, 2],
        "l1_bytes": 131072, "l1_reserved_bytes": 0, "dram_bytes": 1 << 30, "dram_banks": 2,
        "dram_bandwidth_bytes_per_s": 1e11, "clock_hz": 1e9, "noc_bytes_per_cycle": 32,
        "matmul_tile_cycles": 64, "eltwise_tile_cycles": 32, "sfpu_tile_cycles": 256,
        "kernel_launch_s": 5e-6}
"""A Tensix chip with 2x2 cores of 128 KiB L1 (a user's own device file): buffers of a few
hundred tiles already do not all fit, so the capacity family stays small."""
SIZES = [(256, 512), (512, 512), (256, 768), (128, 1024)]


def _chain(n: int, k: int) -> ModelBuilder:
    m = ModelBuilder()
    x, w1, w2 = m.tensor([n, k]), m.tensor([k, k]), m.tensor([k, k])
    h = m.matmul(x, w1)
    m.matmul(m.relu(h), w2)
    return m


@pytest.fixture(scope="module")
def tiny_device(tmp_path_factory):
    folder = tmp_path_factory.mktemp("devices")
    (folder / "tiny_tt.json").write_text(json.dumps(TINY))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLANC_DEVICE_PATH", str(folder))
        yield "tiny_tt"


@pytest.fixture(scope="module")
def plans(tmp_path_factory, tiny_device):
    """planc's own TT plans of a few chains for the tiny chip (tt-place decided L1 and DRAM)."""
    return planned_tt(tmp_path_factory.mktemp("tt-plans"), "chain", _chain, SIZES, tiny_device)


def planned_tt(folder, name: str, build, sizes, arch: str) -> list[dict]:
    """planc's TT plans (`--arch arch`) of `build(n, k)` for each size, as JSON documents."""
    from compiler.driver import main

    made = []
    for n, k in sizes:
        model = folder / f"{name}_{n}_{k}.json"
        model.write_text(emit_model(build(n, k).finish()))
        plan = folder / f"{name}_{n}_{k}.tt.json"
        assert main([str(model), "-t", "tt", "--arch", arch, "-o", str(plan)]) == 0
        made.append(json.loads(plan.read_text()))
    return made


def _write(tmp_path, doc, name="p.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _rules(planc, path) -> tuple[int, list[str]]:
    result = planc("check", "--strict", "--json", "--arch", "tiny_tt", path)
    report = result.json()
    return result.code, [(f["rule"], f["path"]) for f in report["findings"]]


def test_plancs_own_plans_fit(planc, plans, tmp_path):
    for doc in plans:
        code, findings = _rules(planc, _write(tmp_path, doc))
        assert code == 0 and findings == []


def _dram_operands(doc):
    return [(i, name) for i, plan in enumerate(doc) for name, layout in
            plan.get("layouts", {}).items() if layout["shard"] == "DRAM"]


def test_operands_moved_to_l1_beyond_capacity_are_errors_at_their_plan(planc, plans, tmp_path):
    mistakes = 0
    for doc in plans:
        dram = _dram_operands(doc)
        assert dram, "the family needs plans with buffers tt-place left in DRAM"
        # Every DRAM operand put in L1, one mistake per document and one per operand: a
        # buffer too large for the cores' L1 at some kernel of its live range.
        for choice in [dram, *([d] for d in dram)]:
            bad = copy.deepcopy(doc)
            for i, name in choice:
                bad[i]["layouts"][name]["shard"] = "L1"
            code, findings = _rules(planc, _write(tmp_path, bad))
            if len(choice) == 1 and code == 0:
                continue      # one buffer alone may still fit: not every edit is a mistake
            assert code == 1 and findings, choice
            assert {rule for rule, _ in findings} == {"tt.l1-capacity"}
            assert all(path.startswith("$[") for _, path in findings)
            mistakes += 1
    assert mistakes >= 6


def test_legal_look_alikes_pass(planc, plans, tmp_path):
    for doc in plans:
        assert _rules(planc, _write(tmp_path, doc)) == (0, [])
        # Every operand moved to DRAM: slower, still legal.
        edited = copy.deepcopy(doc)
        for plan in edited:
            for layout in plan.get("layouts", {}).values():
                layout["shard"] = "DRAM"
        assert _rules(planc, _write(tmp_path, edited)) == (0, [])


def test_a_reader_moved_before_its_producer_is_an_error(planc, plans, tmp_path):
    cases = 0
    for doc in plans:
        for i in range(1, len(doc)):
            swapped = copy.deepcopy(doc)
            swapped[i - 1], swapped[i] = swapped[i], swapped[i - 1]
            code, findings = _rules(planc, _write(tmp_path, swapped))
            assert code == 1 and ("tt.kernel-order", f"$[{i - 1}]") in findings, findings
            cases += 1
    assert cases >= 6


def test_a_users_device_file_is_read_field_by_field(planc, tmp_path, monkeypatch):
    # A file without a description is fine; a count written as a string is an error at its
    # path in that file (both were internal errors: TTDevice(**fields)).
    from devices import tt as tt_devices

    folder = tmp_path / "devices"
    folder.mkdir()
    monkeypatch.setenv("PLANC_DEVICE_PATH", str(folder))
    tt_devices._load.cache_clear()
    mine = {k: v for k, v in TINY.items() if k != "description"}
    (folder / "mine.json").write_text(json.dumps({**mine, "name": "mine"}))
    assert tt_devices.device_named("mine").l1_bytes == TINY["l1_bytes"]
    (folder / "bad.json").write_text(json.dumps({**TINY, "name": "bad", "l1_bytes": "1M"}))
    plan = tmp_path / "p.tt.json"
    model = tmp_path / "m.json"
    model.write_text(emit_model(_chain(64, 64).finish()))
    result = planc(model, "-t", "tt", "--arch", "bad", "-o", plan)
    assert result.code == 1 and "bad.json: $.l1_bytes: expected" in result.err, result.err
    assert not plan.exists()
    tt_devices._load.cache_clear()
