"""`planc check` and `planc simulate` on a Llama-2-7B decoder layer at sequence 2048.

    python bench/check_simulate.py [--seq 2048] [--smoke]

Both planners' plans (planc's for a100; ARK's default: 13.5M tasks): the whole commands timed
as subprocesses (wall and CPU seconds), beside the same-run baseline of importing and
verifying the plan (`planc PLAN -t ark -o /dev/null`: read, verify, write again). What the
simulation proved is printed with it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.ark_model import emit_model  # noqa: E402
from frontends.model_zoo import llama_decoder_layer  # noqa: E402

PLANC = [sys.executable, "-c", "import sys; from compiler.driver import main; sys.exit(main())"]


def timed(*args: str) -> tuple[float, float, subprocess.CompletedProcess]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([*PLANC, *args], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--smoke", action="store_true",
                        help="a layer of Llama's shape at 1/16 of its width, sequence 256")
    args = parser.parse_args()
    seq = 256 if args.smoke else args.seq
    shape = dict(hidden=256, heads=2, intermediate=512) if args.smoke else {}
    with tempfile.TemporaryDirectory() as scratch:
        model = Path(scratch) / "llama.json"
        model.write_text(emit_model(llama_decoder_layer(seq=seq, **shape)))
        print(f"# Llama-2-7B decoder layer{' (1/16 width)' if shape else ''}, sequence {seq}\n")
        print("| plan | task executions | import+verify+write | check | simulate | "
              "simulate mode |")
        print("|---|---|---|---|---|---|")
        proofs = {}
        for name, flags in (("planc a100", ("--arch", "a100")),
                            ("ARK default a100", ("--arch", "a100", "--planner",
                                                  "ark-default"))):
            plan = Path(scratch) / f"{name.replace(' ', '_')}.json"
            made = subprocess.run([*PLANC, str(model), "-t", "ark", *flags, "-o", str(plan)],
                                  cwd=ROOT, capture_output=True, text=True)
            if made.returncode:
                print(f"| {name} | refused: {made.stderr.strip()[:80]} | | | | |")
                continue
            base = timed(str(plan), "-t", "ark", "-o", str(Path(scratch) / "again.json"))
            check = timed("check", str(plan))
            sim = timed("simulate", str(plan), "--json")
            report = json.loads(sim[2].stdout)
            cells = [f"{w:.1f} s wall, {c:.1f} s CPU" for w, c, _ in (base, check, sim)]
            print(f"| {name} | {report.get('task_executions', 0):,} | {cells[0]} | "
                  f"{cells[1]} ({'ok' if check[2].returncode == 0 else 'errors'}) | "
                  f"{cells[2]} ({'ok' if report['ok'] else 'FAILED'}) | "
                  f"{report.get('mode', 'full')} |")
            proofs[name] = report.get("proved", [])
        for name, proved in proofs.items():
            print(f"\n{name}, what simulate proved:")
            for statement in proved:
                print(f"- {statement}")


if __name__ == "__main__":
    main()
