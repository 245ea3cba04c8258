"""`planc check` on MSCCL++ plans: the symbolic replay's verdicts as findings.

The replay (`simulator.check_plan`) runs every thread block of every GPU on symbolic chunks in
an order the plan's synchronisation allows. What it finds is what the executor would get wrong:

* `mscclpp.deadlock` (error): a wait, barrier or packet read that nothing satisfies; the kernel
  hangs.
* `mscclpp.race` (error): two accesses to the same bytes, one a write, that no signal, wait,
  semaphore, barrier or packet flag orders; the result depends on timing.
* `mscclpp.tbg-race` (warning): such a race between parts of ops the DSL split over a
  thread-block group, which it synchronises pairwise only. The executor's own test plans
  (`reduce_tbg`) do this and pass on real GPUs, where the group's blocks run in lockstep, but
  nothing in the plan guarantees it.
* `mscclpp.peer-start` (error): an access to a peer's input, output or (Simple protocol)
  scratch that nothing orders after the peer's kernel start. Each GPU's kernel starts when its
  own stream reaches it; before that the peer's caller may still be writing its input (a
  write-after-write, or a read of data not there yet), reading the previous output, or a
  previous launch may still be using its scratch. The DSL's Simple plans open with a
  signal/wait on every channel for this reason. LL packets are exempt (the flag changes with
  every launch), and so is scratch under `use_double_scratch_buffer`. A warning when only the
  block's first threads have waited (no `nop` between the wait and the access; draft-era DSL
  plans do this).
* `mscclpp.in-flight-at-end` (error): a remote write that no signal orders before the target
  GPU finishes (a put whose signal can overtake it, or no signal at all): the caller may read
  the output, or start the next collective, while the data is still in flight.
* `mscclpp.out-of-range` (error): a buffer reference outside its buffer's chunks.
* `mscclpp.unbalanced` (error): signals never waited for (or semaphore releases never
  acquired): the executor runs a plan again and again, and the next run sees stale counts.
* `mscclpp.postcondition` (error): the named collective's outputs are not what it promises.
* `mscclpp.replay` (warning): everything else the replay notes (e.g. more thread blocks than
  the GPU has SMs).

A document in the seed's draft schema is judged as today's executor would run it once
converted (`-t mscclpp --mscclpp-schema executor`); today's executor does not read the draft
schema itself, whose own executor versions sized buffers differently, so its findings are
warnings.
"""

from __future__ import annotations

import re
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from dialects import mscclpp as ms
from dialects.findings import ERROR, WARNING, Finding
from dialects.locations import source_path

RULES = {"deadlocks": "mscclpp.deadlock", "races": "mscclpp.race",
         "before_start": "mscclpp.peer-start",
         "out_of_range": "mscclpp.out-of-range", "unbalanced": "mscclpp.unbalanced",
         "postcondition_failures": "mscclpp.postcondition"}
OP_REFERENCE = re.compile(r"gpu (\d+) tb (\d+) op (\d+)")


def check(module: ModuleOp, options: Any = None) -> list[Finding]:
    from targets.mscclpp.simulator import UNFENCED, check_plan

    algorithm = next(op for op in module.ops if isinstance(op, ms.AlgorithmOp))
    report = check_plan(algorithm)
    ops = _ops_by_reference(algorithm)
    draft = "planc.schema" in algorithm.attributes
    findings = []
    for kind, messages in report.errors.items():
        for message in messages:
            named = [ops.get(tuple(map(int, m))) for m in OP_REFERENCE.findall(message)]
            rule, severity = RULES[kind], ERROR
            if kind == "races" and "without synchronisation before gpu" in message:
                rule = "mscclpp.in-flight-at-end"
            elif kind == "races" and len(named) >= 2 and all(
                    op is not None and op.tbg_info is not None for op in named[:2]):
                rule, severity = "mscclpp.tbg-race", WARNING
            if draft:
                severity = WARNING
                message += (" (judged as today's executor would run the plan converted to its "
                            "schema)")
            first = next((op for op in named if op is not None), None)
            path = source_path(first) if first is not None else source_path(algorithm)
            findings.append(Finding(rule, severity, message, path))
    for message in report.warnings:
        rule, path = "mscclpp.replay", source_path(algorithm)
        if UNFENCED in message:
            rule = "mscclpp.peer-start"
            named = [ops.get(tuple(map(int, m))) for m in OP_REFERENCE.findall(message)]
            path = source_path(named[0]) if named and named[0] is not None else path
        findings.append(Finding(rule, WARNING, message, path))
    return findings


def _ops_by_reference(algorithm: ms.AlgorithmOp) -> dict[tuple[int, int, int], ms.InstructionOp]:
    """Ops as the replay names them: (gpu rank, thread block id, position in the block)."""
    found = {}
    for gpu in algorithm.gpus():
        for tb in gpu.threadblocks():
            for position, op in enumerate(tb.ops()):
                found[(gpu.rank_id, tb.tb_id, position)] = op
    return found
