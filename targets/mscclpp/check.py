"""`planc check` on MSCCL++ plans: the symbolic replay's verdicts as findings.

The replay (`simulator.check_plan`) runs every thread block of every GPU on symbolic chunks in
an order the plan's synchronisation allows. What it finds is what the executor would get wrong:

* `mscclpp.deadlock` (error): a wait, barrier or packet read that nothing satisfies; the kernel
  hangs.
* `mscclpp.race` (error): two accesses to the same bytes, one a write, that no signal, wait,
  semaphore, barrier or packet flag orders; the result depends on timing.
* `mscclpp.tbg-race` (warning): such a race between slices of ops the DSL split over a
  thread-block group, which it synchronises pairwise only. The executor slices a group's op
  when it loads the plan (`ExecutionPlan::calcOffset`/`calcSize`: block t gets part t of every
  range), runs each block's slice alone (`executionKernel` has no group barrier; a `nop` is
  `__syncthreads`, one block) and a memory channel's signal/wait pairs one block with one
  peer block, so a signal covers the signalling block's own slice only. The message names the
  missing edge (which blocks the later access has synchronised with). The executor's own test
  plan `reduce_tbg` does this and passes on real GPUs, where the group's blocks finish their
  equal slices at about the same time, but nothing orders them: a real race, a warning
  because real producer output has it.
* `mscclpp.peer-start` (error): an access to a peer's input, output or (Simple protocol)
  scratch that nothing orders after the peer's kernel start. Each GPU's kernel starts when its
  own stream reaches it; before that the peer's caller may still be writing its input (a
  write-after-write, or a read of data not there yet), reading the previous output, or a
  previous launch may still be using its scratch. The DSL's Simple plans open with a
  signal/wait on every channel for this reason. LL packets are exempt (the flag changes with
  every launch), and so is scratch under `use_double_scratch_buffer`. Also when only the
  block's first threads have waited: with no `nop` or barrier (__syncthreads) between the
  wait and the access, the block's other threads may get there first (draft-era DSL plans do
  this; a race all the same).
* `mscclpp.in-flight-at-end` (error): a remote write (or a read of a peer's memory) that no
  signal orders before the target GPU finishes (a put whose signal can overtake it, or no
  signal at all): the caller may read the output, or start the next collective, while the
  data is still in flight.
* `mscclpp.unflushed-read` (warning): a port put whose proxy may still read the GPU's own
  input or output when its kernel returns (no flush): the collective's result is right, but
  the caller must not overwrite the source until the proxy is done.
* `mscclpp.out-of-range` (error): a buffer reference outside its buffer's chunks.
* `mscclpp.zero-chunks` (error): `input_chunks` or `output_chunks` is 0: the executor's
  message-size check takes the message size modulo both when it loads the plan (a division
  by zero, reference §4.6 #10).
* `mscclpp.unbalanced` (error): signals never waited for (or semaphore releases never
  acquired): the executor runs a plan again and again, and the next run sees stale counts.
* `mscclpp.postcondition` (error): the named collective's outputs are not what it promises;
  the finding points at the op that last wrote the wrong chunk (or at the GPU, when nothing
  wrote it).
* `mscclpp.device-memory` (error), with `--arch`: at the plan's largest message
  (`max_message_size`, when the plan bounds it), a GPU's input, output (unless in place) and
  scratch buffer exceed the device's memory. The executor sizes scratch as the chunk size
  times `scratch_chunks`, twice for LL packets, twice again for a double scratch buffer
  (64 MiB with `reuse_resources`), and allocates it when the plan is loaded for that message:
  the allocation is refused.
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
from ground.diagnostics import extend_path

RULES = {"zero_chunks": "mscclpp.zero-chunks", "deadlocks": "mscclpp.deadlock",
         "races": "mscclpp.race",
         "before_start": "mscclpp.peer-start",
         "out_of_range": "mscclpp.out-of-range", "unbalanced": "mscclpp.unbalanced",
         "postcondition_failures": "mscclpp.postcondition"}
OP_REFERENCE = re.compile(r"gpu (\d+) tb (\d+) op (\d+)")
GPU_REFERENCE = re.compile(r"\bgpu (\d+)(?::| output| has)")
CHUNK_COUNT = re.compile(r"^gpu \d+: (input|output)_chunks is 0")


def check(module: ModuleOp, options: Any = None) -> list[Finding]:
    from targets.mscclpp.program import split_over_group
    from targets.mscclpp.simulator import UNFLUSHED, check_plan

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
                    op is not None and split_over_group(op) for op in named[:2]):
                rule, severity = "mscclpp.tbg-race", WARNING
            if draft:
                severity = WARNING
                message += (" (judged as today's executor would run the plan converted to its "
                            "schema)")
            findings.append(Finding(rule, severity, message,
                                    _place(algorithm, named, message)))
    findings += capacity_findings(algorithm, getattr(options, "arch", None))
    for message in report.warnings:
        named = [ops.get(tuple(map(int, m))) for m in OP_REFERENCE.findall(message)]
        rule = "mscclpp.unflushed-read" if UNFLUSHED in message else "mscclpp.replay"
        findings.append(Finding(rule, WARNING, message, _place(algorithm, named, message)))
    return findings


def _place(algorithm: ms.AlgorithmOp, named: list, message: str) -> str | None:
    """Where a replay message's mistake is: the first op it names, else the GPU it names
    (its chunk count, for `zero_chunks`), else the document."""
    first = next((op for op in named if op is not None), None)
    if first is not None:
        return source_path(first)
    gpu = GPU_REFERENCE.search(message)
    gpus = algorithm.gpus()
    if gpu is None or int(gpu[1]) >= len(gpus):
        return source_path(algorithm)
    path = source_path(gpus[int(gpu[1])])
    count = CHUNK_COUNT.match(message)
    return extend_path(path, f"{count[1]}_chunks") if count and path else path


def _ops_by_reference(algorithm: ms.AlgorithmOp) -> dict[tuple[int, int, int], ms.InstructionOp]:
    """Ops as the replay names them: (gpu rank, thread block id, position in the block)."""
    found = {}
    for gpu in algorithm.gpus():
        for tb in gpu.threadblocks():
            for position, op in enumerate(tb.ops()):
                found[(gpu.rank_id, tb.tb_id, position)] = op
    return found


PREDEFINED_SCRATCH = 1 << 26
"""The executor's shared scratch buffer with `reuse_resources` (PREDFINED_SCRATCH_SIZE)."""


def gpu_bytes(algorithm: ms.AlgorithmOp, gpu: ms.GpuOp, message: int) -> tuple[int, int]:
    """(input + output bytes, scratch bytes) of `gpu` at `message` bytes, as the executor's
    calScratchBufferSize sizes them (the message is the input size, the output size for
    allgather; the chunk size is the same for all three buffers)."""
    inputs, outputs, scratch = gpu.chunks("i"), gpu.chunks("o"), gpu.chunks("s")
    per = inputs if algorithm.collective_name != "allgather" or not outputs else outputs
    per = per or outputs or 1
    chunk = -(-message // per)
    data = chunk * inputs + (0 if algorithm.is_inplace else chunk * outputs)
    if algorithm.reuses_resources and scratch > 0:
        return data, PREDEFINED_SCRATCH
    size = chunk * scratch * (2 if algorithm.protocol_name == "LL" else 1)
    size *= 2 if algorithm.uses_double_scratch else 1
    align = algorithm.alignment
    return data, -(-size // align) * align


def capacity_findings(algorithm: ms.AlgorithmOp, arch: str | None) -> list[Finding]:
    """`mscclpp.device-memory` for the GPU `arch` names, at the plan's largest message (only
    when the plan bounds it: otherwise the executor sizes buffers for each call's message)."""
    from devices.hardware import gpu_device

    _, largest = algorithm.message_range
    if not arch or largest >= ms.UINT64_MAX:
        return []
    device = gpu_device(arch)
    findings = []
    for gpu in algorithm.gpus():
        data, scratch = gpu_bytes(algorithm, gpu, largest)
        if data + scratch > device.memory_bytes:
            findings.append(Finding(
                "mscclpp.device-memory", ERROR,
                f"gpu {gpu.rank_id}: at max_message_size {largest} its input and output take "
                f"{data} bytes and its scratch buffer {scratch} ({gpu.chunks('s')} chunks), "
                f"more than the {device.memory_bytes} bytes of {device.name}",
                extend_path(source_path(gpu), "scratch_chunks") if source_path(gpu) else None))
    return findings
