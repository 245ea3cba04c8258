"""Plan quality: planc's ARK plans against ARK's default planner, as ratios.

    python bench/plan_quality.py [--arch a100,h100,mi300x] [--seq 2048]

For the example models, ARK's tutorial FFN (when the corpus is present) and a Llama-2-7B
decoder layer at sequence length 2048, both planners plan the model for each GPU; the cost
model gives each plan's modeled time and the executor's memory layout its device bytes.
Printed: planc / ARK-default ratios of modeled time under planc's cost model and under an
independent plain roofline (bench/roofline.py: no per-task, latency or barrier term), each
plan's roofline time over the roofline's lower bound for the model, and ratios of device bytes
(everything the plan allocates, weights included) and of activation bytes (what is not a model
input or weight). Targets (issue 13): planc never slower than ARK's default under either model,
geometric mean <= 0.5 under the roofline; (issue 3) bytes <= 0.6x on the FFN and the layer.

Models ARK's default planner rejects (a default matmul tile that does not divide M or N) are
planned with `partial-tiles=true` and marked with `*`.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from roofline import plan_seconds as plain_seconds  # noqa: E402

from backends.ark_plan import model_pipeline, single_plan  # noqa: E402
from compiler.pipeline import run_pipeline, without_garbage_collection  # noqa: E402
from devices.hardware import gpu_device  # noqa: E402
from dialects.plan import barriers  # noqa: E402
from frontends.ark_model import import_document  # noqa: E402
from frontends.model_builder import ModelBuilder  # noqa: E402
from frontends.model_zoo import llama_decoder_layer  # noqa: E402
from ground.diagnostics import PlancError  # noqa: E402
from ground.json_reader import load_json_file  # noqa: E402
from targets.ark import static_roofline  # noqa: E402
from targets.ark.plan_simulator import simulate  # noqa: E402


def matmul_model(m: int, n: int, k: int):
    """One FP16 matmul [1, m, k] x [n, k]^T, the shape of a Llama projection at a short
    sequence (where split-K and the processor count decide)."""
    b = ModelBuilder()
    b.matmul(b.tensor([1, m, k]), b.tensor([n, k]), transpose_other=True)
    return b.finish()


def models(seq: int) -> dict:
    found = {"ffn": lambda: import_document(load_json_file(ROOT / "examples" / "ffn.json")),
             "attention": lambda: import_document(
                 load_json_file(ROOT / "examples" / "attention.json"))}
    corpus = Path(os.environ.get("PLANC_CORPUS", ROOT.parent / "shared" / "corpus"))
    tutorial = corpus / "ark" / "tutorial_model.json"
    if tutorial.is_file():
        found["tutorial ffn"] = lambda: import_document(load_json_file(tutorial))
    found["matmul 256x11008x4096"] = lambda: matmul_model(256, 11008, 4096)
    found["llama-7b layer"] = lambda: llama_decoder_layer(seq=seq)
    return found


def stage_floor(p, device) -> float:
    """The static roofline's floor for any plan cut into the same processor groups: each
    group's own bound (its FLOPs at the whole device's rates, or what it reads from and writes
    to device memory at full bandwidth, whichever is longer; the groups run one after another
    and every ARK operator's output lives in device memory between them) plus `BARRIER_S` per
    grid barrier. A plan of these stages is at least this slow, whatever its tiles."""
    operators = p.task_operators()
    groups = p.processor_groups()
    floor = 0.0
    for pg, syncs in zip(groups, barriers(groups), strict=True):
        ops = list(dict.fromkeys(op for rg in pg.resource_groups() for tg in rg.task_groups()
                                 for op in operators.get(tg.task, ())))
        floor += static_roofline.bound(ops, device) if ops else 0.0
        floor += len(syncs) * static_roofline.BARRIER_S
    return floor


def plan(build, arch: str, planner: str) -> tuple[dict, float, bool]:
    """(cost-only simulation report with the static roofline's `static_s` and `bound_s` and
    the plain roofline's `plain_s`, compile
    seconds, whether partial tiles were needed)."""
    for partial in (False, True):
        module = build()
        spec = model_pipeline(arch, planner)
        if partial:
            spec = spec.replace("}", " partial-tiles=true}")
        try:
            with without_garbage_collection():
                start = time.perf_counter()
                run_pipeline(module, spec)
                seconds = time.perf_counter() - start
        except PlancError:
            if planner != "ark-default" or partial:
                raise
            continue
        p = single_plan(module)
        report = simulate(p, functional=False)
        device = gpu_device(arch)
        report.update(static_s=static_roofline.plan_seconds(p, device),
                      bound_s=static_roofline.plan_bound(p, device),
                      floor_s=stage_floor(p, device),
                      plain_s=plain_seconds(p, device))
        return report, seconds, partial
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="a100,h100,mi300x")
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--models", default="", help="comma-separated model names (default: "
                        "all)")
    args = parser.parse_args()
    header = (f"{'model':<22}{'arch':<8}{'planc us':>10}{'ARK us':>10}{'cost':>7}"
              f"{'static':>7}{'p/bound':>8}{'floor':>7}{'A/bound':>8}{'plain':>7}{'bytes':>7}"
              f"{'act.':>7}"
              f"{'compile s':>10}")
    print(header)
    print("-" * len(header))
    chosen = set(filter(None, args.models.split(",")))
    ratios: dict[str, list[float]] = {"cost": [], "static roofline": [], "plain roofline": []}
    for name, build in models(args.seq).items():
        if chosen and name not in chosen:
            continue
        for arch in args.arch.split(","):
            ours, seconds, _ = plan(build, arch, "planc")
            theirs, _, partial = plan(build, arch, "ark-default")
            cost = ours["modeled_time_s"] / theirs["modeled_time_s"]
            static = ours["static_s"] / theirs["static_s"]
            plain = ours["plain_s"] / theirs["plain_s"]
            ratios["cost"].append(cost)
            ratios["static roofline"].append(static)
            ratios["plain roofline"].append(plain)
            bytes_ratio = ours["device_bytes"] / theirs["device_bytes"]
            act_ratio = ours["activation_bytes"] / theirs["activation_bytes"]
            slower = " SLOWER" if max(cost, static) > 1.0 else ""
            print(f"{name:<22}{arch:<8}{ours['modeled_time_s'] * 1e6:>10.1f}"
                  f"{theirs['modeled_time_s'] * 1e6:>9.1f}{'*' if partial else ' '}"
                  f"{cost:>7.2f}{static:>7.2f}{ours['static_s'] / ours['bound_s']:>8.2f}"
                  f"{ours['floor_s'] / ours['bound_s']:>7.2f}"
                  f"{theirs['static_s'] / theirs['bound_s']:>8.2f}{plain:>7.2f}"
                  f"{bytes_ratio:>7.2f}{act_ratio:>7.2f}{seconds:>10.2f}{slower}")
    for model, values in ratios.items():
        if values:
            mean = math.exp(sum(map(math.log, values)) / len(values))
            print(f"geometric mean planc / ARK default, {model}: {mean:.2f} (worst "
                  f"{max(values):.2f})")
    print("\ncost: planc / ARK default under planc's cost model; static: the same under the "
          "static-distribution roofline (targets/ark/static_roofline.py: ARK's task_seq, "
          "waves quantised, Little's law, 2 us barriers); p/bound, A/bound: planc's and ARK's "
          "static-roofline time over the bound of the plan's own operators; floor: the least "
          "time of any plan of planc's processor groups (each group's own bound, one after "
          "another, plus the barriers) over that bound; plain: the ratio "
          "under the plain roofline (bench/roofline.py: no waves); bytes, act.: device and "
          "activation bytes; * ARK default with partial tiles")


if __name__ == "__main__":
    main()
