"""A Llama-2-7B decoder layer (sequence 2048) through every command of issue 26, item 1.

    python bench/llama_layer.py [--seq 2048] [--baseline TREE] [--skip-simulate] [--smoke]

The layer of `frontends.model_zoo.llama_decoder_layer`, written to an ARK model file, then as
whole `planc` subprocesses (CPU seconds, user + system; start-up, reading, verification and
writing all count): the tt lowering (wormhole_b0 and blackhole), `planc check` and
`planc simulate --cost-only` of the wormhole_b0 plan, the ARK lowering for a100 and the
functional `planc simulate` of that ARK plan (its stated sample printed below the table).
With `--baseline TREE` (older code, e.g. `git archive` of main) each command also runs with
that tree's code on the same inputs, interleaved, with the ratio and whether the two outputs
are byte-identical. Target: at most 10 s each, the functional simulate at most 60 s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.ark_model import emit_model  # noqa: E402
from frontends.model_zoo import llama_decoder_layer  # noqa: E402


def run(tree: Path, args: list[str], out: Path) -> tuple[float, int]:
    """(CPU s, exit status) of `planc ARGS` with `tree`'s code, its stdout in `out`."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    with out.open("w") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "compiler.driver", *args], env=env,
                                cwd=tree, stdout=sink, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
    return usage.ru_utime + usage.ru_stime, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--baseline", type=Path, metavar="TREE")
    parser.add_argument("--skip-simulate", action="store_true",
                        help="leave out the functional simulate (about a minute each)")
    parser.add_argument("--smoke", action="store_true",
                        help="a layer of Llama's shape at 1/16 of its width, sequence 64")
    args = parser.parse_args()
    shape = dict(hidden=256, heads=2, intermediate=512) if args.smoke else {}
    seq = 64 if args.smoke else args.seq
    trees = {"planc": ROOT} | ({"before": args.baseline.resolve()} if args.baseline else {})
    with tempfile.TemporaryDirectory() as tmp:
        s = Path(tmp)
        model = s / "llama.json"
        model.write_text(emit_model(llama_decoder_layer(seq=seq, **shape)))
        tt, ark = s / "llama.tt.json", s / "llama.ark.json"
        # Inputs made once with this tree's code, so that both trees read the same plans.
        for target, extra, plan in (("tt", [], tt), ("ark", ["--arch", "a100"], ark)):
            subprocess.run([sys.executable, "-m", "compiler.driver", str(model), "-t", target,
                            *extra, "-o", str(plan), "-q"], cwd=ROOT, check=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        commands = [
            ("-t tt (wormhole_b0)", [str(model), "-t", "tt", "-o", "{out}", "-q"]),
            ("-t tt --arch blackhole", [str(model), "-t", "tt", "--arch", "blackhole", "-o",
                                        "{out}", "-q"]),
            ("check of the tt plan", ["check", str(tt)]),
            ("simulate --cost-only of the tt plan", ["simulate", "--cost-only", str(tt)]),
            ("-t ark --arch a100", [str(model), "-t", "ark", "--arch", "a100", "-o", "{out}",
                                    "-q"]),
        ]
        if not args.skip_simulate:
            commands.append(("simulate of the a100 ARK plan", ["simulate", str(ark), "--json"]))
        print(f"# Llama-2-7B decoder layer{' (1/16 width)' if shape else ''}, sequence {seq}: "
              "CPU s per command\n")
        head = "| command | " + " | ".join(trees) + (" | ratio | same output |"
                                                     if args.baseline else " |")
        print(head)
        print("|" + "---|" * (head.count("|") - 1))
        report = None
        for name, argv in commands:
            cells, outputs = [], []
            for tree_name, tree in trees.items():
                out = s / f"{tree_name}.out"
                stdout = s / f"{tree_name}.stdout"
                seconds, status = run(tree, [a.replace("{out}", str(out)) for a in argv],
                                      stdout)
                cells.append(f"{seconds:.1f}" + ("" if status == 0 else f" (exit {status})"))
                made = out if "{out}" in argv else stdout
                outputs.append(made.read_bytes() if made.exists() else b"")
                if tree_name == "planc" and "--json" in argv:
                    report = json.loads(stdout.read_text())
            row = f"| {name} | " + " | ".join(cells)
            if args.baseline:
                ratio = float(cells[0].split()[0]) / float(cells[1].split()[0])
                row += f" | {ratio:.2f} | {'yes' if outputs[0] == outputs[1] else 'NO'}"
            print(row + " |", flush=True)
        if report is not None:
            print(f"\nsimulate's mode: {report.get('mode', 'full')}; what it proved:")
            for statement in report.get("proved", []):
                print(f"- {statement}")


if __name__ == "__main__":
    main()
