"""`planc check` on MSCCL++ plans: generated families of realistic mistakes, each rejected with
its rule at the op where it is, beside look-alike legal edits that pass (issue 25).

The plans are the DSL-shaped allgather and allreduce of `tests.mscclpp.fixtures` on 2 to 4
GPUs; what each mistake breaks is said from the collective's definition (which chunk each GPU
must end with), not read back from the checker."""

from __future__ import annotations

import pytest

from compiler.checking import check_file
from tests.conftest import write_json
from tests.mscclpp.fixtures import allgather_plan, allreduce_plan, mutated, ops_of

PLANS = [(make, ranks) for make in (allgather_plan, allreduce_plan) for ranks in (2, 3, 4)]
PUT = 3
"""Position of each GPU's data op (put, or rres for the allreduce) in its thread block."""


def _found(tmp_path, doc, *options) -> set[tuple[str, str, str]]:
    path = write_json(tmp_path / "plan.json", doc)
    if options:
        from backends import make_options

        report = check_file(str(path), make_options("check", **dict(options)))
    else:
        report = check_file(str(path))
    return {(f.rule, f.severity, f.path) for f in report.findings}


def _op_path(rank: int, position: int) -> str:
    return f"$.gpus[{rank}].threadblocks[0].ops[{position}]"


def test_the_plans_pass(tmp_path):
    for make, ranks in PLANS:
        assert _found(tmp_path, make(ranks)) == set(), (make.__name__, ranks)


@pytest.mark.parametrize("side", ["dst_buff", "src_buff"])
def test_a_wrong_chunk_fails_the_postcondition_and_names_the_op(tmp_path, side):
    """GPU g's put (or rres) reads or writes chunk g+1 instead of its own chunk g at one peer
    (an off-by-one in the chunk index): some GPU ends with a wrong chunk, and the race the
    stray access makes is reported at g's op, the one that is wrong."""
    mistakes = 0
    for make, ranks in PLANS:
        for g in range(ranks):
            def wrong(p, g=g, ranks=ranks):
                ops_of(p, g)[PUT][side][-1 if side == "dst_buff" else 0]["index"] = \
                    (g + 1) % ranks
            found = _found(tmp_path, mutated(make(ranks), wrong))
            rules = {rule for rule, _, _ in found}
            assert "mscclpp.postcondition" in rules, (make.__name__, ranks, g, found)
            assert ("mscclpp.race", "error", _op_path(g, PUT)) in found, \
                (make.__name__, ranks, g, found)
            mistakes += 1
    assert mistakes >= 18


def test_a_missing_fence_is_a_peer_start_error_at_the_access(tmp_path):
    """The wait (or the nop after it) that orders a GPU's first remote access after its peers'
    kernels started is dropped: the access is reported."""
    mistakes = 0
    for make, ranks in PLANS:
        for g in range(ranks):
            for dropped in (1, 2):        # the rlxwait, the nop after it
                doc = mutated(make(ranks), lambda p, g=g, i=dropped: ops_of(p, g).pop(i))
                found = _found(tmp_path, doc)
                assert ("mscclpp.peer-start", "error", _op_path(g, PUT - 1)) in found, found
                mistakes += 1
    assert mistakes >= 36


def test_a_missing_final_wait_leaves_the_peers_data_in_flight(tmp_path):
    """GPU g no longer waits for its peers' signals after their puts: g may finish (and its
    caller read the output) before their data lands. Each peer's put is reported."""
    for make, ranks in PLANS:
        for g in range(ranks):
            doc = mutated(make(ranks), lambda p, g=g: ops_of(p, g).pop(6))
            found = _found(tmp_path, doc)
            for peer in range(ranks):
                if peer != g:
                    assert ("mscclpp.in-flight-at-end", "error", _op_path(peer, PUT)) in found


def test_look_alikes_pass(tmp_path):
    for make, ranks in PLANS:
        plan = make(ranks)
        # Renamed plan; remote buffers listed in reverse with every reference renumbered.
        renamed = mutated(plan, lambda p: p.update(name="renamed_" + p["name"]))
        assert _found(tmp_path, renamed) == set()

        def reverse_remote(p):
            for gpu in p["gpus"]:
                count = len(gpu["remote_buffers"])
                gpu["remote_buffers"].reverse()
                for tb in gpu["threadblocks"]:
                    for op in tb["ops"]:
                        for key in ("src_buff", "dst_buff"):
                            for ref in op.get(key, []):
                                if "buffer_id" in ref:
                                    ref["buffer_id"] = count - 1 - ref["buffer_id"]
        assert _found(tmp_path, mutated(plan, reverse_remote)) == set()

        # The data op's peers in another order (its reads and writes permuted together).
        def permute(p):
            for g in range(len(p["gpus"])):
                op = ops_of(p, g)[PUT]
                head = 1 if op["name"] == "rres" else 0
                for key in ("src_buff", "dst_buff"):
                    op[key][head:] = list(reversed(op[key][head:]))
        assert _found(tmp_path, mutated(plan, permute)) == set()


def _scratch_bytes(gpu: dict, message: int, plan: dict) -> int:
    """The executor's calScratchBufferSize, written out from its definition."""
    chunk = -(-message // gpu["input_chunks"])
    size = chunk * gpu["scratch_chunks"] * (2 if plan["protocol"] == "LL" else 1)
    size *= 2 if plan.get("use_double_scratch_buffer") else 1
    return size


def test_scratch_beyond_the_device_at_the_largest_message_is_an_error(tmp_path):
    """An in-place LL allreduce with a double scratch buffer, bounded to messages of 1 GiB
    (2 input chunks of 512 MiB): 16 scratch chunks take 32 GiB and fit an 80 GB a100 beside
    the input; 40 take 80 GiB and do not, so the executor's allocation fails for the largest
    message the plan accepts."""
    a100 = 85899345920
    for scratch, bad in ((16, False), (40, True)):
        plan = allreduce_plan(2)
        plan.update(protocol="LL", use_double_scratch_buffer=True, max_message_size=1 << 30,
                    inplace=True)
        for gpu in plan["gpus"]:
            gpu["scratch_chunks"] = scratch
        need = [_scratch_bytes(gpu, 1 << 30, plan) + (1 << 30) for gpu in plan["gpus"]]
        assert (max(need) > a100) == bad
        found = {f for f in _found(tmp_path, plan, ("arch", "a100"))
                 if f[0] == "mscclpp.device-memory"}
        expected = {("mscclpp.device-memory", "error", f"$.gpus[{r}].scratch_chunks")
                    for r in range(2)} if bad else set()
        assert found == expected
        # Unbounded messages are sized per call: nothing to check.
        plan["max_message_size"] = 2**64 - 1
        assert not {f for f in _found(tmp_path, plan, ("arch", "a100"))
                    if f[0] == "mscclpp.device-memory"}
