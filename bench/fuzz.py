"""Mutation fuzzing of planc's readers and lowerings.

    python bench/fuzz.py [--mutants 300] [--seed 0] [--lower] [--timeout 20] [--memory-gb 2]
                         [--fork] [--formats model,plan,tt,mscclpp,gemini]

Seeds are real and shipped documents of every format (the examples, planc's own plans of them,
and the upstream corpus when it is present). Each mutant deletes a member, changes a value's
type, puts a strange value (huge or negative numbers, deep nesting, long or odd strings) in
place of one, or truncates the text; `planc check` (and with `--lower` the lowerings of the
seed's format) then runs on it in a child process under a time and memory limit (with
`--fork`, the time limit is CPU seconds, and five times as many wall seconds). Every exit
code other than 0 and 1, every time-out and every memory failure is reported with the mutant
that caused it, and written to `fuzz-failures/` for reproduction.

The test suite runs a fixed-seed slice of this (tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STRANGE = [0, -1, 1 << 62, -(1 << 63) - 1, 1 << 70, 3.5, -0.0, 1e308, "", "x" * 1000,
           "a\nb", None, True, [], {}, [[[]]], "\u00e9\u4e2d", 2 ** 42]


def seeds() -> dict[str, list[Path]]:
    """Documents to mutate, by what to do with them."""
    from tests.conftest import corpus_root

    examples = ROOT / "examples"
    found = {"model": [examples / "ffn.json", examples / "sendrecv_rank0.json",
                       examples / "attention_nodes.json"]}
    corpus = corpus_root()
    if corpus.is_dir():
        found["model"].append(corpus / "ark" / "tutorial_model.json")
        found["plan"] = sorted((corpus / "ark").glob("tutorial_plan*.json"))[:3] + \
            sorted((corpus / "ark").glob("allreduce_sm_plan_gpu0.json"))
        found["tt"] = sorted((corpus / "tt").glob("*.plan.json"))
        found["mscclpp"] = sorted((corpus / "mscclpp").glob("*.json"))[:3] + \
            sorted((corpus / "mscclpp" / "dsl").glob("*.json"))[:3]
        found["gemini"] = sorted((corpus / "gemini").glob("*resnet34*.json"))
    return {k: v for k, v in found.items() if v}


LOWERINGS = {"model": [["-t", "ark"], ["-t", "tt"], ["-t", "gemini"]],
             "plan": [["-t", "cpu", "-o", "{out}"]], "tt": [["-t", "tt-metal", "-o", "{out}"]],
             "mscclpp": [["-t", "mscclpp", "--mscclpp-schema", "executor"]],
             "gemini": [["-t", "gemini"]]}


def paths(value, prefix=()):
    """Every (path, value) of a JSON document, containers included."""
    out = [(prefix, value)]
    stack = [(prefix, value)]
    while stack:
        where, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for key, child in items:
            out.append(((*where, key), child))
            if isinstance(child, dict | list):
                stack.append(((*where, key), child))
    return out


def mutate(doc, text: str, rng: random.Random) -> str:
    """One mutant of `doc` (whose text is `text`), as text."""
    kind = rng.choice(["delete", "retype", "strange", "nest", "truncate", "duplicate"])
    if kind == "truncate":
        return text[: rng.randrange(1, max(2, len(text)))]
    doc = copy.deepcopy(doc)
    where, _ = rng.choice(paths(doc)[1:] or [((), doc)])
    parent = doc
    for step in where[:-1]:
        parent = parent[step]
    key = where[-1] if where else None
    if key is None:
        return json.dumps(rng.choice(STRANGE))
    if kind == "delete":
        del parent[key]
    elif kind == "retype":
        value = parent[key]
        parent[key] = [value] if not isinstance(value, list) else {"x": value}
    elif kind == "strange":
        parent[key] = rng.choice(STRANGE)
    elif kind == "nest":
        # Written as text: Python's own encoder cannot nest this deep.
        depth = rng.choice([50, 300, 5000])
        parent[key] = "@NEST@"
        return json.dumps(doc).replace('"@NEST@"', "[" * depth + "0" + "]" * depth, 1)
    elif kind == "duplicate" and isinstance(parent, list) and parent:
        parent.append(copy.deepcopy(parent[key]))
    return json.dumps(doc)


@dataclass
class Outcome:
    mutant: str
    args: list[str]
    code: int | None
    stderr: str


WALL_FACTOR = 5
"""The wall-clock limit of a forked child, in multiples of its CPU-time limit."""


def run_forked(args: list[str], timeout: float, memory_bytes: int) -> tuple[int | None, str]:
    """`planc ARGS` in a forked child of this process, which has imported planc once: the
    same isolation (time and memory limits, a crash ends only the child) at a tenth of the
    cost of a new interpreter per mutant."""
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:                                        # the child
            try:
                resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
                # A hang burns CPU: the limit is CPU seconds (SIGXCPU), so a loaded machine
                # cannot fake one; the wall alarm (SIGALRM) catches a child that blocks.
                seconds = max(1, math.ceil(timeout))
                resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
                signal.alarm(WALL_FACTOR * seconds)
                os.dup2(log.fileno(), 1)
                os.dup2(log.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)     # noqa: SIM115 (whoever had them)
                sys.stderr = open(2, "w", closefd=False)     # noqa: SIM115
                from compiler.driver import main as planc_main

                code = planc_main(args)
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:                            # noqa: BLE001
                code = 3
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        log.seek(0)
        err = log.read().decode(errors="replace")
    if os.WIFSIGNALED(status):
        why = {signal.SIGXCPU: f"over {timeout:g} CPU s",
               signal.SIGALRM: f"over {WALL_FACTOR * timeout:g} s wall, blocked"}
        return None, f"killed by signal {os.WTERMSIG(status)} " \
            f"({why.get(os.WTERMSIG(status), 'memory or a crash')})"
    return os.WEXITSTATUS(status), err


def run(args: list[str], timeout: float, memory_bytes: int) -> tuple[int | None, str]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    command = [sys.executable, "-c",
               "import sys; from compiler.driver import main; sys.exit(main())", *args]
    try:
        result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True,
                                timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return None, "time-out"
    return result.returncode, result.stderr


def preload() -> None:
    """Import what every run needs, so forked children start warm."""
    import compiler.checking  # noqa: F401
    import compiler.driver  # noqa: F401
    from backends import TARGETS
    from passes import get_all_passes

    for target in TARGETS:
        target.load()
    for make in get_all_passes().values():
        make()


def fuzz(mutants: int, seed: int, lower: bool, timeout: float, memory_gb: float,
         report=print, fork: bool = False, formats: set[str] | None = None) -> list[Outcome]:
    rng = random.Random(seed)
    runner = run_forked if fork else run
    if fork:
        preload()
    failures: list[Outcome] = []
    groups = {k: v for k, v in seeds().items() if not formats or k in formats}
    with tempfile.TemporaryDirectory() as scratch:
        for index in range(mutants):
            if index and index % 1000 == 0:
                report(f"{index} mutants so far, {len(failures)} failures")
            kind = rng.choice(sorted(groups))
            source = rng.choice(groups[kind])
            text = source.read_text()
            mutant = Path(scratch) / f"m{index}.json"
            mutant.write_text(mutate(json.loads(text), text, rng))
            jobs = [["check", str(mutant)]]
            if lower:
                jobs += [[str(mutant), *[a.format(out=f"{scratch}/o{index}") for a in job]]
                         for job in LOWERINGS.get(kind, [])]
            for job in jobs:
                code, err = runner(job, timeout, int(memory_gb * (1 << 30)))
                if code not in (0, 1) or "internal error" in err:
                    failures.append(Outcome(mutant.read_text(), job, code, err.strip()[-400:]))
                    report(f"{kind} {source.name} mutant {index}: {job[0]} -> {code}: "
                           f"{err.strip()[-200:]}")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lower", action="store_true", help="also run the lowerings")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds per run (CPU seconds with --fork)")
    parser.add_argument("--memory-gb", type=float, default=2.0)
    parser.add_argument("--fork", action="store_true",
                        help="run each mutant in a forked child of one warm process (POSIX)")
    parser.add_argument("--formats", default="", help="comma-separated: " + ", ".join(
        ["model", "plan", "tt", "mscclpp", "gemini"]))
    args = parser.parse_args()
    start = time.perf_counter()
    failures = fuzz(args.mutants, args.seed, args.lower, args.timeout, args.memory_gb,
                    fork=args.fork, formats=set(filter(None, args.formats.split(","))))
    out = ROOT / "fuzz-failures"
    if failures:
        out.mkdir(exist_ok=True)
        for i, f in enumerate(failures):
            (out / f"seed{args.seed}-failure{i}.json").write_text(f.mutant)
    print(f"{args.mutants} mutants, {len(failures)} failures (internal errors, time-outs, "
          f"memory) in {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
