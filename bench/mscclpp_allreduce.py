"""Modeled time of planc's generated allreduce, against the alpha-beta lower bound and the
upstream corpus algorithms (run: python bench/mscclpp_allreduce.py [--hw h100] [--json]).

For 8 ranks and every power of two from 1 KB to 1 GB (or the `--sizes` given: any byte
counts, which run padded to what the picked plan's chunks take) it reports the algorithm planc picks
(`--algorithm auto`: the least modeled time over ring, allpairs, oneshot and nvls, Simple and
LL, 1-8 instances), the best one without the NVLink switch, and their ratio to the alpha-beta
lower bound of an allreduce over point-to-point links (launch + one hop +
2(p-1)/p n / link bandwidth; NVLS reduces in the switch and can beat it). Then, for every
allreduce plan of the upstream corpus (2 and 4 ranks), the ratio of planc's pick for the same
rank count to that plan's modeled time (below 1: planc's is faster). Everything is the cost
model's (`targets.mscclpp.cost`), measured in this run; nothing here is a hardware
measurement.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from frontends.mscclpp import import_document  # noqa: E402
from ground.json_reader import load_json_file  # noqa: E402
from targets.mscclpp.cost import (  # noqa: E402
    hardware_named,
    lower_bound,
    model_time,
    padded_message,
)
from targets.mscclpp.selection import candidates, fastest, modeled  # noqa: E402
from targets.mscclpp.synthesis import Spec  # noqa: E402

SIZES = [2**k for k in range(10, 31)]


def human(size: int) -> str:
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if size >= scale:
            return f"{size // scale}{unit}"
    return f"{size}B"


def corpus_plans() -> list[tuple[str, object]]:
    root = Path(os.environ.get("PLANC_CORPUS", Path(__file__).resolve().parents[2] /
                               "shared" / "corpus")) / "mscclpp"
    plans = []
    for path in sorted(root.glob("*.json")):
        algorithm = next(iter(import_document(load_json_file(path)).ops))
        if algorithm.collective_name == "allreduce":
            plans.append((path.name.replace("execution-plans__", "")
                          .replace("execution-files__", ""), algorithm))
    return plans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hw", default="h100", choices=("h100", "a100"))
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    parser.add_argument("--sizes", help="comma-separated byte counts (default: 1KB..1GB)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else SIZES
    hardware = hardware_named(args.hw)
    started = time.perf_counter()
    rows = []
    for size in sizes:
        spec = Spec("allreduce", args.ranks, "auto")
        best = fastest(spec, None, size, args.hw)
        timed = [(modeled(c, hardware, size), c) for c in candidates(spec)
                 if c.algorithm != "nvls"]
        point_time, point = min(((t, c) for t, c in timed if t is not None),
                                key=lambda pair: pair[0].seconds)
        bound = lower_bound("allreduce", args.ranks, size, hardware)
        rows.append({"size": size, "padded": padded_message(best.algorithm, size),
                     "pick": best.spec.name, "pick_s": best.timing.seconds,
                     "pick_vs_bound": best.timing.seconds / bound,
                     "point_to_point": point.name, "point_to_point_s": point_time.seconds,
                     "point_to_point_vs_bound": point_time.seconds / bound,
                     "bound_s": bound})
    corpus = []
    for name, plan in corpus_plans():
        ranks = plan.num_ranks
        for size in sizes:
            try:
                theirs = model_time(plan, hardware, size)
            except Exception:  # noqa: BLE001 -- the plan cannot take this size
                continue
            if theirs is None:
                continue
            ours = fastest(Spec("allreduce", ranks, "auto"), None, size, args.hw)
            corpus.append({"plan": name, "ranks": ranks, "size": size,
                           "corpus_s": theirs.seconds, "planc": ours.spec.name,
                           "planc_s": ours.timing.seconds,
                           "planc_vs_corpus": ours.timing.seconds / theirs.seconds})
    elapsed = time.perf_counter() - started
    if args.json:
        print(json.dumps({"hardware": args.hw, "ranks": args.ranks, "allreduce": rows,
                          "corpus": corpus, "seconds": elapsed}, indent=1))
        return
    print(f"# allreduce, {args.ranks} ranks, {args.hw} cost model (modeled, not measured)\n")
    print("| size | padded | planc pick | time | / bound | best without NVLS | time | / bound |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {human(r['size'])} | {r['padded']} | {r['pick']} | {r['pick_s'] * 1e6:.1f} us | "
              f"{r['pick_vs_bound']:.2f} | {r['point_to_point']} | "
              f"{r['point_to_point_s'] * 1e6:.1f} us | {r['point_to_point_vs_bound']:.2f} |")
    print("\n# planc's pick / corpus plan (same ranks and size; < 1: planc faster)\n")
    names = sorted({c["plan"] for c in corpus})
    print("| size | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for size in sizes:
        cells = []
        for name in names:
            match = [c for c in corpus if c["plan"] == name and c["size"] == size]
            cells.append(f"{match[0]['planc_vs_corpus']:.2f}" if match else "-")
        print(f"| {human(size)} | " + " | ".join(cells) + " |")
    print(f"\n({elapsed:.1f} s)")


if __name__ == "__main__":
    main()
