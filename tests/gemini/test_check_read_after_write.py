"""`planc check`'s `gemini.dram-read-after-write`: a DRAM load that reads back a stored map
(`related_ifmap`) must come after that store in the one DRAM queue (`tensor_order`), or it
reads what DRAM held before. planc's gemini-dram-order wrote such IRs (ResNet-34 at batch 4
read its 7x7 convolution's output back at queue positions 3 and 4, before the store at 18)
and `planc check` passed them.

Mistakes are made by moving loads in the queue of Gemini's own ResNet-50 IR (it reads back
Conv_107's and Conv_111's outputs): swapping two transfers' `tensor_order` everywhere keeps a
valid permutation, so only the new rule can object. The expected verdicts come from
`queue_positions`, a reader of the JSON that shares no code with the rule."""

from __future__ import annotations

import json

import pytest

from tests.conftest import corpus_root
from tests.gemini.test_dram_read_after_write import queue_positions

RULE = "gemini.dram-read-after-write"


def _corpus_irs() -> list:
    found = sorted((corpus_root() / "gemini").glob("*_stschedule.json"))
    if not found:
        pytest.skip("upstream corpus not found (set PLANC_CORPUS)")
    return found


def _resnet50() -> dict:
    path = corpus_root() / "gemini" / "int8_resnet50.sim_quantized_b1_c1_bw16_stschedule.json"
    if not path.exists():
        pytest.skip(f"upstream corpus not found at {path.parent} (set PLANC_CORPUS)")
    return json.loads(path.read_text())


def _swap(doc, a: int, b: int) -> None:
    """Exchange queue positions `a` and `b` in every snapshot entry that carries one."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("tensor_order") in (a, b):
                item["tensor_order"] = a + b - item["tensor_order"]
            stack += item.values()
        elif isinstance(item, list):
            stack += item


def _early(doc) -> set[tuple[int, int, int, int]]:
    """(load, load's position, store, store's position) of every reload queued before its
    store, brute force over all links; the rule names one store per load, the latest."""
    loads, stores = queue_positions(doc)
    found: dict[int, tuple] = {}
    for load in doc["-1"]["out"]:
        for store in load["related_ifmap"]:
            tid = load["transfer_id"]
            if loads[tid] < stores[store]:
                found[tid] = max(found.get(tid, (tid, loads[tid], store, -1)),
                                 (tid, loads[tid], store, stores[store]), key=lambda e: e[3])
    return set(found.values())


def _findings(planc, tmp_path, doc) -> tuple[bool, list[dict]]:
    path = tmp_path / "s_stschedule.json"
    path.write_text(json.dumps(doc))
    report = planc("check", "--json", path).json()
    return report["ok"], report["findings"]


def test_gemini_own_irs_pass(planc):
    links = 0
    for path in _corpus_irs():
        report = planc("check", "--json", path).json()
        assert report["ok"] and report["findings"] == [], path.name
        links += sum(len(ld["related_ifmap"]) for ld in json.loads(path.read_text())["-1"]["out"])
    assert links >= 17     # the rule had reloads to look at


@pytest.mark.parametrize("moves", [[(51, 52)], [(51, 52), (73, 74)], [(50, 68), (51, 67)]],
                         ids=["one", "two-maps", "far"])
def test_a_load_moved_before_its_store_is_an_error(planc, tmp_path, moves):
    """(51, 52): load 120 before store 119, its neighbour; (73, 74): load 158 before store 157
    of the other map; (50, 68), (51, 67): the stores of both maps after most of their loads."""
    doc = _resnet50()
    for a, b in moves:
        _swap(doc, a, b)
    expected = _early(doc)
    assert expected
    ok, findings = _findings(planc, tmp_path, doc)
    assert not ok
    assert {f["rule"] for f in findings} == {RULE}
    out = doc["-1"]["out"]
    want = {e[0]: e for e in expected}
    got = set()
    for f in findings:
        index, slot = (int(part.split("]")[0]) for part in f["path"].split("[")[2:4])
        assert f["path"] == f"$['-1'].out[{index}].related_ifmap[{slot}]"
        tid, store = out[index]["transfer_id"], out[index]["related_ifmap"][slot]
        _, position, _, later = want[tid]
        assert f"DRAM load {tid} reads back store {store} " in f["message"]
        assert f"tensor_order {position}, before the store at {later}:" in f["message"]
        got.add((tid, position, store, later))
    assert got == expected and len(findings) == len(expected)


def test_loads_reordered_after_their_store_pass(planc, tmp_path):
    """The look-alike legal edit: two reloads of the same map exchange places, both still
    after the store (positions 52 and 55 hold loads 120 and 121 of store 119 at 51)."""
    doc = _resnet50()
    _swap(doc, 52, 55)
    assert _early(doc) == set()
    assert _findings(planc, tmp_path, doc) == (True, [])


def test_the_message_is_one_line(planc, tmp_path):
    doc = _resnet50()
    _swap(doc, 51, 52)
    path = tmp_path / "moved_stschedule.json"
    path.write_text(json.dumps(doc))
    result = planc("check", path)
    assert result.code == 1 and result.out == ""
    assert result.err == (
        f"planc: error: {path}: $['-1'].out[55].related_ifmap[0]: DRAM load 120 reads back "
        "store 119 (related_ifmap) but is queued at tensor_order 51, before the store at 52: "
        "the DRAM queue runs in tensor_order, so the load reads what DRAM held before the "
        f"store [{RULE}]\n")
