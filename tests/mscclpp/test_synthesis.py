"""Generated algorithms: every collective x algorithm x protocol passes the simulator."""

from __future__ import annotations

import json

import pytest
from xdsl.dialects.builtin import ModuleOp

from dialects.locations import verify_module
from targets.mscclpp.cost import hardware_named, model_time
from targets.mscclpp.selection import candidates, fastest, modeled
from targets.mscclpp.simulator import check_plan
from targets.mscclpp.synthesis import ALGORITHMS, Spec, synthesize, variants

VARIANTS = [(c, a, p) for c in ALGORITHMS for a, p in variants(c, 8)]


def _checked(spec: Spec):
    algorithm = synthesize(spec)
    verify_module(ModuleOp([algorithm]))
    return algorithm, check_plan(algorithm)


@pytest.mark.parametrize("collective,algorithm,protocol", VARIANTS)
@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "outofplace"])
def test_every_variant_is_correct(collective, algorithm, protocol, inplace):
    # 3 ranks (odd: ring indices wrap unevenly), 2 instances, broadcast from a non-zero root.
    spec = Spec(collective, 3, algorithm, protocol, 2, inplace, root=2)
    _, report = _checked(spec)
    assert report.ok, report.errors
    assert report.postcondition == "satisfied"
    assert report.warnings == []  # out of place, no input is overwritten either


@pytest.mark.parametrize("collective,algorithm,protocol", VARIANTS)
def test_every_variant_is_correct_on_8_ranks(collective, algorithm, protocol):
    algorithm_op, report = _checked(Spec(collective, 8, algorithm, protocol))
    assert report.ok, report.errors
    assert report.postcondition == "satisfied"
    assert algorithm_op.num_ranks == 8


def test_generated_plans_are_checked_not_trusted():
    """Dropping one signal of a generated ring plan is caught like any other plan's."""
    algorithm = synthesize(Spec("allgather", 4, "ring"))
    tb = algorithm.gpus()[2].threadblocks()[0]
    signal = next(op for op in reversed(tb.ops()) if op.NAME == "signal")
    signal.detach()
    report = check_plan(algorithm)
    # Rank 2 signals rank 3 once per forwarded chunk (3 times); without its last signal,
    # rank 3's third wait never returns.
    assert report.errors["deadlocks"] == [
        "gpu 3 tb 0 op 16 (wait) waits for signal #3 from gpu 2 on memory channel #0 between "
        "them, which sends 2 in all"]


def test_more_instances_model_faster_for_large_messages():
    one = model_time(synthesize(Spec("allreduce", 8, "allpairs")), hardware_named("h100"), 2**26)
    eight = model_time(synthesize(Spec("allreduce", 8, "allpairs", instances=8)),
                       hardware_named("h100"), 2**26)
    assert eight.seconds < one.seconds / 4


@pytest.mark.parametrize("size", [2**10, 2**26])
def test_auto_picks_the_fastest_candidate(size):
    spec = Spec("allreduce", 4, "auto")
    choice = fastest(spec, None, size, "a100")
    times = [modeled(c, hardware_named("a100"), size) for c in candidates(spec)]
    assert choice.timing.seconds == min(t.seconds for t in times if t is not None)
    assert choice.spec.algorithm != "nvls"  # the a100 has no NVLink switch
    assert check_plan(choice.algorithm).ok


def test_cli_generates_and_simulates(planc, tmp_path):
    out = tmp_path / "ar.json"
    result = planc("--collective", "allreduce", "--ranks", "8", "--algorithm", "ring",
                   "--protocol", "Simple", "--target", "mscclpp", "-o", out)
    assert (result.code, result.err) == (0, "")
    doc = json.loads(out.read_text())
    assert doc["name"] == "allreduce_ring_simple_8gpus"
    assert "inputChunks" in doc["gpus"][0]  # the seed schema is the default
    report = planc("simulate", out, "--json")
    assert report.code == 0 and report.json()["postcondition"] == "satisfied"
    executor = planc("--collective", "alltoall", "--ranks", "4", "--algorithm", "allpairs",
                     "--protocol", "LL", "--target", "mscclpp", "--mscclpp-schema", "executor")
    assert executor.code == 0
    assert json.loads(executor.out)["gpus"][0]["input_chunks"] == 4


@pytest.mark.parametrize("args,message", [
    (["--algorithm", "nvls", "--protocol", "LL"],
     "--algorithm nvls works with --protocol Simple only"),
    (["--algorithm", "tree"],
     "--algorithm tree is not an algorithm for allreduce (choose ring, allpairs, oneshot, nvls "
     "or auto)"),
    (["--algorithm", "allpairs", "--ranks", "12"],
     "--algorithm allpairs reaches every peer in one op, which the executor allows for at most "
     "9 ranks; use ring"),
    (["--instances", "0"], "--instances must be at least 1, got 0"),
    (["--ranks", "1"], "--ranks must be at least 2, got 1"),
])
def test_cli_rejects_bad_requests(planc, tmp_path, args, message):
    out = tmp_path / "out.json"
    base = {"--ranks": "4", "--algorithm": "ring"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    flat = [item for pair in base.items() for item in pair]
    result = planc("--collective", "allreduce", *flat, "--target", "mscclpp", "-o", out)
    assert (result.code, result.err) == (1, f"planc: error: {message}\n")
    assert not out.exists()


def test_cli_needs_ranks_and_no_input(planc, tmp_path):
    result = planc("--collective", "allgather", "--target", "mscclpp")
    assert (result.code, result.err) == (1, "planc: error: --collective needs --ranks N\n")
    plan = tmp_path / "p.json"
    plan.write_text(json.dumps({"name": "x"}))
    result = planc("--collective", "allgather", "--ranks", "2", "--target", "mscclpp")
    assert result.code == 0
    nothing = planc("--target", "mscclpp")
    assert nothing.code == 1
    assert nothing.err == ("planc: error: --target mscclpp needs an INPUT file, or --collective "
                           "(with --ranks and --algorithm) to generate an algorithm\n")
