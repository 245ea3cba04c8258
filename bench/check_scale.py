"""Check scale: `planc check` on planc's own plans of generated models, against their compile.

    python bench/check_scale.py [--ops 1000,10000,50000] [--arch a100] [--repeat 1]

Generated models (`frontends.model_zoo.generated`: stacks of pre-norm MLP blocks, matmul,
add, GELU, RMSNorm, 10 operators each) are written to ARK model files. Per size, in the same
run and as a user runs them (a subprocess each: start-up, imports, reading and verifying all
count):

* `compile`: `planc MODEL --target ark --arch ARCH -o PLAN` with translation validation off
  (`PLANC_VALIDATE=0`);
* `compile+validate`: the same command as shipped (the plan's symbolic proof,
  `targets.ark.plan_check`, runs before the plan is written);
* `check`: `planc check PLAN` on that plan.

Printed: CPU seconds (user + system of the subprocess, the best of `--repeat` runs) and the
ratios check / compile (issue 25's target: at most 2) and compile+validate / compile (at most
1.3). CPU seconds, not wall: the machine is shared.
"""

from __future__ import annotations

import argparse
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


def run(args: list[str], **env: str) -> tuple[float, float]:
    """(wall s, CPU s) of one planc command with this tree's code; it must exit 0."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "compiler.driver", *args], env=environ,
                            cwd=ROOT, stdout=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"planc {' '.join(args)} failed ({code})")
    return wall, usage.ru_utime + usage.ru_stime


def best(repeat: int, args: list[str], **env: str) -> float:
    return min(run(args, **env)[1] for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="1000,10000,50000")
    parser.add_argument("--arch", default="a100")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    print(f"{'operators':>9} {'compile s':>10} {'+validate s':>12} {'check s':>8} "
          f"{'check/compile':>14} {'validate/compile':>17}")
    with tempfile.TemporaryDirectory() as tmp:
        # Warm-up: the first command compiles the tree's bytecode and writes planc's caches
        # (as an installed planc's first command does); it is not timed.
        warm = Path(tmp, "warm.json")
        warm.write_text(emit_model(generated(20)))
        run([str(warm), "--target", "ark", "--arch", args.arch, "-o", str(warm) + ".plan"])
        for ops in (int(n) for n in args.ops.split(",")):
            model, plan = Path(tmp, f"m{ops}.json"), Path(tmp, f"p{ops}.json")
            model.write_text(emit_model(generated(ops)))
            command = [str(model), "--target", "ark", "--arch", args.arch, "-o", str(plan)]
            compile_s = best(args.repeat, command, PLANC_VALIDATE="0")
            validated_s = best(args.repeat, command, PLANC_VALIDATE="1")
            check_s = best(args.repeat, ["check", str(plan)])
            print(f"{ops:>9} {compile_s:>10.2f} {validated_s:>12.2f} {check_s:>8.2f} "
                  f"{check_s / compile_s:>14.2f} {validated_s / compile_s:>17.2f}", flush=True)


if __name__ == "__main__":
    main()
