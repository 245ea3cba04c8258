"""Compile speed: the whole `planc MODEL --target ark -o PLAN` command, as a user runs it.

    python bench/compile_speed.py [--ops 1000,10000,50000] [--arch a100] [--repeat 1]
                                  [--baseline TREE] [--split] [--cold]

Generated models (`frontends.model_zoo.generated`: stacks of pre-norm MLP blocks, 10
operators each) are written to ARK model files, then compiled by a subprocess
`python -m compiler.driver MODEL --target ark --arch ARCH -o PLAN` (what the `planc` script
runs): interpreter start-up, imports, reading and verifying the model, the planning pipeline,
verification of its result and writing the plan all count. Printed per size: wall and CPU
seconds (user + system of the subprocess; the best of `--repeat` runs) and operators per CPU
second; then the least-squares line `CPU s = a + b * (operators / 1000)`, whose slope b is the
cost per 1000 operators and whose intercept a is the fixed cost (start-up and imports).

`--baseline TREE` runs the same commands with another checkout's code (`PYTHONPATH=TREE`, e.g.
a `git worktree` of main) in the same run, interleaved with this tree's, and prints both and
their ratio: on a shared machine only same-run comparisons mean anything. Each pair of plans is
compared byte for byte.

Before timing, each tree is warmed as an installed planc is after its first command: its
bytecode is compiled (`compileall`) and its cache of dataclass method code is written
(`python -m compiler.warm`, see `compiler._startup.shared_dataclass_code`; trees without it
are only compiled). Both are what Python and planc write on a first run where bytecode may
be written. `--cold` skips this (a tree with neither pays ~0.1 CPU s more per command).

`--split` also times the steps of the command, in a fresh process per tree and size (CPU
seconds): start-up (interpreter and imports), read (JSON), schema, import (the importer),
verify (the imported model), passes (the `ark-plan` pipeline), verify2 (the plan) and emit
(the plan's text).
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


def run_planc(tree: Path, model: Path, plan: Path, arch: str) -> tuple[float, float]:
    """(wall s, CPU s) of one `planc MODEL --target ark -o PLAN` with `tree`'s code."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "compiler.driver", str(model), "--target",
                             "ark", "--arch", arch, "-o", str(plan)], env=env, cwd=tree)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"planc failed ({proc.returncode}) on {model} with {tree}")
    return wall, usage.ru_utime + usage.ru_stime


SPLIT = """
import gc, json, sys, time
start = time.process_time()
gc.disable()
from argparse import Namespace
from compiler.context import planc_context
from ground.json_reader import load_json_file
from dialects.locations import verify_module
from frontends import detect_format
from passes.ark_plan import ArkPlanPass
from backends.ark_plan import emit
marks = {"start-up": time.process_time() - start}
def step(name, since):
    now = time.process_time()
    marks[name] = now - since
    return now
t = time.process_time()
doc = load_json_file(sys.argv[1]); t = step("read", t)
fmt = detect_format(doc.value); fmt.check_schema(doc); t = step("schema", t)
module = fmt.import_document(doc); t = step("import", t)
verify_module(module); t = step("verify", t)
ArkPlanPass(device=sys.argv[2]).apply(planc_context(), module); t = step("passes", t)
verify_module(module); t = step("verify2", t)
emit(module, Namespace()); t = step("emit", t)
print(json.dumps(marks))
"""
"""The steps of `planc MODEL --target ark`, each timed in CPU seconds (see the docstring)."""


def split_seconds(tree: Path, model: Path, arch: str) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", SPLIT, str(model), arch], env=env, cwd=tree,
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def warm(tree: Path, model: Path, tmp: str) -> None:
    """Compile `tree`'s bytecode and write its dataclass code cache (see the docstring)."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    packages = [p for p in ("compiler", "dialects", "passes", "frontends", "backends")
                if (tree / p).is_dir()]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], cwd=tree, env=env,
                   check=True, stdout=subprocess.DEVNULL)
    if (tree / "compiler" / "warm.py").is_file():
        subprocess.run([sys.executable, "-m", "compiler.warm", str(model), "--target", "ark",
                        "-o", str(Path(tmp, "warm.json"))], cwd=tree, env=env, check=True)


def best_of(repeat: int, tree: Path, model: Path, plan: Path, arch: str) -> tuple[float, float]:
    runs = [run_planc(tree, model, plan, arch) for _ in range(repeat)]
    return min(r[0] for r in runs), min(r[1] for r in runs)


def linear_fit(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares (intercept, slope) of ys against xs."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="1000,10000,50000")
    parser.add_argument("--arch", default="a100")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--baseline", type=Path, metavar="TREE",
                        help="another checkout to time in the same run")
    parser.add_argument("--split", action="store_true",
                        help="also time each step of the command (CPU s)")
    parser.add_argument("--cold", action="store_true",
                        help="do not compile bytecode or write the dataclass code cache first")
    args = parser.parse_args()
    sizes = [int(s) for s in args.ops.split(",")]
    trees = {"this": ROOT} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    rows: dict[str, list[tuple[int, float, float]]] = {name: [] for name in trees}
    header = f"{'ops':>7}" + "".join(f"{name + ' wall s':>17}{name + ' CPU s':>16}"
                                     for name in trees)
    header += f"{'ops/CPU s':>11}" + (f"{'CPU ratio':>11}" if args.baseline else "")
    print(header, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.cold:
            small = Path(tmp, "warm-model.json")
            small.write_text(emit_model(generated(10)))
            for tree in trees.values():
                warm(tree, small, tmp)
        for ops in sizes:
            model = Path(tmp, f"model{ops}.json")
            model.write_text(emit_model(generated(ops)))
            line = f"{ops:>7}"
            plans = []
            for name, tree in trees.items():
                plan = Path(tmp, f"plan{ops}.{name}.json")
                wall, cpu = best_of(args.repeat, tree, model, plan, args.arch)
                rows[name].append((ops, wall, cpu))
                plans.append(plan.read_bytes())
                line += f"{wall:>17.2f}{cpu:>16.2f}"
            line += f"{ops / rows['this'][-1][2]:>11.0f}"
            if args.baseline:
                line += f"{rows['this'][-1][2] / rows['baseline'][-1][2]:>11.2f}"
                if plans[0] != plans[1]:
                    line += "  PLANS DIFFER"
            print(line, flush=True)
            if args.split:
                for name, tree in trees.items():
                    steps = split_seconds(tree, model, args.arch)
                    print(f"{'':>7}  {name} steps (CPU s): "
                          + ", ".join(f"{k} {v:.2f}" for k, v in steps.items())
                          + f"; total {sum(steps.values()):.2f}", flush=True)
    for name, data in rows.items():
        if len(data) < 2:
            continue
        xs = [ops / 1000 for ops, _, _ in data]
        a, b = linear_fit(xs, [cpu for _, _, cpu in data])
        aw, bw = linear_fit(xs, [wall for _, wall, _ in data])
        print(f"{name}: CPU s = {a:.2f} + {b:.3f} per 1000 operators; "
              f"wall s = {aw:.2f} + {bw:.3f} per 1000 operators")


if __name__ == "__main__":
    main()
