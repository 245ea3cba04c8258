"""Cost per operator of each target at 1k, 10k and 100k operators: does it grow linearly?

    python bench/scale.py [--ops 1000,10000,100000] [--targets ark,tt,gemini,plan-import]
                          [--baseline TREE] [--timeout SECONDS] [--check]

Generated models (`frontends.model_zoo.generated`: stacks of pre-norm MLP blocks, 10 operators
each, [64, 256] activations) are written to ARK model files and compiled by a subprocess
`python -m compiler.driver MODEL -t TARGET -o OUT -q`, timed in CPU seconds (user + system of
the subprocess: start-up, imports, reading, the passes, verification and writing all count).
`plan-import` reads, verifies and writes again an ARK plan of as many processor groups as the
model has operators (each one resource group and one task group, task 0 of planc's plan of
the model): `planc PLAN -t ark -o OUT`.

Beside each figure, in the same run, the baseline every command pays anyway: Python reading
the same input file with `json.load` (in a subprocess, start-up included). With `--baseline
TREE` (a checkout of older code, e.g. `git archive` of main), the same commands also run with
that tree's code, interleaved, and their ratio is printed: on a shared machine only same-run
figures compare.

Printed per target and size: CPU seconds, microseconds per operator (of the command, and of
the command less its fixed cost: the 1k run's seconds minus its per-operator share are taken
as start-up, i.e. the slope between sizes), the JSON baseline, and the ratio of the largest
size's per-operator cost to the smallest's (1.0: linear). With `--check`, `planc check OUT` of
each IR written is timed too (rows `TARGET-check`, beside `json.load` of that IR). Gemini
refuses more than 200,000 workloads (`passes.gemini_partition.MAX_WORKLOADS`; a generated
model is 11 layers per 10 operators, so up to ~180,000 operators); before round 6 its cap was
20,000 and the 100k row timed the refusal. Figures: bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.ark_model import emit_model  # noqa: E402
from frontends.model_zoo import generated  # noqa: E402

TARGETS = ("ark", "tt", "gemini", "plan-import")


TIMED_OUT = -999
"""The exit status `cpu_seconds` reports for a command stopped at `--timeout`."""
NOT_WRITTEN = -998
"""The status of a `--check` row whose compile wrote nothing."""
TIMEOUT = [None]
"""Wall seconds a command may run (`--timeout`; None: no limit)."""


def cpu_seconds(argv: list[str], tree: Path) -> tuple[float, int]:
    """(user + system CPU s, exit status) of one subprocess run with `tree`'s code; a command
    still running after `--timeout` wall seconds is stopped (status `TIMED_OUT`)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    proc = subprocess.Popen(argv, env=env, cwd=tree, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    started, stopped = time.monotonic(), False
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if TIMEOUT[0] is not None and not stopped and time.monotonic() - started > TIMEOUT[0]:
            proc.kill()
            stopped = True
        time.sleep(0.2)
    return usage.ru_utime + usage.ru_stime, TIMED_OUT if stopped else \
        os.waitstatus_to_exitcode(status)


def _status(status: int) -> str:
    if status == NOT_WRITTEN:
        return "nothing to check"
    if status == TIMED_OUT:
        return f"stopped after {TIMEOUT[0]:g} s wall"
    return "refused" if status == 1 else f"exit {status}"


def planc(tree: Path, *args: str) -> tuple[float, int]:
    return cpu_seconds([sys.executable, "-m", "compiler.driver", *args, "-q"], tree)


def json_load(path: Path) -> float:
    return cpu_seconds([sys.executable, "-c", "import json, sys; json.load(open(sys.argv[1]))",
                        str(path)], ROOT)[0]


def plan_of_groups(model: Path, groups: int, scratch: Path) -> Path:
    """planc's plan of `model` with its processor groups replaced by `groups` copies of one
    group running task 0 (a plan of that many processor groups)."""
    small = scratch / "small-plan.json"
    subprocess.run([sys.executable, "-m", "compiler.driver", str(model), "-t", "ark", "-o",
                    str(small), "-q"], cwd=ROOT, check=True,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    doc = json.loads(small.read_text())
    task = doc["TaskInfos"][0]
    group = {"ProcessorRange": [0, 1], "ResourceGroups": [
        {"ProcessorRange": [0, 1], "WarpRange": [0, task["NumWarps"]],
         "SramRange": [0, task["SramBytes"]],
         "TaskGroups": [{"TaskId": task["Id"], "TaskRange": [0, 1], "Granularity": 1}]}]}
    doc["ProcessorGroups"] = [group] * groups
    path = scratch / f"plan-{groups}.json"
    path.write_text(json.dumps(doc))
    return path


def check(tree: Path, out: Path, compiled: int) -> tuple[float, int]:
    """`planc check OUT` with `tree`'s code (status `NOT_WRITTEN` when the compile failed)."""
    if compiled != 0:
        return 0.0, NOT_WRITTEN
    return planc(tree, "check", str(out))


def run_target(tree: Path, target: str, model: Path, plan: Path | None,
               out: Path) -> tuple[float, int]:
    if target == "plan-import":
        return planc(tree, str(plan), "-t", "ark", "-o", str(out))
    return planc(tree, str(model), "-t", target, "-o", str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="1000,10000,100000")
    parser.add_argument("--targets", default=",".join(TARGETS))
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="another checkout whose code runs the same commands")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="stop a command after this many wall seconds (printed as such)")
    parser.add_argument("--check", action="store_true",
                        help="also time `planc check` of each IR written (rows TARGET-check)")
    args = parser.parse_args()
    TIMEOUT[0] = args.timeout
    sizes = [int(s) for s in args.ops.split(",")]
    targets = args.targets.split(",")
    trees = {"planc": ROOT} | ({"before": args.baseline.resolve()} if args.baseline else {})
    results: dict[tuple[str, str, int], tuple[float, int]] = {}
    baseline: dict[tuple[str, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        for n in sizes:
            model = scratch / f"model-{n}.json"
            model.write_text(emit_model(generated(n)))
            plan = plan_of_groups(model, n, scratch) if "plan-import" in targets else None
            for target in targets:
                source = plan if target == "plan-import" else model
                baseline[(target, n)] = json_load(source)
                for name, tree in trees.items():
                    out = scratch / f"out-{name}-{target}-{n}"
                    results[(name, target, n)] = run_target(tree, target, model, plan, out)
                    seconds, status = results[(name, target, n)]
                    print(f"# {target:12} {n:>7} ops  {name:7} {seconds:8.2f} CPU s"
                          f"{'' if status == 0 else f'  ({_status(status)})'}", flush=True)
                    if args.check:
                        checked = f"{target}-check"
                        baseline[(checked, n)] = json_load(out) if status == 0 else 0.0
                        results[(name, checked, n)] = check(tree, out, status)
                        seconds, status = results[(name, checked, n)]
                        print(f"# {checked:12} {n:>7} ops  {name:7} {seconds:8.2f} CPU s"
                              f"{'' if status == 0 else f'  ({_status(status)})'}", flush=True)
                    out.unlink(missing_ok=True)      # (a 100k Gemini IR is ~600 MB)
    if args.check:
        targets = [t for target in targets for t in (target, f"{target}-check")]
    print()
    head = f"| target | operators | {' | '.join(f'{t} CPU s | {t} us/op' for t in trees)} |"
    head += " json.load CPU s | json.load us/op |"
    if args.baseline:
        head += " planc / before |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    for target in targets:
        for n in sizes:
            cells = []
            for name in trees:
                seconds, status = results[(name, target, n)]
                note = "" if status == 0 else f" ({_status(status)})"
                cells += [f"{seconds:.2f}{note}", f"{seconds / n * 1e6:.0f}"]
            row = f"| {target} | {n:,} | {' | '.join(cells)} | {baseline[(target, n)]:.2f} | "
            row += f"{baseline[(target, n)] / n * 1e6:.1f} |"
            if args.baseline:
                before = results[("before", target, n)][0]
                ratio = results[("planc", target, n)][0] / before if before else None
                row += f" {ratio:.2f} |" if ratio is not None else " |"
            print(row)
    print()
    for target in targets:
        for name in trees:
            points = [(n, results[(name, target, n)][0]) for n in sizes
                      if results[(name, target, n)][1] == 0]   # finished, not refused
            if len(points) < 2:
                continue
            (n0, s0), (n1, s1) = points[0], points[-1]
            slope = (s1 - s0) / (n1 - n0) * 1e6
            print(f"{target} ({name}): {slope:.0f} us per operator between {n0:,} and {n1:,} "
                  f"operators; fixed cost {s0 - slope * n0 / 1e6:.2f} s; per-operator cost at "
                  f"{n1:,} / at {n0:,} (whole command): "
                  f"{(s1 / n1) / (s0 / n0):.2f}")


if __name__ == "__main__":
    main()
