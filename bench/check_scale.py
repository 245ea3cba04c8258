"""Check scale: `planc check` on planc's own plans of generated models, against their compile.

    python bench/check_scale.py [--ops 1000,10000,50000] [--arch a100] [--repeat 1] [--llama]

Generated models (`frontends.model_zoo.generated`: stacks of pre-norm MLP blocks, matmul,
add, GELU, RMSNorm, 10 operators each) are written to ARK model files. Per size, in the same
run and as a user runs them (a subprocess each: start-up, imports, reading and verifying all
count):

* `compile`: `planc MODEL --target ark --arch ARCH -o PLAN` with translation validation off
  (`PLANC_VALIDATE=0`);
* `compile+validate`: the same command as shipped (the plan's symbolic proof,
  `targets.ark.plan_check`, and the proof of the model it carries against the input model,
  `targets.ark.equivalence`, run before the plan is written);
* `input proof`: the CPU seconds of the proof against the input model inside that command
  (the input's snapshot before the pipeline and the comparison after, as `planc -v` logs
  them), a part of `compile+validate`;
* `check`: `planc check PLAN` on that plan.

Printed: CPU seconds (user + system of the subprocess, the best of `--repeat` runs) and the
ratios check / compile (issue 25's target: at most 2), compile+validate / compile (at most
1.3) and input proof / compile. CPU seconds, not wall: the machine is shared. `--llama` adds a
row for a Llama-2-7B decoder layer (sequence 2048, `frontends.model_zoo`).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.ark_model import emit_model  # noqa: E402
from frontends.model_zoo import generated, llama_decoder_layer  # noqa: E402

PROOF_LINE = re.compile(r"proof against the input model: ([0-9.]+) CPU s")


def run(args: list[str], **env: str) -> tuple[float, float, float | None]:
    """(wall s, CPU s, CPU s of the proof against the input when it logged one) of one planc
    command with this tree's code; it must exit 0."""
    environ = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    start = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "compiler.driver", *args], env=environ,
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
        _, status, usage = os.wait4(proc.pid, 0)
        log.seek(0)
        found = PROOF_LINE.search(log.read().decode(errors="replace"))
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"planc {' '.join(args)} failed ({code})")
    return wall, usage.ru_utime + usage.ru_stime, float(found[1]) if found else None


def best(repeat: int, args: list[str], **env: str) -> tuple[float, float | None]:
    """(CPU s, proof CPU s) of the run of least CPU of `repeat`."""
    return min((run(args, **env)[1:] for _ in range(repeat)), key=lambda r: r[0])


def row(label: str, model: Path, plan: Path, arch: str, repeat: int) -> None:
    command = [str(model), "--target", "ark", "--arch", arch, "-o", str(plan)]
    compile_s = best(repeat, command, PLANC_VALIDATE="0")[0]
    validated_s, proof_s = best(repeat, [*command, "-v"], PLANC_VALIDATE="1")
    check_s = best(repeat, ["check", str(plan)])[0]
    proof_s = proof_s or 0.0
    print(f"{label:>9} {compile_s:>10.2f} {validated_s:>12.2f} {proof_s:>12.2f} "
          f"{check_s:>8.2f} {check_s / compile_s:>14.2f} {validated_s / compile_s:>17.2f} "
          f"{proof_s / compile_s:>14.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="1000,10000,50000")
    parser.add_argument("--arch", default="a100")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--llama", action="store_true",
                        help="also a Llama-2-7B decoder layer at sequence 2048")
    args = parser.parse_args()
    print(f"{'operators':>9} {'compile s':>10} {'+validate s':>12} {'input proof':>12} "
          f"{'check s':>8} {'check/compile':>14} {'validate/compile':>17} "
          f"{'input/compile':>14}")
    with tempfile.TemporaryDirectory() as tmp:
        # Warm-up: the first command compiles the tree's bytecode and writes planc's caches
        # (as an installed planc's first command does); it is not timed.
        warm = Path(tmp, "warm.json")
        warm.write_text(emit_model(generated(20)))
        run([str(warm), "--target", "ark", "--arch", args.arch, "-o", str(warm) + ".plan"])
        for ops in (int(n) for n in args.ops.split(",") if n):
            model, plan = Path(tmp, f"m{ops}.json"), Path(tmp, f"p{ops}.json")
            model.write_text(emit_model(generated(ops)))
            row(str(ops), model, plan, args.arch, args.repeat)
        if args.llama:
            model, plan = Path(tmp, "llama.json"), Path(tmp, "llama.plan.json")
            model.write_text(emit_model(llama_decoder_layer(seq=2048)))
            row("llama", model, plan, args.arch, args.repeat)


if __name__ == "__main__":
    main()
