"""`planc check` on Tenstorrent plans: a generated family of realistic value-flow and capacity
mistakes, each rejected with its rule at the kernel where it is, beside look-alike legal edits
(renamed, renumbered, independent kernels re-ordered) that pass (issue 25).

The expected verdicts come from the model the plans were made from (which kernel produces
which tensor), not from the rules' own code."""

from __future__ import annotations

import copy
import json

import pytest

from frontends.model_builder import ModelBuilder
from tests.tt.test_check_rules import TINY, planned_tt

SMALL_DRAM = {**TINY, "name": "tiny_dram_tt", "dram_bytes": 1 << 16}
"""The same chip with 64 KiB of DRAM over its two banks (32 KiB a bank)."""


def _diamond(n: int, k: int) -> ModelBuilder:
    """a = x@w1; b = relu(a); c = x@w2; d = b + c; e = relu(d); f = e + a: `a` is read twice,
    `c` does not depend on `a` or `b`."""
    m = ModelBuilder()
    x, w1, w2 = m.tensor([n, k]), m.tensor([k, k]), m.tensor([k, k])
    a = m.matmul(x, w1)
    b = m.relu(a)
    c = m.matmul(x, w2)
    d = m.add(b, c)
    m.add(m.relu(d), a)
    return m


SIZES = [(64, 64), (64, 128), (128, 64)]


@pytest.fixture(scope="module")
def devices(tmp_path_factory):
    folder = tmp_path_factory.mktemp("devices")
    for device in (TINY, SMALL_DRAM):
        (folder / f"{device['name']}.json").write_text(json.dumps(device))
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PLANC_DEVICE_PATH", str(folder))
        yield


@pytest.fixture(scope="module")
def plans(tmp_path_factory, devices):
    return planned_tt(tmp_path_factory.mktemp("tt-diamonds"), "diamond", _diamond, SIZES,
                      "tiny_tt")


def _rules(planc, tmp_path, doc, arch="tiny_tt") -> tuple[int, set[tuple[str, str]]]:
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    report = planc("check", "--strict", "--json", "--arch", arch, path).json()
    return (0 if report["ok"] else 1), {(f["rule"], f["path"]) for f in report["findings"]}


def _op(plan: dict) -> dict:
    return plan["kernel"]["operator"]


def _produced(doc: list[dict]) -> dict[int, int]:
    """result tensor id -> index of the plan whose kernel produces it (from the JSON)."""
    return {t["Id"]: i for i, plan in enumerate(doc) for t in _op(plan)["ResultTensors"]}


def _inputs(doc: list[dict], i: int) -> list[int]:
    """Indices of the plans whose results plan `i` reads."""
    produced = _produced(doc)
    return sorted({produced[t["Id"]] for t in _op(doc[i])["ReadTensors"] if t["Id"] in produced})


def test_the_plans_pass(planc, plans, tmp_path):
    for doc in plans:
        assert len(doc) == 6
        assert _rules(planc, tmp_path, doc) == (0, set())


def test_a_reader_moved_before_its_producer_is_a_kernel_order_error(planc, plans, tmp_path):
    mistakes = 0
    for doc in plans:
        for j in range(len(doc)):
            for i in range(j):
                if not any(i <= p < j for p in _inputs(doc, j)):
                    continue            # moving j to i keeps it after its producers
                moved = copy.deepcopy(doc)
                moved.insert(i, moved.pop(j))
                code, found = _rules(planc, tmp_path, moved)
                assert code == 1 and ("tt.kernel-order", f"$[{i}]") in found, (i, j, found)
                mistakes += 1
    assert mistakes >= 20


def test_a_result_written_over_a_live_tensor_is_a_clobbered_input(planc, plans, tmp_path):
    """The mistake of a memory plan: kernel k writes its result into the buffer of a tensor
    produced before k and read after it (`a`, read by the last add)."""
    mistakes = 0
    for doc in plans:
        produced = _produced(doc)
        for k in range(len(doc)):
            for reader in range(k + 1, len(doc)):
                for read in _op(doc[reader])["ReadTensors"]:
                    source = produced.get(read["Id"])
                    if source is None or not source < k:
                        continue
                    bad = copy.deepcopy(doc)
                    target = read["Buffer"]["Id"]
                    out = _op(bad[k])
                    for t in out["WriteTensors"] + out["ResultTensors"]:
                        t["Buffer"]["Id"] = target
                    # Readers of k's result follow it into the new buffer, as a plan that
                    # put the result there would say.
                    for later in bad[k + 1:]:
                        for t in _op(later)["ReadTensors"]:
                            if produced.get(t["Id"]) == k:
                                t["Buffer"]["Id"] = target
                    code, found = _rules(planc, tmp_path, bad)
                    assert code == 1 and ("tt.clobbered-input", f"$[{reader}]") in found, \
                        (k, reader, found)
                    mistakes += 1
    assert mistakes >= 6


def test_look_alikes_pass(planc, plans, tmp_path):
    for doc in plans:
        # Renamed kernels.
        renamed = copy.deepcopy(doc)
        for plan in renamed:
            _op(plan)["Name"] = "renamed_" + _op(plan)["Name"]
        assert _rules(planc, tmp_path, renamed) == (0, set())
        # Buffers renumbered (a permutation applied everywhere).
        ids = sorted({t["Buffer"]["Id"] for plan in doc for key in
                      ("ReadTensors", "WriteTensors", "ResultTensors") for t in _op(plan)[key]})
        mapping = dict(zip(ids, reversed(ids), strict=True))
        renumbered = copy.deepcopy(doc)
        for plan in renumbered:
            for key in ("ReadTensors", "WriteTensors", "ResultTensors"):
                for t in _op(plan)[key]:
                    t["Buffer"]["Id"] = mapping[t["Buffer"]["Id"]]
        assert _rules(planc, tmp_path, renumbered) == (0, set())
        # Every kernel moved as early as its producers allow (the independent matmul first).
        for j in range(1, len(doc)):
            earliest = max(_inputs(doc, j), default=-1) + 1
            if earliest < j:
                moved = copy.deepcopy(doc)
                moved.insert(earliest, moved.pop(j))
                assert _rules(planc, tmp_path, moved) == (0, set()), j


def _dram_need_per_bank(doc: list[dict], banks: int) -> list[int]:
    """Bytes each DRAM bank holds at each kernel, counted from the JSON: a buffer's FP16 32x32 tiles (2 KiB each) go round-robin over the banks, and it is
    live from the first to the last kernel naming it."""
    span: dict[int, list[int]] = {}
    pages: dict[int, int] = {}
    for i, plan in enumerate(doc):
        for key in ("ReadTensors", "WriteTensors"):
            for t in _op(plan)[key]:
                rows, cols = t["Shape"][-2:]
                buffer = t["Buffer"]["Id"]
                pages[buffer] = max(pages.get(buffer, 0), -(-rows // 32) * -(-cols // 32))
                span.setdefault(buffer, [i, i])[1] = i
    return [sum(-(-pages[b] // banks) * 2048 for b, (lo, hi) in span.items() if lo <= i <= hi)
            for i in range(len(doc))]


def test_dram_beyond_a_bank_is_an_error_at_the_first_kernel_that_needs_it(planc, plans, tmp_path):
    """The same plans, every buffer in DRAM, on a chip whose two DRAM banks hold 32 KiB."""
    bank = SMALL_DRAM["dram_bytes"] // SMALL_DRAM["dram_banks"]
    verdicts = []
    for doc in plans:
        dram = copy.deepcopy(doc)
        for plan in dram:
            for layout in plan.get("layouts", {}).values():
                layout["shard"] = "DRAM"
        assert _rules(planc, tmp_path, dram) == (0, set())
        need = _dram_need_per_bank(dram, SMALL_DRAM["dram_banks"])
        code, found = _rules(planc, tmp_path, dram, arch="tiny_dram_tt")
        verdicts.append(max(need) > bank)
        if max(need) <= bank:
            assert (code, found) == (0, set())
            continue
        first = next(i for i, bytes_ in enumerate(need) if bytes_ > bank)
        assert code == 1 and found == {("tt.dram-capacity", f"$[{first}]")}, found
    assert True in verdicts and False in verdicts
