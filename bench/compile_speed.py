"""Compile speed: how fast planc turns an ARK model into an ARK plan.

    python bench/compile_speed.py [--ops 1000,10000] [--arch a100]

Generated models (`frontends.model_zoo.generated`: stacks of pre-norm MLP blocks, 10
operators each) are built in memory, then compiled as `planc MODEL --target ark` does: the
planning pipeline (the `ark-plan` pass and the verification of its result) and the emission of
the plan file. Printed: seconds per stage, total, and operators per second (the issue's target
is 10k operators in under 3 s; cost should grow linearly with size, i.e. ops/s stay flat).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from xdsl.passes import PassPipeline  # noqa: E402

from backends.ark_plan import emit_plan, model_pipeline  # noqa: E402
from compiler.context import planc_context  # noqa: E402
from compiler.driver import without_garbage_collection  # noqa: E402
from compiler.locations import verify_module  # noqa: E402
from frontends.model_zoo import generated  # noqa: E402
from passes import get_all_passes  # noqa: E402


def compile_once(ops: int, arch: str) -> dict[str, float]:
    module = generated(ops)
    (plan_pass,) = PassPipeline.parse_spec(get_all_passes(), model_pipeline(arch)).passes
    times = {}
    with without_garbage_collection():
        start = time.perf_counter()
        plan_pass.apply(planc_context(), module)
        times["passes"] = time.perf_counter() - start
        start = time.perf_counter()
        verify_module(module)
        times["verify"] = time.perf_counter() - start
        start = time.perf_counter()
        text = emit_plan(module)
        times["emit"] = time.perf_counter() - start
    times["total"] = sum(times.values())
    times["megabytes"] = len(text) / 2**20
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", default="1000,10000")
    parser.add_argument("--arch", default="a100")
    args = parser.parse_args()
    print(f"{'ops':>7}{'passes s':>10}{'verify s':>10}{'emit s':>9}{'total s':>9}{'ops/s':>9}"
          f"{'plan MB':>9}")
    for ops in map(int, args.ops.split(",")):
        t = compile_once(ops, args.arch)
        print(f"{ops:>7}{t['passes']:>10.2f}{t['verify']:>10.2f}{t['emit']:>9.2f}"
              f"{t['total']:>9.2f}{ops / t['total']:>9.0f}{t['megabytes']:>9.1f}")


if __name__ == "__main__":
    main()
