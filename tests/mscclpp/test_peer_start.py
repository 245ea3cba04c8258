"""`mscclpp.peer-start`: an access to a peer's memory must follow something the peer did in
this launch. One hand-made or mutated plan per class of access, and a brute-force second
opinion (reachability over program order and signal->wait edges, straight from the JSON)
that agrees with the simulator on every remote access of generated plans."""

from __future__ import annotations

import copy
import json
from collections import defaultdict

import pytest

from backends.mscclpp import algorithm_json
from compiler.checking import check_file
from targets.mscclpp.lowering import Choice, lower_models
from tests.conftest import write_json
from tests.mscclpp.fixtures import (
    allgather_plan,
    allreduce_plan,
    mutated,
    ops_of,
    port_allgather_plan,
)

OPENING = ("rlxsignal", "rlxwait", "signal", "wait", "nop")


def _errors(tmp_path, doc, rule="mscclpp.peer-start", severity="error"):
    found = check_file(str(write_json(tmp_path / "plan.json", doc))).findings
    return [f for f in found if f.rule == rule and f.severity == severity]


def _remote(op) -> bool:
    return any("buffer_id" in ref or "switch_channel_id" in ref
               for ref in op.get("src_buff", []) + op.get("dst_buff", []))


def _without_opening_handshake(doc):
    """Drop the signals, waits and nops before each block's first access to a peer, as a
    generator that forgot the DSL's opening handshake would."""
    doc = copy.deepcopy(doc)
    for gpu in doc["gpus"]:
        for tb in gpu["threadblocks"]:
            first = next((i for i, op in enumerate(tb["ops"]) if _remote(op)), 0)
            tb["ops"] = [op for i, op in enumerate(tb["ops"])
                         if i >= first or op["name"] not in OPENING]
    return doc


def _scratch_plan(handshake: bool, double: bool = False):
    """Each rank puts its input into the peer's scratch and signals; the peer waits and
    copies it into its output (an out-of-place sendrecv through scratch)."""
    gpus = []
    for rank in range(2):
        ops = [{"name": "rlxsignal", "channel_ids": [0], "channel_type": "memory"},
               {"name": "rlxwait", "channel_ids": [0], "channel_type": "memory"},
               {"name": "nop"}] if handshake else []
        ops += [
            {"name": "put", "src_buff": [{"type": "i", "index": 0, "size": 1}],
             "dst_buff": [{"buffer_id": 0, "index": 0, "size": 1}], "channel_type": "memory"},
            {"name": "nop"},
            {"name": "signal", "channel_ids": [0], "channel_type": "memory"},
            {"name": "wait", "channel_ids": [0], "channel_type": "memory"},
            {"name": "nop"},
            {"name": "copy", "src_buff": [{"type": "s", "index": 0, "size": 1}],
             "dst_buff": [{"type": "o", "index": 0, "size": 1}]},
        ]
        gpus.append({
            "id": rank, "input_chunks": 1, "output_chunks": 1, "scratch_chunks": 1,
            "threadblocks": [{
                "id": 0, "ops": ops,
                "channels": [{"channel_type": "memory", "channel_ids": [0]}],
                "remote_buffer_refs": [{"access_channel_type": "memory",
                                        "remote_buffer_ids": [0]}]}],
            "channels": [{"channel_type": "memory", "connected_to": [1 - rank]}],
            "remote_buffers": [{"rank": 1 - rank, "type": "s",
                                "access_channel_types": ["memory"]}],
            "semaphores": []})
    return {"name": "sendrecv_test", "collective": "sendrecv", "protocol": "Simple",
            "inplace": False, "gpus": gpus, "num_threads_per_block": 1024,
            "use_double_scratch_buffer": double, "buffer_alignment": 16,
            "min_message_size": 0, "max_message_size": 2**64 - 1}


def test_a_put_into_a_peers_inplace_buffer_before_it_starts(tmp_path):
    assert not _errors(tmp_path, allgather_plan())
    found = _errors(tmp_path, _without_opening_handshake(allgather_plan()))
    assert [f.path for f in found] == ["$.gpus[0].threadblocks[0].ops[0]",
                                       "$.gpus[1].threadblocks[0].ops[0]"]
    assert found[0].message.startswith(
        "gpu 0 tb 0 op 0 (put) writes gpu 1 output bytes [0, 16) (chunk 0) before anything "
        "shows that gpu 1 has started")


@pytest.mark.parametrize("put", ["pwsf", "put"])
def test_a_port_put_issued_before_the_peer_starts(tmp_path, put):
    """Port puts run on the proxy, which knows what the issuing threads knew."""
    doc = port_allgather_plan(put)
    if put == "put":  # a plain port put needs its signal back
        for rank in range(2):
            ops_of(doc, rank).insert(4, {"name": "signal", "channel_ids": [0],
                                         "channel_type": "port"})
    assert not _errors(tmp_path, doc)
    found = _errors(tmp_path, _without_opening_handshake(doc))
    assert len(found) == 2 and all(f"({put}) writes" in f.message for f in found)


def test_a_remote_read_before_the_peer_starts(tmp_path):
    """rres reads the peer's input (which its caller may still be writing) and writes it."""
    found = _errors(tmp_path, _without_opening_handshake(allreduce_plan()))
    verbs = {f.message.split(" gpu ")[0].split(") ")[1] for f in found}
    assert verbs == {"reads", "writes"}


@pytest.mark.parametrize("handshake, double, expected", [
    (True, False, 0), (False, False, 2), (False, True, 0)],
    ids=["handshake", "no-handshake", "double-scratch"])
def test_a_put_into_a_peers_scratch(tmp_path, handshake, double, expected):
    """Simple-protocol scratch may still be in use by the peer's previous launch; with
    use_double_scratch_buffer launches alternate halves, so the put is safe."""
    doc = _scratch_plan(handshake, double)
    found = _errors(tmp_path, doc)
    assert len(found) == expected, found
    if expected:
        assert "gpu 1 scratch bytes [0, 16)" in found[0].message
    everything = check_file(str(write_json(tmp_path / "p.json", doc))).findings
    assert not [f for f in everything if f.severity == "error" and
                f.rule != "mscclpp.peer-start"], everything


def test_a_switch_broadcast_before_the_peers_start(planc, tmp_path):
    """`gstore` writes every group member's output through the switch (issue 10's class)."""
    out = tmp_path / "nvls.json"
    made = planc("--collective", "allgather", "--ranks", "2", "--algorithm", "nvls",
                 "--protocol", "Simple", "-t", "mscclpp", "--mscclpp-schema", "executor",
                 "-o", out)
    assert made.code == 0, made.err
    doc = json.loads(out.read_text())
    assert not _errors(tmp_path, doc)
    found = _errors(tmp_path, _without_opening_handshake(doc))
    assert found and all("(gstore) writes" in f.message for f in found)


def test_waiting_on_the_first_threads_only_is_an_error(tmp_path):
    """Draft-era DSL plans put right after the wait with no nop: only the block's first
    threads have waited, the others may write the peer's output before its kernel starts (a
    race with the peer's caller). An error, at the put the nop should have guarded."""
    doc = mutated(allgather_plan(), lambda p: [ops_of(p, r).pop(2) for r in range(2)])
    assert not _errors(tmp_path, doc, severity="warning")
    found = _errors(tmp_path, doc)
    assert len(found) == 2 and "only the thread block's first threads" in found[0].message
    assert sorted(f.path for f in found) == ["$.gpus[0].threadblocks[0].ops[2]",
                                             "$.gpus[1].threadblocks[0].ops[2]"]
    assert ops_of(doc, 0)[2]["name"] == "put"


def test_packets_need_no_handshake(planc, tmp_path):
    out = tmp_path / "ll.json"
    assert planc("--collective", "allreduce", "--ranks", "4", "--algorithm", "allpairs",
                 "--protocol", "LL", "-t", "mscclpp", "-o", out).code == 0
    assert not any(op["name"] in ("signal", "rlxsignal") for gpu in json.loads(
        out.read_text())["gpus"] for tb in gpu["threadblocks"] for op in tb["ops"])
    assert planc("check", "--strict", out).code == 0


@pytest.mark.parametrize("collective, algorithm", [
    ("allreduce", "ring"), ("allreduce", "allpairs"), ("allreduce", "oneshot"),
    ("allreduce", "nvls"), ("allgather", "ring"), ("allgather", "allpairs"),
    ("allgather", "nvls"), ("reducescatter", "ring"), ("reducescatter", "allpairs"),
    ("broadcast", "ring"), ("alltoall", "allpairs")])
def test_every_simple_plan_needs_its_opening_handshake(planc, tmp_path, collective, algorithm):
    """Generated: each Simple plan planc synthesizes passes; without the handshake that opens
    its blocks, some access reaches a peer before it is known to have started."""
    out = tmp_path / "plan.json"
    made = planc("--collective", collective, "--ranks", "3", "--algorithm", algorithm,
                 "--protocol", "Simple", "-t", "mscclpp", "--mscclpp-schema", "executor",
                 "-o", out)
    if made.code:
        pytest.skip(made.err)
    doc = json.loads(out.read_text())
    assert not _errors(tmp_path, doc)
    assert _errors(tmp_path, _without_opening_handshake(doc))


# ---------------------------------------------------------------------------------------------
# A second way: reachability on the JSON
# ---------------------------------------------------------------------------------------------


def brute_force_early(doc) -> set[tuple[int, int, int, int]]:
    """(gpu, tb, op, peer) of every remote access of a one-channel-per-pair memory-channel
    plan that no path of program order and n-th signal -> n-th wait edges leads to from an
    op of the peer. Computed by fixed-point iteration over each op's set of known ranks."""
    ops = {(g["id"], tb["id"]): tb["ops"] for g in doc["gpus"] for tb in g["threadblocks"]}
    peer_of = {}
    for gpu in doc["gpus"]:
        for tb in gpu["threadblocks"]:
            connected = gpu["channels"][0]["connected_to"] if gpu["channels"] else []
            ids = tb["channels"][0]["channel_ids"] if tb["channels"] else []
            peer_of[(gpu["id"], tb["id"])] = {
                "channel": [connected[i] for i in ids],
                "buffer": [gpu["remote_buffers"][i]["rank"]
                           for ref in tb.get("remote_buffer_refs", [])
                           for i in ref["remote_buffer_ids"]]}
    signals: dict[tuple[int, int], list[tuple]] = defaultdict(list)
    waits: dict[tuple[int, int], list[tuple]] = defaultdict(list)
    for (g, t), block in ops.items():
        for i, op in enumerate(block):
            for c in op.get("channel_ids", []) if op["name"] in ("signal", "rlxsignal") else []:
                signals[(g, peer_of[(g, t)]["channel"][c])].append((g, t, i))
            for c in op.get("channel_ids", []) if op["name"] in ("wait", "rlxwait") else []:
                waits[(peer_of[(g, t)]["channel"][c], g)].append((g, t, i))
    known = {(g, t, i): {g} for (g, t), block in ops.items() for i in range(len(block))}
    changed = True
    while changed:
        changed = False
        for (g, t), block in ops.items():
            for i in range(1, len(block)):
                if not known[(g, t, i - 1)] <= known[(g, t, i)]:
                    known[(g, t, i)] |= known[(g, t, i - 1)]
                    changed = True
        for key, sent in signals.items():
            for signal, wait in zip(sent, waits[key], strict=False):
                if not known[signal] <= known[wait]:
                    known[wait] |= known[signal]
                    changed = True
    early = set()
    for (g, t), block in ops.items():
        for i, op in enumerate(block):
            for ref in op.get("src_buff", []) + op.get("dst_buff", []):
                if "buffer_id" in ref:
                    peer = peer_of[(g, t)]["buffer"][ref["buffer_id"]]
                    if peer not in known[(g, t, i)]:
                        early.add((g, t, i, peer))
    return early


def _simulator_early(tmp_path, doc) -> set[tuple[int, int, int, int]]:
    found = check_file(str(write_json(tmp_path / "plan.json", doc))).findings
    early = set()
    for f in found:
        if f.rule == "mscclpp.peer-start":
            words = f.message.split()
            g, t, i = int(words[1]), int(words[3]), int(words[5])
            early.add((g, t, i, int(words[words.index("gpu", 6) + 1])))
    return early


def _generated_plans():
    from frontends.collective_models import exchange_in_place_models, ring_shift_models

    for ranks in range(2, 9):
        for name, models in [("ring", ring_shift_models(ranks)),
                             ("exchange", exchange_in_place_models(ranks))]:
            lowered = lower_models([next(iter(m.ops)) for m in models],
                                   [f"r{r}.json" for r in range(ranks)], Choice())
            yield f"{name}{ranks}", algorithm_json(lowered.algorithm)


def test_brute_force_agrees_with_the_simulator(tmp_path):
    docs = [("allgather", allgather_plan(3)), ("allreduce", allreduce_plan(3)),
            ("scratch", _scratch_plan(True))] + list(_generated_plans())
    checked = 0
    for name, doc in docs:
        for variant in (doc, _without_opening_handshake(doc)):
            expected = brute_force_early(variant)
            assert _simulator_early(tmp_path, variant) == expected, name
            checked += bool(expected)
    assert checked >= len(docs)  # every plan, stripped, has early accesses to agree on
