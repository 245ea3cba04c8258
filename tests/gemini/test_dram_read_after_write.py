"""A map stored to DRAM and read back is read after its store in the one DRAM queue.

Gemini's DRAM runs its loads and stores in `tensor_order` (one queue, in order); a load whose
`related_ifmap` names a store reads what that store writes (a read-after-write dependency),
so it must come later in the queue, or it reads what DRAM held before. planc's
gemini-dram-order queued such reloads by when L2 had room for them, ahead of their stores:
ResNet-34 at batch 4 read its 7x7 convolution's output back (for the first max-pool) at
queue positions 3 and 4, before the store at 18 (that map now stays in L2), at batch 16 8 of
its 64 reloads came early, at batch 4 ResNet-50 14 of 25. The orders are read here from the
written IR's snapshots, not from planc's passes."""

from __future__ import annotations

import json

import pytest


def queue_positions(ir: dict) -> tuple[dict[int, int], dict[int, int]]:
    """tensor_order of every DRAM load (from the L2 and WL0 entries that list it) and every
    store (from the staging `ofmap` entry of its block)."""
    loads: dict[int, int] = {}
    staged: dict[tuple, int] = {}
    for wl in ir["0"]:
        for entry in wl["buffer"]:
            if entry["type"] == "ofmap":    # its box relative to the workload's
                base = wl["workload"][0]
                key = (wl["workload_id"], entry["layer_name"],
                       tuple(b + x for b, x in zip(base, entry["lower"], strict=True)),
                       tuple(b + x for b, x in zip(base, entry["upper"], strict=True)))
                staged.setdefault(key, entry["tensor_order"])
            elif any(s["type"] == "DRAM" for s in entry.get("source", [])):
                for source in entry["source"]:
                    if source["type"] == "DRAM":
                        loads.setdefault(source["transfer_id"], entry["tensor_order"])
        for entry in wl.get("wl0_buffer") or []:
            if entry["source"] == "DDR":
                for tid in entry["transfer_id"]:
                    loads.setdefault(tid, entry["tensor_order"])
    stores = {s["transfer_id"]: staged[(s["workload_id"], s["layer_name"], tuple(s["lower"]),
                                        tuple(s["upper"]))] for s in ir["-1"]["in"]}
    return loads, stores


@pytest.mark.parametrize("network, batch", [("resnet34", 16), ("resnet50", 4)])
def test_a_map_is_read_back_after_its_store(planc, tmp_path, network, batch):
    from tests.conftest import corpus_root

    layers = corpus_root() / "gemini" / f"int8_{network}.sim_quantized_b1.json"
    if not layers.exists():
        pytest.skip(f"upstream corpus not found at {layers.parent} (set PLANC_CORPUS)")
    out = tmp_path / "plan.json"
    assert planc(layers, "--target", "gemini", "--batch", str(batch), "-o", out).code == 0
    ir = json.loads(out.read_text())
    loads, stores = queue_positions(ir)
    reloads = [(ld["transfer_id"], s) for ld in ir["-1"]["out"] for s in ld["related_ifmap"]]
    assert reloads     # both store maps and read them back
    early = [(tid, loads[tid], s, stores[s]) for tid, s in reloads if loads[tid] < stores[s]]
    assert early == []
    # and `planc check` (gemini.dram-read-after-write) agrees: no false alarm on planc's IR
    report = planc("check", "--json", out).json()
    assert report["ok"] and report["findings"] == []


def test_gemini_own_schedules_read_back_after_the_store():
    """The rule holds on Gemini's own IRs (ResNet-50 reads back Conv_107's output in 8
    tiles), read by the same code."""
    from tests.conftest import corpus_root

    found = sorted((corpus_root() / "gemini").glob("*_stschedule.json"))
    if not found:
        pytest.skip("upstream corpus not found (set PLANC_CORPUS)")
    checked = 0
    for path in found:
        ir = json.loads(path.read_text())
        loads, stores = queue_positions(ir)
        for ld in ir["-1"]["out"]:
            for s in ld["related_ifmap"]:
                assert loads[ld["transfer_id"]] > stores[s]
                checked += 1
    assert checked >= 17
