"""Importing MSCCL++ plans: schemas, legacy spellings, and one-line errors for bad input."""

from __future__ import annotations

import json

import pytest

from backends.mscclpp import emit_algorithm
from dialects import mscclpp as ms
from dialects.locations import verify_module
from frontends.mscclpp import detect_schema, import_document
from ground.json_reader import parse_json
from tests.conftest import write_json
from tests.mscclpp.fixtures import allgather_plan, mutated, ops_of


def _module(doc):
    module = import_document(parse_json(json.dumps(doc)))
    verify_module(module)
    return module


def _algorithm(doc) -> ms.AlgorithmOp:
    return next(iter(_module(doc).ops))


def test_fixture_imports_into_the_ir_it_describes():
    algorithm = _algorithm(allgather_plan(3))
    assert (algorithm.collective_name, algorithm.num_ranks, algorithm.alignment) == \
        ("allgather", 3, 16)
    gpu = algorithm.gpus()[2]
    assert gpu.channel_ends("memory") == [0, 1]
    assert [b.rank_id for b in gpu.remote_buffers()] == [0, 1]
    ops = gpu.threadblocks()[0].ops()
    assert [type(op) for op in ops[:4]] == [ms.RelaxedSignalOp, ms.RelaxedWaitOp, ms.NopOp,
                                            ms.PutOp]
    assert [r.describe() for r in ops[3].destinations] == ["remote 0[2:3]", "remote 1[2:3]"]


def test_unknown_fields_survive_everywhere():
    def add_unknowns(p):
        p["vendor"] = {"x": [1, None]}
        p["gpus"][0]["note"] = "gpu"
        ops_of(p, 0)[3]["src_buff"][0]["hint"] = 7
        ops_of(p, 0)[0]["future"] = True
        p["gpus"][0]["threadblocks"][0]["channels"][0]["buff"] = "o"

    doc = mutated(allgather_plan(), add_unknowns)
    for schema in ("executor", "seed"):
        text = emit_algorithm(_module(doc), schema)
        again = emit_algorithm(import_document(parse_json(text)), "executor")
        assert json.loads(again) == doc


def test_seed_schema_reads_the_seed_documents_own_spellings():
    """The seed document's allgather example (made valid JSON): camelCase GPU keys,
    rsignal/rwait, `cids` written as {"id": n} objects, buff_id and offset in references."""
    def gpu(rank):
        peer = 1 - rank
        return {"id": rank, "inputChunks": 1, "outputChunks": 2, "scratchChunks": 0,
                "threadblocks": [{"id": 0, "ops": [
                    {"name": "rsignal", "cids": [0], "ctype": "memory"},
                    {"name": "rwait", "cids": [{"id": 0}], "ctype": "memory"},
                    {"name": "put", "src_buff": [{"type": "i", "offset": rank, "size": 1}],
                     "dst_buff": [{"buff_id": 0, "offset": rank, "size": 1}],
                     "cids": [0], "ctype": "memory"},
                    {"name": "signal", "cids": [0], "ctype": "memory"},
                    {"name": "wait", "cids": [0], "ctype": "memory"}],
                    "channels": [{"ctype": "memory", "cids": [0]}], "remoteBuffersIds": [0]}],
                "channels": [{"type": "memory", "connectedTo": [peer]}],
                "remoteBuffers": [{"rank": peer, "type": "i", "infoLocation": "gpu"}],
                "bufferAlignment": 4}

    doc = {"name": "allgather", "collective": "allgather", "protocol": "Simple",
           "inplace": True, "gpus": [gpu(0), gpu(1)]}
    assert detect_schema(parse_json(json.dumps(doc))) == "seed"
    module = import_document(parse_json(json.dumps(doc)))
    algorithm = next(iter(module.ops))
    assert algorithm.alignment == 4
    tb = algorithm.gpus()[1].threadblocks()[0]
    assert tb.remote_buffer_ids("memory") == [0]
    assert algorithm.gpus()[1].remote_buffers()[0].access_types == ["memory"]
    ops = tb.ops()
    assert isinstance(ops[0], ms.RelaxedSignalOp) and ops[1].channel_list == [0]
    executor = json.loads(emit_algorithm(module, "executor"))
    assert executor["buffer_alignment"] == 4
    assert executor["gpus"][1]["remote_buffers"][0]["access_channel_types"] == ["memory"]
    assert executor["gpus"][1]["threadblocks"][0]["remote_buffer_refs"] == [
        {"access_channel_type": "memory", "remote_buffer_ids": [0]}]
    assert [op["name"] for op in executor["gpus"][0]["threadblocks"][0]["ops"]][:2] == \
        ["rlxsignal", "rlxwait"]
    seed = json.loads(emit_algorithm(module, "seed"))
    seed["gpus"][0]["threadblocks"][0]["ops"][1]["cids"] = [{"id": 0}]
    seed["gpus"][1]["threadblocks"][0]["ops"][1]["cids"] = [{"id": 0}]
    assert seed == doc  # the {"id": n} form is read, and written back as plain ids


def test_legacy_op_names_keep_their_meaning_and_spelling():
    """Before the 2025-08 renames `tpkt` was today's cpkt and `cpkt` today's upkt."""
    doc = allgather_plan()
    doc["protocol"] = "LL"
    for rank in range(2):
        doc["gpus"][rank]["scratch_chunks"] = 2
        doc["gpus"][rank]["threadblocks"][0]["ops"] = [
            {"name": "tpkt", "src_buff": [{"type": "o", "index": rank, "size": 1}],
             "dst_buff": [{"type": "s", "index": 0, "size": 1}]},
            {"name": "cpkt", "src_buff": [{"type": "s", "index": 0, "size": 1}],
             "dst_buff": [{"type": "o", "index": rank, "size": 1}]}]
    module = _module(doc)
    ops = next(iter(module.ops)).gpus()[0].threadblocks()[0].ops()
    assert [type(op) for op in ops] == [ms.CopyPacketsOp, ms.UnpackPacketsOp]
    assert json.loads(emit_algorithm(module, "executor")) == doc
    seed = json.loads(emit_algorithm(module, "seed"))
    assert [op["name"] for op in seed["gpus"][0]["threadblocks"][0]["ops"]] == ["cpkt", "upkt"]


BAD_INPUTS = {
    "unknown_op": (lambda p: ops_of(p, 1).__setitem__(3, {"name": "glre"}),
                   '$.gpus[1].threadblocks[0].ops[3].name: unknown operation "glre": the '
                   "executor's operation table has no such operation and refuses the plan when "
                   'it parses it ("Invalid operation type"; the executor schema has nop, '
                   "barrier, put, pws, pwsf, get, copy, signal, wait, flush, re, res, rre, "
                   "rres, ppkt, rppkt, respkt, cpkt, upkt, repkt, recpkt, "
                   "recspkt, glres, gstore, gstorepkt, rlxsignal, rlxwait, pipeline, "
                   "sem_acquire or sem_release)"),
    "two_kinds": (lambda p: ops_of(p, 0)[3]["dst_buff"][0].__setitem__("type", "o"),
                  "$.gpus[0].threadblocks[0].ops[3].dst_buff[0]: a buffer reference has "
                  "exactly one of type, buffer_id or switch_channel_id, got 2"),
    "channel_range": (lambda p: ops_of(p, 0)[5].__setitem__("channel_ids", [3]),
                      "$.gpus[0].threadblocks[0].ops[5]: channel_ids names memory channel 3, "
                      "but thread block 0 lists 1"),
    "local_range": (lambda p: ops_of(p, 1)[3]["src_buff"][0].__setitem__("index", 2),
                    "$.gpus[1].threadblocks[0].ops[3]: src_buff[0] o[2:3]: chunks [2, 3) "
                    "exceed the 2 chunks of the output of gpu 1"),
    "remote_range": (lambda p: [r.__setitem__("index", 2) for r in
                                ops_of(p, 0)[3]["src_buff"] + ops_of(p, 0)[3]["dst_buff"]],
                     "$.gpus[0].threadblocks[0].ops[3]: src_buff[0] o[2:3]: chunks [2, 3) "
                     "exceed the 2 chunks of the output of gpu 0"),
    "gpu_id": (lambda p: p["gpus"][1].__setitem__("id", 0),
               "$.gpus[1]: gpu id 0 must equal its position 1 in gpus"),
    "missing_key": (lambda p: p["gpus"][0].pop("scratch_chunks"),
                    "$.gpus[0]: missing required key 'scratch_chunks'"),
    "letter": (lambda p: ops_of(p, 0)[3]["src_buff"][0].__setitem__("type", "x"),
               '$.gpus[0].threadblocks[0].ops[3].src_buff[0].type: expected i, o or s, got "x"'),
    "protocol": (lambda p: p.__setitem__("protocol", "LL128"),
                 '$: protocol must be "Simple" or "LL", got "LL128"'),
    "self_channel": (lambda p: p["gpus"][0]["channels"][0].__setitem__("connected_to", [0]),
                     "$.gpus[0].channels[0]: gpu 0 has a memory channel to itself"),
    "form": (lambda p: ops_of(p, 0)[3].__setitem__("dst_buff",
                                                   [{"type": "o", "index": 1, "size": 1}]),
             "$.gpus[0].threadblocks[0].ops[3]: put dst_buff[0] must be a remote buffer "
             "(buffer_id), got o[1:2]"),
    "sizes": (lambda p: ops_of(p, 0)[3]["dst_buff"][0].__setitem__("size", 2),
              "$.gpus[0].threadblocks[0].ops[3]: put moves chunk ranges of different sizes "
              "(o[0:1] -> remote 0[0:2])"),
    "semaphore": (lambda p: ops_of(p, 0).append({"name": "sem_acquire", "semaphore_ids": [0]}),
                  "$.gpus[0].threadblocks[0].ops[8]: semaphore 0 is not declared (gpu 0 has 0 "
                  "semaphores)"),
    "barrier": (lambda p: ops_of(p, 0).append({"name": "barrier", "barrier_id": 0,
                                               "num_threadblocks": 2}),
                "$.gpus[0].threadblocks[0].ops[8]: barrier over 2 thread blocks, but gpu 0 "
                "has 1"),
    "too_many_ops": (lambda p: ops_of(p, 0).extend([{"name": "nop"}] * 60),
                     "$.gpus[0].threadblocks[0]: thread block 0 has 68 device operations; the "
                     "executor allows 64 (a pipeline counts 1 plus its inner ops)"),
    "access": (lambda p: p["gpus"][0]["threadblocks"][0]["remote_buffer_refs"][0].__setitem__(
        "access_channel_type", "port"),
        "$.gpus[0].threadblocks[0]: thread block 0 reaches remote buffer 0 through port "
        "channels, which it does not list in access_channel_types"),
    "zero_chunks": (lambda p: p["gpus"][0].update(input_chunks=0, output_chunks=0),
                    "$.gpus[0].threadblocks[0].ops[3]: input_chunks and output_chunks are both "
                    "0, so the executor has no chunk size for this op's input or output buffer"),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_one_line_with_its_path(planc, tmp_path, case):
    edit, message = BAD_INPUTS[case]
    path = write_json(tmp_path / f"{case}.json", mutated(allgather_plan(), edit))
    out = tmp_path / "out.json"
    out.write_text("what the user had")
    result = planc(path, "--target", "mscclpp", "-o", out)
    assert result.code == 1
    assert result.err == f"planc: error: {path}: {message}\n"
    assert out.read_text() == "what the user had"
    check = planc("check", path)          # every finding, one a line, the first the same
    assert check.code == 1 and all(line.startswith(f"planc: error: {path}: ")
                                   for line in check.err.splitlines())
    assert check.err.startswith(f"planc: error: {path}: {message} [")     # then its rule


def test_seed_alignment_must_be_one_value(planc, tmp_path):
    seed = json.loads(emit_algorithm(_module(allgather_plan()), "seed"))
    seed["gpus"][1]["bufferAlignment"] = 32
    path = write_json(tmp_path / "seed.json", seed)
    result = planc("check", path)
    assert result.code == 1
    assert result.err == (f"planc: error: {path}: $.gpus[1].bufferAlignment: bufferAlignment "
                          "32 differs from 16 at $.gpus[0].bufferAlignment; the executor has "
                          "one alignment per plan [format]\n")
