"""The symbolic simulator: corpus plans pass, and broken plans are caught precisely."""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict

import pytest

from dialects.locations import verify_module
from frontends.mscclpp import import_document
from ground.json_reader import load_json_file, parse_json
from targets.mscclpp.check import check
from targets.mscclpp.program import expand, group_part
from targets.mscclpp.simulator import check_plan
from tests.conftest import corpus_params, write_json
from tests.mscclpp.fixtures import (
    allgather_plan,
    allreduce_plan,
    group_allgather_plan,
    mutated,
    ops_of,
)

OP_REFERENCE_TEXT = re.compile(r"gpu \d+ tb \d+ op \d+ \(\w+\)")

UPSTREAM_RACES = {
    # reduce_tbg.py signals per thread block, but each block of a group copies a different
    # part of the range: gpu 0's block 1 reads what gpu 1's block 0 copied, and only waited for
    # gpu 1's block 1. A real race in the upstream CI plan: the executor slices a group's op
    # per block (ExecutionPlan::calcOffset) and never synchronises the group's blocks
    # (executionKernel runs each block's ops alone; nop is __syncthreads). Each message says
    # which edge is missing.
    "executor-tests__execution-plans__reduce_tbg.json": [
        ("gpu 0 tb 0 op 7 (get) reads gpu 1 scratch bytes [32, 48) (chunk 1), written by gpu 1 "
         "tb 1 op 0 (copy), with no synchronisation between them",
         "gpu 0 tb 0 synchronises with gpu 1 tb 0 only before its op 7 (get), not with gpu 1 "
         "tb 1 after its op 0 (copy)"),
        ("gpu 1 tb 1 op 0 (copy) reads gpu 1 input/output bytes [32, 48) (chunk 1), written by "
         "gpu 0 tb 0 op 9 (res), with no synchronisation between them",
         "gpu 0 tb 0 synchronises with gpu 1 tb 0 only before its op 9 (res), not with gpu 1 "
         "tb 1 after its op 0 (copy)"),
        ("gpu 0 tb 1 op 6 (rres) reads gpu 1 scratch bytes [16, 32) (chunk 0), written by gpu 1 "
         "tb 0 op 0 (copy), with no synchronisation between them",
         "gpu 0 tb 1 synchronises with gpu 1 tb 1 only before its op 6 (rres), not with gpu 1 "
         "tb 0 after its op 0 (copy)"),
        ("gpu 1 tb 0 op 0 (copy) reads gpu 1 input/output bytes [16, 32) (chunk 0), written by "
         "gpu 0 tb 1 op 6 (rres), with no synchronisation between them",
         "gpu 0 tb 1 synchronises with gpu 1 tb 1 only before its op 6 (rres), not with gpu 1 "
         "tb 0 after its op 0 (copy)")],
}
# In-place plans the DSL wrote with output_chunks 0: their data flow is right, but the
# executor's checkMessageSize takes the output size modulo 0 when it loads them (§4.6 #10).
UPSTREAM_ZERO_CHUNKS = {"execution-files__allreduce_pipeline.json"}


def _check(doc):
    module = import_document(parse_json(json.dumps(doc)))
    verify_module(module)
    return check_plan(next(iter(module.ops)))


@pytest.mark.parametrize("path", corpus_params("mscclpp"))
def test_corpus_plans_satisfy_their_collective(path):
    algorithm = next(iter(import_document(load_json_file(path)).ops))
    report = check_plan(algorithm)
    assert report.postcondition == "satisfied"
    expected_races = UPSTREAM_RACES.get(path.name, [])
    races = report.errors["races"]
    assert len(races) == len(expected_races), races
    for message, (head, reason) in zip(races, expected_races, strict=True):
        assert message.startswith(f"{head}: {reason}; "), message
    zero = path.name in UPSTREAM_ZERO_CHUNKS
    assert all("output_chunks is 0" in m for m in report.errors["zero_chunks"])
    assert bool(report.errors["zero_chunks"]) == zero
    others = {k: v for k, v in report.errors.items() if k not in ("races", "zero_chunks")}
    assert not any(others.values()), others
    assert report.ok == (not expected_races and not zero)


@pytest.mark.parametrize("ranks", [2, 3, 5])
def test_fixtures_pass(ranks):
    for plan in (allgather_plan(ranks), allreduce_plan(ranks)):
        report = _check(plan)
        assert report.ok, report.errors
        assert report.postcondition == "satisfied"


# -- mutations of correct plans --------------------------------------------------------------


def test_dropped_signal_deadlocks_at_the_wait():
    plan = mutated(allgather_plan(), lambda p: ops_of(p, 0).pop(5))  # rank 0's final signal
    report = _check(plan)
    # The relaxed handshake signal was #1 on the same channel.
    assert report.errors["deadlocks"] == [
        "gpu 1 tb 0 op 6 (wait) waits for signal #2 from gpu 0 on memory channel #0 between "
        "them, which sends 1 in all"]
    assert report.postcondition.startswith("not checked")
    assert not report.ok


def test_dropped_signal_and_wait_leave_data_in_flight():
    def drop(p):
        del ops_of(p, 0)[5]  # rank 0 no longer signals after its put ...
        del ops_of(p, 1)[6]  # ... and rank 1 no longer waits for it
    report = _check(mutated(allgather_plan(), drop))
    assert report.postcondition == "satisfied"  # the data arrives, but nobody knows when
    assert report.errors["races"] == [
        "gpu 0 tb 0 op 3 (put) writes gpu 1 output bytes [0, 16) (chunk 0) without "
        "synchronisation before gpu 1 finishes: the caller may see (or overwrite) data still "
        "in flight"]


def test_wrong_offset_breaks_the_postcondition():
    plan = mutated(allgather_plan(3), lambda p: ops_of(p, 2)[3]["dst_buff"][1].update(index=0))
    report = _check(plan)
    # Which of the two racing puts lands last in chunk 0 depends on the schedule; chunk 2 is
    # never written in any. The race names first the put whose data the post-condition does
    # not want there (gpu 2's, the mistake), though the replay met gpu 0's second.
    assert report.errors["postcondition_failures"] == [
        "gpu 1 output chunk 2: expected input chunk 0 of gpu 2, found nothing (never written)"]
    assert report.errors["races"] == [
        "gpu 2 tb 0 op 3 (put) writes gpu 1 output bytes [0, 16) (chunk 0), written by gpu 0 "
        "tb 0 op 3 (put), with no synchronisation between them"]


def test_missing_reduce_is_caught():
    def put_instead(p):
        op = ops_of(p, 1)[3]
        op.update(name="put", src_buff=op["src_buff"][:1], dst_buff=op["dst_buff"][1:])
        del op["reduce_op"]
    report = _check(mutated(allreduce_plan(), put_instead))
    assert report.errors["postcondition_failures"] == [
        "gpu 0 output chunk 1: expected the sum of input chunk 1 of gpus 0, 1, found input "
        "chunk 1 of gpu 1 (last written by gpu 1 tb 0 op 3 (put))",
        "gpu 1 output chunk 1: expected the sum of input chunk 1 of gpus 0, 1, found input "
        "chunk 1 of gpu 1"]


def test_double_counting_is_caught():
    def reduce_twice(p):
        op = ops_of(p, 0)[3]
        op["src_buff"].append(op["src_buff"][1])
    report = _check(mutated(allreduce_plan(), reduce_twice))
    assert report.errors["postcondition_failures"][0] == (
        "gpu 0 output chunk 0: expected the sum of input chunk 0 of gpus 0, 1, found the sum "
        "of input chunk 0 of gpus 0, 1 (x2) (last written by gpu 0 tb 0 op 3 (rres))")


def test_missing_nop_between_put_and_signal_is_a_race():
    report = _check(mutated(allgather_plan(), lambda p: ops_of(p, 0).pop(4)))
    assert report.errors["races"] == [
        "gpu 0 tb 0 op 3 (put) writes gpu 1 output bytes [0, 16) (chunk 0) without "
        "synchronisation before gpu 1 finishes: the caller may see (or overwrite) data still "
        "in flight"]


def test_unbalanced_signals_are_reported():
    plan = mutated(allgather_plan(), lambda p: ops_of(p, 0).insert(5, ops_of(p, 0)[5]))
    report = _check(plan)
    assert report.errors["unbalanced"] == [
        "gpu 0 sends 3 signals on memory channel #0 to gpu 1, which waits 2 times: the next "
        "launch would start with a stale signal"]


def test_barrier_and_semaphores_order_thread_blocks():
    """Two blocks on each rank: block 0 handshakes with the peer, block 1 puts after it
    (semaphore 1), block 0 signals after the put (semaphore 0). Without the semaphores,
    block 0's signal does not cover block 1's put."""
    def split(p, with_semaphore: bool):
        for rank in range(2):
            gpu = p["gpus"][rank]
            tb0 = gpu["threadblocks"][0]
            put = tb0["ops"].pop(3)
            tb0["ops"].pop(3)  # its nop
            before = [{"name": "sem_acquire", "semaphore_ids": [1]}, {"name": "nop"}]
            after = [{"name": "nop"}, {"name": "sem_release", "semaphore_ids": [0]}]
            tb1 = {"id": 1, "ops": (before + [put] + after) if with_semaphore else [put],
                   "channels": [], "remote_buffer_refs": tb0["remote_buffer_refs"]}
            gpu["threadblocks"].append(tb1)
            if with_semaphore:
                tb0["ops"][3:3] = [{"name": "sem_release", "semaphore_ids": [1]},
                                   {"name": "sem_acquire", "semaphore_ids": [0]}]
                gpu["semaphores"] = [{"init_value": 0}, {"init_value": 0}]
        for rank in range(2):
            tb1 = p["gpus"][rank]["threadblocks"][1]
            next(op for op in tb1["ops"] if op["name"] == "put")["channel_type"] = "memory"
    good = _check(mutated(allgather_plan(), lambda p: split(p, True)))
    assert good.ok, good.errors
    bad = _check(mutated(allgather_plan(), lambda p: split(p, False)))
    assert [m.split(" writes")[0] for m in bad.errors["races"]] == [
        "gpu 0 tb 1 op 0 (put)", "gpu 1 tb 1 op 0 (put)"]
    assert [m.split(" writes")[0] for m in bad.errors["before_start"]] == [
        "gpu 0 tb 1 op 0 (put)", "gpu 1 tb 1 op 0 (put)"]


def _ordered_pairs_by_hand(plan) -> set[frozenset[str]]:
    """The racing op pairs of a `group_allgather_plan`, by a second, simpler route: a
    happens-before graph of whole ops (program order, the n-th signal of block t to the n-th
    wait of the peer's block t, a barrier joining its blocks) and every pair of accesses to
    overlapping bytes, one a write, that no path orders. Bytes by hand: a chunk is 32 bytes,
    a 1-chunk slice of block t is half t of it, a 2-chunk slice is chunk t of the two."""
    edges: dict[tuple, set[tuple]] = defaultdict(set)
    sent: dict[tuple, list[tuple]] = defaultdict(list)
    waited: dict[tuple, list[tuple]] = defaultdict(list)
    barriers: dict[int, list[tuple]] = defaultdict(list)
    accesses = []  # (op node, gpu, space, start, end, writes)
    for rank, gpu in enumerate(plan["gpus"]):
        for tb, block in enumerate(gpu["threadblocks"]):
            for index, op in enumerate(block["ops"]):
                node = (rank, tb, index, op["name"])
                if index:
                    edges[(rank, tb, index - 1, block["ops"][index - 1]["name"])].add(node)
                if op["name"] == "signal":
                    sent[(rank, tb)].append(node)
                elif op["name"] == "wait":
                    waited[(1 - rank, tb)].append(node)
                elif op["name"] == "barrier":
                    barriers[rank].append(node)
                for verb, refs in (("src", op.get("src_buff", [])), ("dst", op.get("dst_buff", []))):
                    for ref in refs:
                        owner = 1 - rank if "buffer_id" in ref else rank
                        space = "s" if "buffer_id" in ref else ref["type"]
                        half = 32 * ref["size"] // 2
                        start = 32 * ref["index"] + tb * half
                        accesses.append((node, owner, space, start, start + half, verb == "dst"))
    for key, signals in sent.items():
        for signal, wait in zip(signals, waited[key], strict=True):
            edges[signal].add(wait)
    for members in barriers.values():
        for a in members:
            edges[a].update(m for m in members if m != a)

    def reaches(a, b) -> bool:
        seen, todo = {a}, [a]
        while todo:
            for n in edges[todo.pop()] - seen:
                seen.add(n)
                todo.append(n)
        return b in seen

    races = set()
    for x, y in itertools.combinations(accesses, 2):
        if x[0] != y[0] and x[1:3] == y[1:3] and x[3] < y[4] and y[3] < x[4] and \
                (x[5] or y[5]) and not reaches(x[0], y[0]) and not reaches(y[0], x[0]):
            races.add(frozenset(f"gpu {n[0]} tb {n[1]} op {n[2]} ({n[3]})" for n in (x[0], y[0])))
    return races


def test_group_slices_signalled_pairwise_race_and_the_message_says_why():
    """`reduce_tbg`'s shape: a group's blocks signal their own peer blocks only, so a block
    that reads the peer's slice made by another block races with it (the executor has no
    group barrier, see `UPSTREAM_RACES`). A barrier over the group after the copy passes
    both blocks' copies on through either block's signal: no race."""
    plan = group_allgather_plan()
    report = _check(plan)
    assert report.postcondition == "satisfied"  # in the replay's order the data is right
    found = {frozenset(OP_REFERENCE_TEXT.findall(m)[:2]) for m in report.errors["races"]}
    assert found == _ordered_pairs_by_hand(plan) and len(found) == 4, found
    assert report.errors["races"][0] == (
        "gpu 1 tb 0 op 6 (get) reads gpu 0 scratch bytes [32, 48) (chunk 1), written by gpu 0 "
        "tb 1 op 0 (copy), with no synchronisation between them: gpu 1 tb 0 synchronises with "
        "gpu 0 tb 0 only before its op 6 (get), not with gpu 0 tb 1 after its op 0 (copy); "
        "the executor runs the slices of a thread-block group's op with no synchronisation "
        "between the group's blocks, so a block's signal covers its own slice only (a barrier "
        "over the group, or a signal, semaphore or barrier path from gpu 0 tb 1 after op 0 to "
        "gpu 1 tb 0 before op 6, would order them)")
    module = import_document(parse_json(json.dumps(plan)))
    assert {(f.rule, f.severity) for f in check(module)} == {("mscclpp.tbg-race", "warning")}

    synchronised = group_allgather_plan(barrier=True)
    assert _ordered_pairs_by_hand(synchronised) == set()
    report = _check(synchronised)
    assert report.ok and report.postcondition == "satisfied", report.errors


def test_out_of_place_input_overwrites_are_warned():
    def out_of_place(p):
        p["inplace"] = False
        for rank in range(2):
            ops = ops_of(p, rank)
            ops[3]["src_buff"][0].update(type="i", index=0)
            ops.insert(3, {"name": "copy", "src_buff": [{"type": "i", "index": 0, "size": 1}],
                           "dst_buff": [{"type": "o", "index": rank, "size": 1}]})
            ops.insert(4, {"name": "nop"})
            ops.append({"name": "copy", "src_buff": [{"type": "o", "index": 0, "size": 1}],
                        "dst_buff": [{"type": "i", "index": 0, "size": 1}]})
    report = _check(mutated(allgather_plan(), out_of_place))
    assert report.ok and report.postcondition == "satisfied"
    assert report.warnings == [
        "gpu 0 tb 0 op 10 (copy) writes the input of gpu 0, which an out-of-place collective "
        "should leave unchanged",
        "gpu 1 tb 0 op 10 (copy) writes the input of gpu 1, which an out-of-place collective "
        "should leave unchanged"]


def test_thread_block_groups_split_like_the_executor():
    # calcOffset: 5 aligned units over 2 parts -> 3 + 2, the first part the longer one.
    assert [group_part(5 * 16, part, 2, 16) for part in range(2)] == [(0, 48), (48, 32)]
    assert [group_part(64, part, 4, 16) for part in range(4)] == [
        (0, 16), (16, 16), (32, 16), (48, 16)]


def test_pipeline_windows_and_packets_expand_like_the_executor():
    plan = allgather_plan()
    for rank in range(2):
        ops = ops_of(plan, rank)
        ops[3] = {"name": "pipeline", "iter_context": {"unit_size": 64, "num_chunks": 1},
                  "ops": [ops[3]]}
    module = import_document(parse_json(json.dumps(plan)))
    program = expand(next(iter(module.ops)), 160)
    puts = [s for s in program.blocks[(0, 0)] if s.name == "put"]
    assert [(r.start, r.size) for s in puts for r in s.writes()] == [(0, 64), (64, 64),
                                                                      (128, 32)]
    assert _check(plan).ok


def test_simulate_cli_reports_and_exits(planc, tmp_path):
    good = write_json(tmp_path / "good.json", allreduce_plan())
    result = planc("simulate", good, "--json", "--message-size", "64K")
    assert result.code == 0
    report = result.json()
    assert report["ok"] and report["postcondition"] == "satisfied"
    assert report["message_size"] == 65536 and report["modeled_time_s"] > 0
    # 2 chunks of 32 KB in and out (in place: once), no scratch.
    assert report["device_bytes"] == 65536 and report["max_abs_error"] == 0.0
    bad = write_json(tmp_path / "bad.json", mutated(allgather_plan(),
                                                    lambda p: ops_of(p, 0).pop(5)))
    result = planc("simulate", bad)
    assert result.code == 1
    assert "FAILED" in result.out and "waits for signal #2 from gpu 0" in result.out
    result = planc("simulate", good, "--message-size", "1000")
    assert result.code == 1
    assert result.err == (f"planc: error: {good}: message size 1000 is not a multiple of 2 "
                          "chunks x buffer_alignment 16: run it on buffers padded to 1024 "
                          "bytes\n")


def test_port_channels_publish_puts_through_the_proxy():
    from tests.mscclpp.fixtures import port_allgather_plan

    good = _check(port_allgather_plan("pwsf"))
    assert good.ok and good.postcondition == "satisfied", good.errors
    # Without the flush, the peer learns of the data (the signal follows the put through the
    # proxy), but the sender may return while its proxy still reads the source: the result is
    # right, the hazard is the caller's after the kernel (a warning, not an error).
    report = _check(port_allgather_plan("pws"))
    assert report.postcondition == "satisfied" and report.ok, report.errors
    assert report.warnings == [
        f"gpu {r} tb 0 op 3 (pws): its port channel's proxy reads gpu {r} output bytes "
        f"[{16 * r}, {16 * r + 16}) (chunk {r}) with no flush before gpu {r} finishes: the "
        "caller may overwrite the source after the kernel returns while the proxy still reads "
        "it (flush the channel, or use pwsf)" for r in range(2)]


def test_executor_quirks_are_reproduced_and_warned():
    def pws_on_memory(p):
        for rank in range(2):
            ops = ops_of(p, rank)
            ops[3].update(name="pws", channel_ids=[0])
            del ops[4:6]  # its nop and its signal: the pws should signal, but cannot
    report = _check(mutated(allgather_plan(), pws_on_memory))
    assert report.warnings[0] == (
        "gpu 0 tb 0 op 3 (pws): pws on a memory channel only puts: the executor drops the "
        "signal (§4.6 #4)")
    assert report.errors["deadlocks"]  # so the waits for that signal never return

    def skewed_get(p):
        p["collective"] = "test"
        op = {"name": "get", "channel_ids": [0], "channel_type": "memory",
              "src_buff": [{"buffer_id": 0, "index": 1, "size": 1}],
              "dst_buff": [{"type": "o", "index": 0, "size": 1}]}
        ops_of(p, 0).append(op)
    report = _check(mutated(allgather_plan(), skewed_get))
    assert report.warnings == [
        "gpu 0 tb 0 op 8 (get): the executor swaps get's source and destination offsets "
        "(handleGet, §4.6 #1); with different indices it copies other chunks"]
    assert report.postcondition == ("not checked: no post-condition is defined for collective "
                                    "'test'")


def test_the_seed_documents_own_example_is_out_of_range(planc, tmp_path):
    """The seed's allgather example has rank 1 put input chunk 1 of a 1-chunk input."""
    def gpu(rank):
        return {"id": rank, "inputChunks": 1, "outputChunks": 2, "scratchChunks": 0,
                "threadblocks": [{"id": 0, "ops": [
                    {"name": "put", "src_buff": [{"type": "i", "offset": rank, "size": 1}],
                     "dst_buff": [{"buff_id": 0, "offset": rank, "size": 1}],
                     "cids": [0], "ctype": "memory"}],
                    "channels": [{"ctype": "memory", "cids": [0]}], "remoteBuffersIds": [0]}],
                "channels": [{"type": "memory", "connectedTo": [1 - rank]}],
                "remoteBuffers": [{"rank": 1 - rank, "type": "i", "infoLocation": "gpu"}]}
    path = write_json(tmp_path / "seed_example.json",
                      {"name": "allgather", "collective": "allgather", "protocol": "Simple",
                       "inplace": True, "gpus": [gpu(0), gpu(1)]})
    result = planc("check", path)
    assert result.err == (f"planc: error: {path}: $.gpus[1].threadblocks[0].ops[0]: "
                          "src_buff[0] i[1:2]: chunks [1, 2) exceed the 1 chunks of the input "
                          "of gpu 1 [mscclpp.put]\n")


def test_a_group_of_one_block_is_no_group():
    """`tbg_info` with `tbg_size` 1 gives the block the whole op (`calcOffset` of part 0 of 1),
    so its races are ordinary errors, as without `tbg_info`, not the group slicing's warning
    (which a group of one had turned them into)."""
    def group_of_one(p, info):
        for gpu in p["gpus"]:
            for tb in gpu["threadblocks"]:
                for op in tb["ops"]:
                    if "tbg_info" in op:
                        op.pop("tbg_info")
                        if info is not None:
                            op["tbg_info"] = info

    def findings(info):
        plan = mutated(group_allgather_plan(), lambda p: group_of_one(p, info))
        return sorted((f.rule, f.severity, f.message) for f in
                      check(import_document(parse_json(json.dumps(plan)))))

    alone = findings({"tb_id": 0, "tbg_size": 1})
    assert alone and {rule for rule, _, _ in alone} == {"mscclpp.race"}
    assert alone == findings(None)
