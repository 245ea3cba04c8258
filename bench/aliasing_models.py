"""Generated aliasing models through every target: a larger run of the suite's fixed seeds.

    python bench/aliasing_models.py [--seeds 200] [--first 0] [--cpu 0]

Each seed's model (`tests.sched.aliasing_models.random_model`: concat by slices, KV-cache row
updates, in-place updates read through earlier views, slice reads, fan-out; FP32, FP16, BF16
or INT32) is planned for a100, h100 and mi300x and proven equal to the model by the plan
simulator, lowered to Tenstorrent and checked tile by tile, and for the first `--cpu` seeds
also emitted, built and run as a CPU program. Printed: per target, how many models passed,
failed (planc exited 0 with a wrong plan) or were refused (a clean planc error), with the
first messages of each failure. Nothing here is timed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ground.diagnostics import PlancError  # noqa: E402
from tests.sched.aliasing_models import random_model  # noqa: E402
from tests.sched.test_aliasing import assert_plans_compute, assert_tt_computes  # noqa: E402
from tests.sched.test_cpu_programs import check_program  # noqa: E402

TARGETS = ("a100", "h100", "mi300x", "tt", "cpu")


def check(target: str, seed: int) -> None:
    build = lambda: random_model(seed)  # noqa: E731
    if target == "tt":
        assert_tt_computes(build)
    elif target == "cpu":
        with tempfile.TemporaryDirectory(prefix="planc-alias-") as work:
            check_program(build(), "a100", Path(work))
    else:
        assert_plans_compute(build, target)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200, help="how many models")
    parser.add_argument("--first", type=int, default=0, help="the first seed")
    parser.add_argument("--cpu", type=int, default=0,
                        help="also run the first N models as CPU programs (needs g++)")
    args = parser.parse_args()
    counts: dict[str, Counter] = {t: Counter() for t in TARGETS}
    failures: list[str] = []
    for seed in range(args.first, args.first + args.seeds):
        for target in TARGETS:
            if target == "cpu" and seed >= args.first + args.cpu:
                continue
            try:
                check(target, seed)
                counts[target]["passed"] += 1
            except PlancError as error:
                counts[target]["refused"] += 1
                failures.append(f"seed {seed} {target}: refused: {error}")
            except AssertionError as error:
                counts[target]["failed"] += 1
                failures.append(f"seed {seed} {target}: WRONG: {str(error)[:300]}")
    print(f"seeds {args.first}..{args.first + args.seeds - 1}")
    print(f"{'target':8} {'passed':>7} {'failed':>7} {'refused':>8}")
    for target, c in counts.items():
        if sum(c.values()):
            print(f"{target:8} {c['passed']:7} {c['failed']:7} {c['refused']:8}")
    for line in failures[:20]:
        print(line)
    return 1 if any(c["failed"] for c in counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
