"""Lowering the communication of multi-rank ARK models to MSCCL++: the plan computes what
the models' communication computes (checked with the simulator against the reference run)."""

from __future__ import annotations

import json

import pytest
from xdsl.dialects.builtin import ModuleOp

from backends.ark_model import emit_model
from dialects.locations import verify_module
from frontends.collective_models import (
    CommunicationBuilder,
    all_reduce_models,
    exchange_in_place_models,
    ring_shift_models,
    send_recv_matmul_models,
    shard_all_reduce_models,
)
from targets.mscclpp.communication import atom
from targets.mscclpp.lowering import Choice, lower_models
from targets.mscclpp.program import expand
from targets.mscclpp.selection import fastest
from targets.mscclpp.simulator import _cell_bytes, check_plan
from targets.mscclpp.synthesis import Spec
from tests.conftest import EXAMPLES


def _lower(modules: list[ModuleOp], choice: Choice | None = None):
    models = [next(iter(m.ops)) for m in modules]
    return lower_models(models, [f"rank{i}.json" for i in range(len(models))],
                        choice or Choice())


def _check_against_reference(lowered):
    algorithm = lowered.algorithm
    verify_module(ModuleOp([algorithm]))
    cell = _cell_bytes(expand(algorithm, lowered.chunk_bytes))
    return check_plan(algorithm, lowered.chunk_bytes, lowered.expectation(cell))


@pytest.mark.parametrize("packets", [False, True], ids=["simple", "packets"])
@pytest.mark.parametrize("ranks", [2, 3])
def test_point_to_point_matches_the_model(ranks, packets):
    lowered = _lower(ring_shift_models(ranks, packets=packets))
    assert lowered.route == "point-to-point"
    assert lowered.algorithm.protocol_name == ("LL" if packets else "Simple")
    report = _check_against_reference(lowered)
    assert report.ok and report.postcondition == "satisfied", report.errors


def test_reference_run_is_what_the_model_says():
    """Rank r's receive buffer ends up holding rank r-1's tensor."""
    lowered = _lower(ring_shift_models(3))
    comm, layout, reference = lowered.communication, lowered.layout, lowered.reference
    for rank in range(3):
        recv = next(e for e in comm.comm_events(rank) if e.kind == "recv")
        send = next(e for e in comm.comm_events(recv.peer) if e.kind == "send")
        _, received, count = layout.ref(recv.target)
        _, sent, _ = layout.ref(send.source)
        assert reference.read(recv.target) == [((rank - 1) % 3 * (1 << 40) + sent + k,)
                                               for k in range(count)]
        assert received != sent or rank != recv.peer


def test_a_wrong_lowering_would_be_caught():
    """The check is not vacuous: without rank 1's wait, its buffer may be read too early."""
    lowered = _lower(ring_shift_models(2))
    tb = lowered.algorithm.gpus()[1].threadblocks()[0]
    next(op for op in tb.ops() if op.NAME == "wait").detach()
    report = _check_against_reference(lowered)
    assert not report.ok
    assert report.errors["unbalanced"] == [
        "gpu 0 sends 2 signals on memory channel #0 to gpu 1, which waits 1 times: the next "
        "launch would start with a stale signal"]


def test_arks_all_reduce_is_recognised_and_costed():
    lowered = _lower(all_reduce_models(4, (2048,)))
    assert lowered.route == "allreduce"
    algorithm = lowered.algorithm
    assert algorithm.collective_name == "allreduce" and not algorithm.is_inplace
    best = fastest(Spec("allreduce", 4, "auto", inplace=False), None, 4096, "h100")
    assert algorithm.name_value == best.spec.name
    report = check_plan(algorithm)
    assert report.ok and report.postcondition == "satisfied"
    buffers = json.loads(json.dumps(dict(algorithm.extra.data)["planc_buffers"].data[0]
                                    .data["input"].data["bytes"].value.data))
    assert buffers == 4096


def test_recognised_all_reduce_follows_the_requested_algorithm():
    lowered = _lower(all_reduce_models(2, (4096,)), Choice("ring", "LL", 2))
    assert lowered.algorithm.name_value == "allreduce_ring_ll_2gpus_x2"
    assert check_plan(lowered.algorithm).ok


@pytest.mark.parametrize("packets", [False, True], ids=["recvreducesend", "packets"])
def test_shard_all_reduce_is_recognised_in_place(packets):
    lowered = _lower(shard_all_reduce_models(3, 512, packets=packets))
    assert lowered.route == "allreduce" and lowered.algorithm.is_inplace
    assert check_plan(lowered.algorithm).ok


@pytest.mark.parametrize("models", [
    lambda: all_reduce_models(3, (512,)),
    lambda: shard_all_reduce_models(4, 256),
    lambda: shard_all_reduce_models(3, 256, packets=True),
], ids=["sends-and-adds", "recvreducesend", "recvreducesendpacket"])
def test_all_reduce_models_lower_op_by_op_too(models):
    lowered = _lower(models(), Choice(recognise=False))
    assert lowered.route == "point-to-point"
    report = _check_against_reference(lowered)
    assert report.ok and report.postcondition == "satisfied", report.errors


# -- the command line --------------------------------------------------------------------------


def _write(tmp_path, modules, stem="rank"):
    paths = []
    for i, module in enumerate(modules):
        path = tmp_path / f"{stem}{i}.json"
        path.write_text(emit_model(module))
        paths.append(path)
    return paths


def test_cli_lowers_the_sendrecv_example(planc, tmp_path):
    out = tmp_path / "plan.json"
    result = planc(EXAMPLES / "sendrecv_rank0.json", EXAMPLES / "sendrecv_rank1.json",
                   "--target", "mscclpp", "--mscclpp-schema", "executor", "-o", out)
    assert (result.code, result.err) == (0, "")
    plan = json.loads(out.read_text())
    assert plan["collective"] == "custom"
    ops = [[op["name"] for op in g["threadblocks"][0]["ops"]] for g in plan["gpus"]]
    # A handshake first: rank 0 puts only once rank 1 has shown that its kernel started.
    assert ops == [["rlxsignal", "rlxwait", "nop", "put", "nop", "signal"],
                   ["rlxsignal", "rlxwait", "wait"]]
    assert plan["planc_buffers"][0] == [{"ark_buffer": 1, "buffer": "i", "index": 0,
                                         "size": 1, "bytes": 65536}]
    simulated = planc("simulate", out, "--json")
    assert simulated.code == 0 and simulated.json()["races"] == []
    assert simulated.json()["before_start"] == []


def test_cli_lowers_the_allreduce_example_with_flags(planc, tmp_path):
    out = tmp_path / "plan.json"
    result = planc(EXAMPLES / "allreduce_rank0.json", EXAMPLES / "allreduce_rank1.json",
                   "--target", "mscclpp", "--algorithm", "allpairs", "--protocol", "LL",
                   "-o", out)
    assert (result.code, result.err) == (0, "")
    assert json.loads(out.read_text())["name"] == "allreduce_allpairs_ll_2gpus"


def _unmatched(rank: int):
    m = CommunicationBuilder(rank, 2)
    x = m.tensor([64], "FP32")
    if rank == 0:
        m.send_into(x, 1, 77)
    return m.finish()


def _two_phase(rank: int):
    m = CommunicationBuilder(rank, 2)
    tags = m.first_tag(2)
    x = m.tensor([64], "FP32")
    if rank == 0:
        m.send_into(x, 1, tags[0])
        got = m.recv_into(m.receiving([64], "FP32", [(1, tags[1])]), 1, tags[1])
        m.add(got, x)
    else:
        got = m.recv_into(m.receiving([64], "FP32", [(0, tags[0])]), 0, tags[0])
        m.send_into(m.add(got, x), 0, tags[1])
    return m.finish()


def test_cli_errors_for_model_sets(planc, tmp_path):
    r0, r1 = EXAMPLES / "sendrecv_rank0.json", EXAMPLES / "sendrecv_rank1.json"
    result = planc(r0, r1, "--target", "mlir")
    assert (result.code, result.err) == (1, "planc: error: --target mlir takes one INPUT, "
                                            "got 2\n")
    plan = tmp_path / "plan.json"
    planc("--collective", "allgather", "--ranks", "2", "--target", "mscclpp", "-o", plan)
    result = planc(r0, plan, "--target", "mscclpp")
    assert result.err == (f"planc: error: all inputs must be of one format: {r0} is ark-model, "
                          f"{plan} is mscclpp\n")
    result = planc(r0, "--target", "mscclpp")
    assert result.err == (f"planc: error: {r0}: the models are of a 2-rank world; give one "
                          "model file per rank (missing: rank 1)\n")
    result = planc(r0, r0, "--target", "mscclpp")
    assert result.err == (f"planc: error: {r0}: $.Rank: rank 0 is given twice ({r0} and "
                          f"{r0})\n")
    result = planc(EXAMPLES / "ffn.json", "--target", "mscclpp")
    assert result.err.endswith("the models do not communicate (no Send, Recv, packet, "
                               "RecvReduceSend or DeviceSync operators): there is no "
                               "collective to make\n")
    a, b = _write(tmp_path, [_unmatched(0), _unmatched(1)], "unmatched")
    result = planc(a, b, "--target", "mscclpp", "-o", tmp_path / "x.json")
    assert result.code == 1
    assert result.err == (f"planc: error: {a}: $.Nodes[0].Op: Send 'send': rank 0 sends tag 77 "
                          "to rank 1, but no buffer of rank 1 has RecvTags [0, 77]\n")
    assert not (tmp_path / "x.json").exists()
    a, b = _write(tmp_path, [_two_phase(0), _two_phase(1)], "phases")
    result = planc(a, b, "--target", "mscclpp")
    assert result.err == (f"planc: error: {b}: $.Nodes[2].Op: Send 'send' sends what Add 'add' "
                          "computes from received data: that needs two communication phases "
                          "(two plans), not one\n")


def _generated_model_sets():
    for ranks in range(2, 9):
        yield f"ring{ranks}", ring_shift_models(ranks)
        yield f"ring{ranks}-packets", ring_shift_models(ranks, packets=True)
        yield f"exchange{ranks}", exchange_in_place_models(ranks)
    yield "sendrecv-matmul", send_recv_matmul_models()


def test_generated_point_to_point_plans_are_race_free(tmp_path):
    """Rings, in-place exchanges (2-8 ranks) and a send/recv between matmuls: the plan
    equals the model's reference run, and nothing races, not even the peers' kernel starts
    (`planc check --strict` on the executor-schema file agrees)."""
    from backends.mscclpp import algorithm_json
    from compiler.checking import check_file
    from tests.conftest import write_json

    for name, models in _generated_model_sets():
        lowered = _lower(models)
        report = _check_against_reference(lowered)
        assert report.ok and report.postcondition == "satisfied", (name, report.errors)
        path = write_json(tmp_path / f"{name}.json", algorithm_json(lowered.algorithm))
        assert not check_file(str(path)).findings, name
        for gpu in lowered.algorithm.gpus():
            ops = [op.NAME for op in gpu.threadblocks()[0].ops()]
            if "put" in ops:  # every put comes after a handshake with the peers
                assert ops[:2] == ["rlxsignal", "rlxwait"], (name, ops)


@pytest.mark.parametrize("ranks", [2, 3, 5])
def test_an_exchange_in_place_goes_through_scratch(ranks):
    """Rank r sends x and receives rank r-1's x into x itself: the data lands in scratch
    and is copied into x at the receive. Each rank ends with its predecessor's x, which is
    written here by hand, not by the reference run."""
    lowered = _lower(exchange_in_place_models(ranks))
    for rank in range(ranks):
        assert lowered.reference.memory[(rank, "i")] == [(atom((rank - 1) % ranks, 0),)]
        names = [op.NAME for op in lowered.algorithm.gpus()[rank].threadblocks()[0].ops()]
        assert names[-2:] == ["nop", "copy"] and "wait" in names
    assert lowered.algorithm.gpus()[0].chunks("s") == 1
    report = _check_against_reference(lowered)
    assert report.ok and report.postcondition == "satisfied", report.errors


def test_an_exchange_in_place_put_straight_into_place_races(monkeypatch):
    """The check is not vacuous: without staging, a put lands in the peer's x while the peer
    still reads x for its own send."""
    from targets.mscclpp.communication import Communication

    monkeypatch.setattr(Communication, "staged_transfers", lambda self: set())
    lowered = _lower(exchange_in_place_models(2))
    report = check_plan(lowered.algorithm, lowered.chunk_bytes)
    assert any("(put) writes gpu 1 input/output bytes" in m and "read by gpu 1" in m
               for m in report.errors["races"]), report.errors


@pytest.mark.parametrize("seed", range(24))
def test_random_transfers_lower_race_free(seed):
    """Generated: random sends into fresh tensors and into slots the receiver sends from.
    The plan equals the reference run with no race or early access, and the reference run
    equals what the transfers say, worked out here by hand: every in-place target slot ends
    with the sender's source slot, every other slot keeps the rank's own data."""
    from frontends.collective_models import random_transfer_models

    models, transfers = random_transfer_models(seed)
    lowered = _lower(models, Choice(recognise=False))
    report = _check_against_reference(lowered)
    assert report.ok and report.postcondition == "satisfied", (seed, report.errors)
    comm, layout, reference = lowered.communication, lowered.layout, lowered.reference
    for rank in range(comm.ranks):
        data = next((e.source for r in range(comm.ranks) for e in comm.comm_events(r)
                     if e.kind == "send" and e.rank == rank), None)
        if data is None:
            continue
        letter, first, _ = layout.ref(data)
        base = first - data.start // layout.chunk  # chunk of the data tensor's byte 0
        per_slot = 16 * 4 // layout.chunk
        for slot in range(4):
            sender = [(s, source) for s, d, _, source, target in transfers
                      if d == rank and target == slot]
            src, source = sender[0] if sender else (rank, slot)
            got = reference.memory[(rank, letter)][base + slot * per_slot:
                                                   base + (slot + 1) * per_slot]
            origin = lowered.layout.places[(src, data.buffer)][1]
            want = [(atom(src, origin + source * per_slot + k),) for k in range(per_slot)]
            assert got == want, (seed, rank, slot)


@pytest.mark.parametrize("models", [lambda: ring_shift_models(3, (96,), "FP32"),
                                    send_recv_matmul_models,
                                    lambda: exchange_in_place_models(3)],
                         ids=["ring3-fp32", "sendrecv-matmul", "exchange3"])
def test_issue_models_through_the_cli_pass_strict_check(planc, tmp_path, models):
    """The regression of issue 11 (2): written as model files, lowered by the command line
    (both schemas), the plans pass `planc check --strict` (no put before the peer's start,
    no race in the packed in-place buffer) and `planc simulate`."""
    paths = _write(tmp_path, models())
    for schema in ("seed", "executor"):
        out = tmp_path / f"plan-{schema}.json"
        made = planc(*paths, "-t", "mscclpp", "--mscclpp-schema", schema, "-o", out)
        assert made.code == 0, made.err
        checked = planc("check", "--strict", out)
        assert checked.code == 0, checked.err
        simulated = planc("simulate", out, "--json").json()
        assert simulated["ok"] and simulated["before_start"] == [], simulated
