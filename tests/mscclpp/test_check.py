"""planc check on MSCCL++ plans: what the DSL emits today is accepted, what the executor
refuses or would get wrong is an error naming the rule, the path and the GPU/thread block/op."""

from __future__ import annotations

import copy
import json

import pytest

from compiler.checking import check_file
from tests.conftest import corpus_params, corpus_root, write_json

DSL = corpus_params("mscclpp/dsl")
# Files of the corpus that planc rejects, and why (each is a plan today's executor gets wrong).
REJECTED = {
    "ut_switch_reduce_test.json": ("mscclpp.operation-table", 'unknown operation "glre"'),
    # A draft-branch plan: packets into scratch sized for protocol Simple (the executor
    # doubles scratch for packets only under LL), so its writes run past the scratch buffer.
    "allreduce_packet2.json": ("mscclpp.out-of-range", "packets take twice the bytes"),
    # A draft-branch plan whose puts have no signal at all: each GPU may finish, and its
    # caller read the output, before the peer's data lands.
    "language_tests_allgather.json": ("mscclpp.in-flight-at-end",
                                      "without synchronisation before gpu"),
    # A draft-branch plan that puts right after the wait, with no nop: the block's other
    # threads may write the peer's output before its kernel starts.
    "pipeline.json": ("mscclpp.peer-start", "only the thread block's first threads"),
    # Plans with a chunk count of 0: the executor's checkMessageSize takes the message size
    # modulo it when it loads them, a division by zero (reference §4.6 #10).
    "execution-files__allreduce_pipeline.json": ("mscclpp.zero-chunks", "output_chunks is 0"),
    "allreduce_nvls_2.json": ("mscclpp.zero-chunks", "output_chunks is 0"),
    "ut_barrier_test.json": ("mscclpp.zero-chunks", "input_chunks is 0"),
    "ut_get_get_fuse_test.json": ("mscclpp.zero-chunks", "output_chunks is 0"),
}


def findings(path):
    return check_file(str(path)).findings


@pytest.mark.parametrize("path", corpus_params("mscclpp") + corpus_params("mscclpp/draft")
                         + DSL)
def test_real_plans_are_accepted_or_rejected_for_a_stated_reason(path):
    errors = [f for f in findings(path) if f.severity == "error"]
    if path.name not in REJECTED:
        assert not errors, errors[0]
        return
    rule, text = REJECTED[path.name]
    assert any(f.rule == rule and text in f.message for f in errors), errors


def test_the_dsl_classes_are_accepted_for_what_they_are():
    folder = corpus_root() / "mscclpp" / "dsl"
    if not folder.is_dir():
        pytest.skip(f"upstream corpus not found at {folder}")
    barrier = findings(folder / "ut_barrier_test.json")
    assert [(f.severity, f.rule, f.path) for f in barrier] == [
        ("error", "mscclpp.zero-chunks", "$.gpus[0].input_chunks"),
        ("error", "mscclpp.zero-chunks", "$.gpus[0].output_chunks")]
    # Both counts 0: refused by every executor, before and since checkMessageSize.
    assert all("must be greater than 0" in f.message for f in barrier)
    assert not findings(folder / "sn_allgather_pkt_rppkt_8gpus.json")
    fused = findings(folder / "ut_get_get_fuse_test.json")
    assert {(f.rule, f.path) for f in fused if f.severity == "error"} == {
        ("mscclpp.zero-chunks", f"$.gpus[{r}].output_chunks") for r in range(2)}
    # One count 0: only the current executor's message-size check divides by it.
    assert not any("must be greater than 0" in f.message for f in fused)


def test_one_source_rppkt_forwards_to_every_destination(planc, tmp_path):
    """The 8-GPU allgather forwards each packet chunk with one rppkt of 7 destinations: with
    all 7 the allgather is complete; with one destination fewer, a GPU waits for packets that
    never come."""
    path = corpus_root() / "mscclpp" / "dsl" / "sn_allgather_pkt_rppkt_8gpus.json"
    if not path.exists():
        pytest.skip(f"upstream corpus not found at {path}")
    report = planc("simulate", path, "--json").json()
    assert report["ok"] and report["postcondition"] == "satisfied"
    doc = json.loads(path.read_text())
    rppkt = next(op for op in doc["gpus"][0]["threadblocks"][0]["ops"] if op["name"] == "rppkt")
    rppkt["dst_buff"].pop()
    broken = findings(write_json(tmp_path / "short.json", doc))
    assert any(f.rule == "mscclpp.deadlock" and "never written" in f.message for f in broken)


def test_a_dropped_signal_in_the_reduce_plan_deadlocks(tmp_path):
    path = corpus_root() / "mscclpp" / "executor-tests__execution-plans__reduce.json"
    if not path.exists():
        pytest.skip(f"upstream corpus not found at {path}")
    doc = json.loads(path.read_text())
    ops = doc["gpus"][0]["threadblocks"][0]["ops"]
    first = next(i for i, op in enumerate(ops) if op["name"] == "signal")
    del ops[first]
    errors = [f for f in findings(write_json(tmp_path / "r.json", doc))
              if f.severity == "error"]
    assert errors and errors[0].rule == "mscclpp.deadlock"
    assert errors[0].path.startswith("$.gpus[1].threadblocks[0].ops[")
    assert "waits for signal" in errors[0].message


@pytest.mark.parametrize("collective, algorithms", [
    ("allreduce", ["ring", "allpairs", "oneshot", "nvls"]),
    ("allgather", ["ring", "allpairs", "nvls"]),
    ("reducescatter", ["ring", "allpairs"]),
    ("broadcast", ["ring"]),
    ("alltoall", ["allpairs"]),
])
@pytest.mark.parametrize("protocol", ["Simple", "LL"])
def test_every_synthesized_plan_passes_strict_check(planc, tmp_path, collective, algorithms,
                                                    protocol):
    for algorithm in algorithms:
        out = tmp_path / f"{collective}-{algorithm}-{protocol}.json"
        made = planc("--collective", collective, "--ranks", "4", "--algorithm", algorithm,
                     "--protocol", protocol, "-t", "mscclpp", "-o", out)
        if made.code:       # a combination the synthesizer does not offer is refused cleanly
            assert made.err.startswith("planc: error:") and made.err.count("\n") == 1
            continue
        result = planc("check", "--strict", out)
        assert result.code == 0, result.err


def test_signals_stay_paired_under_mutation(tmp_path):
    """A generated check: dropping any one signal of a correct plan is always an error."""
    from tests.mscclpp.fixtures import allgather_plan

    plan = allgather_plan()
    positions = [(g, t, i) for g, gpu in enumerate(plan["gpus"])
                 for t, tb in enumerate(gpu["threadblocks"])
                 for i, op in enumerate(tb["ops"]) if op["name"] == "signal"]
    assert positions
    for g, t, i in positions:
        doc = copy.deepcopy(plan)
        del doc["gpus"][g]["threadblocks"][t]["ops"][i]
        errors = [f for f in findings(write_json(tmp_path / "m.json", doc))
                  if f.severity == "error"]
        assert errors, (g, t, i)


# -- severities: an error is what the executor gets wrong, a warning legal but suspicious --------


def _by_rule(tmp_path, doc):
    found = findings(write_json(tmp_path / "plan.json", doc))
    return {(f.rule, f.severity, f.path) for f in found}


def test_a_zero_chunk_count_is_an_error_at_the_count(tmp_path):
    """An in-place allreduce whose output_chunks is 0 moves the right data, but the executor
    takes the message size modulo output_chunks when it loads the plan."""
    from tests.mscclpp.fixtures import allreduce_plan, mutated

    assert not findings(write_json(tmp_path / "good.json", allreduce_plan()))
    doc = mutated(allreduce_plan(), lambda p: p["gpus"][1].update(output_chunks=0))
    assert _by_rule(tmp_path, doc) == {
        ("mscclpp.zero-chunks", "error", "$.gpus[1].output_chunks")}


def test_an_unflushed_proxy_read_is_a_warning_at_the_put(tmp_path):
    """pws without a flush: the peer gets the data in order (the signal follows the put
    through the proxy's FIFO), only the caller must wait before overwriting the source."""
    from tests.mscclpp.fixtures import port_allgather_plan

    assert not findings(write_json(tmp_path / "good.json", port_allgather_plan("pwsf")))
    assert _by_rule(tmp_path, port_allgather_plan("pws")) == {
        ("mscclpp.unflushed-read", "warning", f"$.gpus[{r}].threadblocks[0].ops[3]")
        for r in range(2)}


def test_a_postcondition_failure_names_the_op_that_wrote_the_wrong_chunk(tmp_path):
    """rres replaced by a plain put on gpu 1: gpu 0's chunk 1 holds gpu 1's input alone. The
    finding names that put, not the document; gpu 1's own chunk, which nothing wrote, names
    gpu 1."""
    from tests.mscclpp.fixtures import allreduce_plan, mutated, ops_of

    def put_instead(p):
        op = ops_of(p, 1)[3]
        op.update(name="put", src_buff=op["src_buff"][:1], dst_buff=op["dst_buff"][1:])
        del op["reduce_op"]
    found = _by_rule(tmp_path, mutated(allreduce_plan(), put_instead))
    assert found == {("mscclpp.postcondition", "error", "$.gpus[1].threadblocks[0].ops[3]"),
                     ("mscclpp.postcondition", "error", "$.gpus[1]")}


def test_a_port_ppkt_moves_packets_as_packets(tmp_path):
    """The executor's handlePutPackets, on a port channel, has the proxy put `size << 1` raw
    bytes from `srcOffset << 1`: the packets cpkt wrote, flags included. Modelled like the
    memory branch (data in, packets out), the plan read its own packets as plain data (false
    races, and the peer's chunk was never seen to arrive). rppkt first waits for the packets
    itself; a raw ppkt does not, so the nop between cpkt and ppkt is what orders them."""
    from tests.mscclpp.fixtures import mutated, ops_of, port_packet_allgather_plan

    for put in ("ppkt", "rppkt"):
        assert not findings(write_json(tmp_path / f"{put}.json",
                                       port_packet_allgather_plan(put))), put
    no_nop = mutated(port_packet_allgather_plan("ppkt"), lambda p: ops_of(p, 0).pop(1))
    assert ("mscclpp.race", "error", "$.gpus[0].threadblocks[0].ops[1]") in \
        _by_rule(tmp_path, no_nop)
    assert not findings(write_json(tmp_path / "rppkt_no_nop.json", mutated(
        port_packet_allgather_plan("rppkt"), lambda p: ops_of(p, 0).pop(1))))

    def wrong_chunk(p):
        ops_of(p, 1)[2]["src_buff"][0]["index"] = 0    # the chunk gpu 0 puts there, not its own
    found = _by_rule(tmp_path, mutated(port_packet_allgather_plan("ppkt"), wrong_chunk))
    assert ("mscclpp.race", "error", "$.gpus[1].threadblocks[0].ops[2]") in found, found
    assert ("mscclpp.postcondition", "error", "$.gpus[0].threadblocks[1].ops[0]") in found
