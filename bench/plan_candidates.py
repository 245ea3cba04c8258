"""Every plan planc's matmul decisions can give a model, under both models.

    python bench/plan_candidates.py [MODEL.json] [--arch a100] [--top 12] [--limit 5000]

planc decides two things per matmul kernel with its models: the tiling (`sched-tile`: one of
the device's matmul kernels) and, for a kernel alone in its phase, a cut of K (`sched-partition`
split-K: the cuts `cut_candidates` lists, or none). This script builds the plan of every
combination of those choices over the model's matmul kernels (everything else as planc plans
it) and prints the best under the static-distribution roofline (`targets/ark/static_roofline.py`)
with its time under planc's cost model, planc's own plan marked `<- planc`. So it shows how
far the planner's candidates can reach, not only what it picked.

Also printed per matmul kernel, its *wave floor*: the least time any of its tilings takes on the
device's processors with K uncut, counting only compute (its FLOPs at a processor's share of the
device's rates, times the largest number of its tiles one processor runs): a kernel of 176
equal tiles on 108 processors runs two tiles on some processor however it is spread.

The decisions are made by wrapping the passes' own choice functions (`robust_choice`,
`split_plan`) for the runs of this script; the combinations are refused beyond `--limit`.
"""

from __future__ import annotations

import argparse
import itertools
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import passes.sched_partition as partition  # noqa: E402
import passes.sched_tile as tile  # noqa: E402
from backends.ark_plan import model_pipeline, single_plan  # noqa: E402
from compiler.pipeline import run_pipeline  # noqa: E402
from devices.hardware import gpu_device  # noqa: E402
from dialects import ark  # noqa: E402
from frontends.ark_model import import_document  # noqa: E402
from ground.diagnostics import PlancError  # noqa: E402
from ground.json_reader import load_json_file  # noqa: E402
from targets.ark import static_roofline  # noqa: E402
from targets.ark.plan_simulator import simulate  # noqa: E402


def label(ops) -> str:
    """A matmul kernel's name: its first matmul's."""
    return next(op.label.data for op in ops if isinstance(op, ark.MatmulOp))


class Chooser:
    """Stands in for planc's tiling and cut choices: `tilings[label]` picks a candidate by
    position, `cuts[label]` a cut's K parts (or None: uncut); a kernel not named keeps planc's
    choice. Records the candidates it was offered."""

    def __init__(self):
        self.tilings: dict[str, int] = {}
        self.cuts: dict[str, tuple[int, ...] | None] = {}
        self.offered: dict[str, list] = {}
        self.cut_offers: dict[str, list[tuple[int, ...]]] = {}
        self.picked: dict[str, int] = {}
        self.robust_choice, self.split_plan = tile.robust_choice, partition.split_plan

    def choose_tiling(self, ops, candidates, device):
        name = label(ops)
        self.offered[name] = [(c[0].configs[0]["TileShapeMNK"], c[0].tiles) for c in candidates]
        own = self.robust_choice(ops, candidates, device)
        self.picked[name] = next(i for i, c in enumerate(candidates) if c[0] is own)
        index = self.tilings.get(name)
        return own if index is None else candidates[index][0]

    def choose_cut(self, kernel, device, partial_bytes=math.inf):
        name = label(kernel.ops)
        offers = partition.cut_candidates(kernel, device, partial_bytes)
        self.cut_offers[name] = sorted({parts for _, parts in offers})
        if name not in self.cuts:
            return self.split_plan(kernel, device, partial_bytes)
        parts = self.cuts[name]
        # (`split_lone_matmuls` reads only the parts; the phases place them on processors)
        return None if parts is None else partition.SplitK(parts, (), 0.0, 0.0)

    def __enter__(self):
        tile.robust_choice, partition.split_plan = self.choose_tiling, self.choose_cut
        return self

    def __exit__(self, *exc):
        tile.robust_choice, partition.split_plan = self.robust_choice, self.split_plan


def build(path: Path, arch: str):
    """planc's plan of the model (with the chooser's decisions in force)."""
    module = import_document(load_json_file(path))
    run_pipeline(module, model_pipeline(arch, "planc"))
    return single_plan(module)


def kernel_compute(p, device) -> dict[str, float]:
    """Per matmul kernel of plan `p`: its FLOPs at the whole device's rates."""
    seconds = {}
    for ops in p.task_operators().values():
        if any(isinstance(op, ark.MatmulOp) for op in ops):
            work, dtype = static_roofline.ops_work(ops), static_roofline.dtype_of(ops)
            seconds[label(ops)] = (work.matmul / device.matmul_rate(dtype)
                                   + work.vector / device.vector_rate(dtype))
    return seconds


def wave_floor(compute: float, tile_counts, processors: int) -> float:
    """The least compute time of a kernel of `compute` seconds at the device's rates over its
    tilings of `tile_counts` equal tiles: a processor runs 1 / `processors` of the device's
    rate and at least ceil(tiles / processors) tiles (see the module docstring)."""
    return min(compute * processors / t * math.ceil(t / processors) for t in tile_counts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", nargs="?", default=str(ROOT / "examples" / "ffn.json"))
    parser.add_argument("--arch", default="a100")
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--limit", type=int, default=5000)
    args = parser.parse_args()
    path, device = Path(args.model), gpu_device(args.arch)
    chooser = Chooser()
    with chooser:
        own = build(path, args.arch)
        bound = static_roofline.plan_bound(own, device)
        own_static = static_roofline.plan_seconds(own, device)
        names = sorted(chooser.offered)
        picked = dict(chooser.picked)
        print(f"{path.name} on {args.arch}: bound {bound * 1e6:.2f} us, 1.25x "
              f"{1.25 * bound * 1e6:.2f} us; planc {own_static * 1e6:.2f} us "
              f"({own_static / bound:.3f}x)")
        print_floors(chooser, names, path, args.arch, device)
        rows = enumerate_plans(chooser, names, path, args, device)
    rows.sort(key=lambda r: (r[0], r[1]))
    print(f"\n{len(rows)} plans; the best {min(args.top, len(rows))} under the static roofline:")
    for static, cost, tilings, cuts in rows[:args.top]:
        mine = all(tilings[n] == picked[n] for n in names) and math.isclose(static, own_static)
        described = "; ".join(
            f"{n} {chooser.offered[n][tilings[n]][0][:2]} x{chooser.offered[n][tilings[n]][1]}"
            + (f" cut {list(cuts[n])}" if cuts.get(n) else "") for n in names)
        print(f"  static {static * 1e6:7.2f} us {static / bound:6.3f}x  cost {cost * 1e6:8.1f} us"
              f"  {described}{'  <- planc' if mine else ''}")


def print_floors(chooser: Chooser, names: list[str], path: Path, arch: str, device) -> None:
    """Each matmul kernel's wave floor over the tilings offered to it (its work from the plan
    with no cut)."""
    chooser.cuts = dict.fromkeys(names)
    compute = kernel_compute(build(path, arch), device)
    for name in names:
        counts = sorted({tiles for _, tiles in chooser.offered[name]})
        floor = wave_floor(compute[name], counts, device.processors)
        print(f"  {name}: {compute[name] * 1e6:.2f} us of compute at the device's rates, wave "
              f"floor {floor * 1e6:.2f} us (tile counts {counts})")
    chooser.cuts = {}


def enumerate_plans(chooser: Chooser, names: list[str], path: Path, args,
                    device) -> list[tuple[float, float, dict, dict]]:
    """(static s, cost s, tiling positions, cut parts) of every combination of choices."""
    combos = list(itertools.product(*(range(len(chooser.offered[n])) for n in names)))
    rows = []
    for positions in combos:
        chooser.tilings = dict(zip(names, positions, strict=True))
        chooser.cuts = dict.fromkeys(names)
        chooser.cut_offers = {}
        build(path, args.arch)  # (offers the cuts of these tilings)
        options = [[None, *chooser.cut_offers.get(n, [])] for n in names]
        cut_combos = list(itertools.product(*options))
        for cuts in cut_combos:
            if len(rows) >= args.limit:
                raise SystemExit(f"more than --limit {args.limit} plans: name a smaller model")
            chooser.cuts = dict(zip(names, cuts, strict=True))
            p = build(path, args.arch)
            cost = simulate(p, functional=False)["modeled_time_s"]
            rows.append((static_roofline.plan_seconds(p, device), cost,
                         dict(chooser.tilings), dict(chooser.cuts)))
    return rows


if __name__ == "__main__":
    try:
        main()
    except PlancError as error:
        raise SystemExit(f"plan_candidates: error: {error}") from None
