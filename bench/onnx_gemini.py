"""The nine light networks that ship with the onnx package, on Gemini meshes 1x1 to 4x4.

    python bench/onnx_gemini.py [--smoke] [--mesh 2x2 ...] [--network vgg ...]

For each network and mesh: planc's schedule (`planc NET.onnx --target gemini --mesh M`), its
modeled latency and peak L2 per core (`planc simulate`), or the one-line reason planc gives
when Gemini cannot express the network. The baseline is the 1x1 mesh of the same run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
PLANC = [sys.executable, "-c", "import sys; from compiler.driver import main; sys.exit(main())"]


def planc(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PLANC, *args], cwd=ROOT, capture_output=True, text=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--smoke", action="store_true", help="one network, the 1x1 mesh")
    parser.add_argument("--mesh", action="append", help="a mesh to run (repeatable; default "
                        "1x1, 2x2 and 4x4)")
    parser.add_argument("--network", action="append", help="only networks whose name "
                        "contains this (repeatable)")
    args = parser.parse_args()
    networks = sorted(LIGHT.glob("light_*.onnx"))
    meshes = ["1x1"] if args.smoke else args.mesh or ["1x1", "2x2", "4x4"]
    if args.smoke:
        networks = [n for n in networks if "resnet50" in n.name]
    if args.network:
        networks = [n for n in networks if any(w in n.name for w in args.network)]
    print("| network | mesh | compile s | latency | vs 1x1 | peak L2 per core |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as scratch:
        for net in networks:
            base = None
            for mesh in meshes:
                out = Path(scratch) / f"{net.stem}.{mesh}.json"
                started = time.perf_counter()
                made = planc(str(net), "-t", "gemini", "--mesh", mesh, "-o", str(out))
                seconds = time.perf_counter() - started
                if made.returncode:
                    reason = made.stderr.strip().split(".onnx: ", 1)[-1][:110]
                    print(f"| {net.stem} | {mesh} | {seconds:.1f} | refused: {reason} | | |")
                    break
                report = json.loads(planc("simulate", str(out), "--json").stdout)
                base = base or report["latency_cycles"]
                print(f"| {net.stem} | {mesh} | {seconds:.1f} | "
                      f"{report['modeled_time_s'] * 1e3:.2f} ms | "
                      f"{report['latency_cycles'] / base:.2f} | "
                      f"{report['peak_l2_bytes'] / 1e6:.2f} MB |")


if __name__ == "__main__":
    main()
