"""Messages of any size: the executor cuts a message into chunks of a multiple of
`buffer_alignment` bytes, so planc runs other sizes on padded buffers and says how
(`planc_message`, `planc_buffers[].padded_bytes`). Each padded plan is proven by the symbolic
simulator at the padded size; the padding is checked against a scan for the least size the
plan takes."""

from __future__ import annotations

import json

import pytest

from backends.ark_model import emit_model
from frontends.collective_models import all_reduce_models, ring_shift_models
from targets.mscclpp.cost import message_chunks, padded_message, padding_note
from targets.mscclpp.lowering import Choice, lower_models
from targets.mscclpp.program import expand
from targets.mscclpp.simulator import _cell_bytes, check_plan
from targets.mscclpp.synthesis import ALGORITHMS, Spec, synthesize, variants
from tests.conftest import diagonal

SIZES = list(range(1, 65)) + [420, 516, 1001, 4290, 65537]
COMBINATIONS = [(collective, name, protocol, ranks) for ranks in (2, 3)
                for collective in ALGORITHMS for name, protocol in variants(collective, ranks)]


def _least_size_taken(algorithm, size: int) -> int:
    """Brute force: scan up from `size` for a size the plan's chunks and alignment take."""
    chunks = message_chunks(algorithm)
    padded = size
    while padded % chunks or (padded // chunks) % algorithm.alignment or padded == 0:
        padded += 1
    return padded


@pytest.mark.parametrize("collective, name, protocol, ranks", COMBINATIONS,
                         ids=["-".join(map(str, c)) for c in COMBINATIONS])
def test_every_size_runs_padded_and_is_proven(collective, name, protocol, ranks):
    algorithm = synthesize(Spec(collective, ranks, name, protocol))
    proven: set[int] = set()
    for size in SIZES:
        padded = padded_message(algorithm, size)
        assert padded == _least_size_taken(algorithm, size), size
        note = padding_note(algorithm, size)
        assert (note is None) == (padded == size)
        chunk = padded // message_chunks(algorithm)
        if note is not None:
            assert note["chunk_bytes"] == chunk and note["bytes"] == size
        if chunk not in proven:  # the plan at this size: every output cell as promised
            report = check_plan(algorithm, chunk)
            assert report.ok and report.postcondition == "satisfied", (size, report.errors)
            proven.add(chunk)


@pytest.mark.parametrize("size, algorithm", diagonal([1, 2, 420, 516, 4290],
                                                     ["auto", "ring", "allpairs"]))
def test_the_cli_pads_odd_all_reduces(planc, tmp_path, size, algorithm):
    """Every size and every algorithm in `-m "not slow"`; every pair in CI."""
    out = tmp_path / "plan.json"
    made = planc("--collective", "allreduce", "--ranks", "2", "--algorithm", algorithm,
                 "--message-size", str(size), "-t", "mscclpp", "--mscclpp-schema",
                 "executor", "-o", out)
    assert made.code == 0, made.err
    note = json.loads(out.read_text())["planc_message"]
    assert note["bytes"] == size and note["padded_bytes"] % 16 == 0
    assert note["padded_bytes"] - size < note["padded_bytes"] // note["chunk_bytes"] * 16
    assert planc("check", "--strict", out).code == 0
    report = planc("simulate", out, "--json", "--message-size", str(note["padded_bytes"]))
    assert report.code == 0 and report.json()["postcondition"] == "satisfied"


def test_an_allgather_pads_each_ranks_block(planc, tmp_path):
    out = tmp_path / "plan.json"
    assert planc("--collective", "allgather", "--ranks", "3", "--algorithm", "ring",
                 "--message-size", "4290", "-t", "mscclpp", "-o", out).code == 0
    note = json.loads(out.read_text())["planc_message"]
    assert note == {"bytes": 4290, "padded_bytes": 4320, "chunk_bytes": 1440,
                    "block_bytes": 1440}


ODD = [((129,), "FP32"), ((105,), "FP32"), ((1,), "FP16"), ((2145,), "FP16")]
"""516, 420, 2 and 4290 bytes."""


def _lower(modules, choice=None):
    return lower_models([next(iter(m.ops)) for m in modules],
                        [f"rank{r}.json" for r in range(len(modules))], choice or Choice())


@pytest.mark.parametrize("shape, dtype", ODD, ids=["516B", "420B", "2B", "4290B"])
@pytest.mark.parametrize("algorithm, protocol", [
    ("auto", None), ("ring", "Simple"), ("ring", "LL"), ("allpairs", "LL"),
    ("oneshot", "Simple"), ("nvls", "Simple")])
def test_ark_all_reduces_of_odd_sizes_are_padded(shape, dtype, algorithm, protocol):
    lowered = _lower(all_reduce_models(2, shape, dtype), Choice(algorithm, protocol))
    assert lowered.route == "allreduce"
    plan = lowered.algorithm
    buffers = json.loads(json.dumps(_plain(plan.extra)))["planc_buffers"]
    tensor = buffers[0]["input"]["bytes"]
    assert tensor == shape[0] * {"FP32": 4, "FP16": 2}[dtype]
    padded = padded_message(plan, tensor)
    assert buffers[0]["input"].get("padded_bytes", tensor) == padded
    report = check_plan(plan, padded // message_chunks(plan))
    assert report.ok and report.postcondition == "satisfied", report.errors


def _plain(attr):
    from dialects.json_value import dict_value

    return dict_value(attr)


@pytest.mark.parametrize("shape, dtype", ODD, ids=["516B", "420B", "2B", "4290B"])
@pytest.mark.parametrize("models", [
    lambda s, d: ring_shift_models(3, s, d),
    lambda s, d: ring_shift_models(3, s, d, packets=True),
    lambda s, d: all_reduce_models(2, s, d)], ids=["ring", "ring-packets", "sends-and-adds"])
def test_point_to_point_pads_odd_tensors(shape, dtype, models):
    lowered = _lower(models(shape, dtype), Choice(recognise=False))
    plan = lowered.algorithm
    assert plan.alignment == 16
    cell = _cell_bytes(expand(plan, lowered.chunk_bytes))
    report = check_plan(plan, lowered.chunk_bytes, lowered.expectation(cell))
    assert report.ok and report.postcondition == "satisfied", report.errors
    buffers = json.loads(json.dumps(_plain(plan.extra)))["planc_buffers"]
    for rank, entries in enumerate(buffers):
        for entry in entries:
            held = entry["size"] * lowered.chunk_bytes
            data = entry["bytes"] // (2 if entry["buffer"] == "s" else 1)
            assert data <= held < data + 16, (rank, entry)


def test_a_misaligned_slice_inside_a_buffer_is_refused_cleanly(planc, tmp_path):
    """Two bytes in the middle of a buffer cannot be padded (the padding would overwrite
    the next tensor): a one-line error that says what to do."""
    from frontends.collective_models import CommunicationBuilder

    modules = []
    for rank in range(2):
        m = CommunicationBuilder(rank, 2)
        tag, = m.first_tag(1)
        x = m.tensor([8], "FP16", buffer=m.buffer(recv=[(0, tag)] if rank else []))
        if rank == 0:
            m.send_into(m.slice(x, [1], [1]), 1, tag, whole=[8], offsets=[1])
        else:
            m.recv_into(x, 0, tag)
        modules.append(m.finish())
    paths = []
    for rank, module in enumerate(modules):
        paths.append(tmp_path / f"r{rank}.json")
        paths[-1].write_text(emit_model(module))
    result = planc(*paths, "-t", "mscclpp", "-o", tmp_path / "plan.json")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "bytes [2, 4) of buffer" in result.err and "multiple of 4" in result.err


def _sliced_all_reduce(ranks: int = 2):
    """x is 129 FP32 of a 130-element tensor: the all-reduce cannot pad into x's buffer."""
    from frontends.collective_models import CommunicationBuilder

    modules = []
    for rank in range(ranks):
        m = CommunicationBuilder(rank, ranks)
        x = m.slice(m.tensor([130], "FP32"), [0], [129])
        m.add(m.all_reduce(x), m.tensor([129], "FP32"))
        modules.append(m.finish())
    return modules


def test_an_all_reduce_that_cannot_pad_is_lowered_op_by_op():
    lowered = _lower(_sliced_all_reduce())
    assert lowered.route == "point-to-point"
    cell = _cell_bytes(expand(lowered.algorithm, lowered.chunk_bytes))
    report = check_plan(lowered.algorithm, lowered.chunk_bytes, lowered.expectation(cell))
    assert report.ok and report.postcondition == "satisfied", report.errors


def test_a_named_algorithm_that_cannot_pad_is_refused(planc, tmp_path):
    paths = []
    for rank, module in enumerate(_sliced_all_reduce()):
        paths.append(tmp_path / f"r{rank}.json")
        paths[-1].write_text(emit_model(module))
    result = planc(*paths, "-t", "mscclpp", "--algorithm", "ring", "-o", tmp_path / "p.json")
    assert result.code == 1 and result.err.count("\n") == 1
    assert "is followed by other data" in result.err and "--algorithm auto" in result.err
