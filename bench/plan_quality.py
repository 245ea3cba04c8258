"""Plan quality: planc's ARK plans against ARK's default planner, as ratios.

    python bench/plan_quality.py [--arch a100,h100,mi300x] [--seq 2048]

For the example models, ARK's tutorial FFN (when the corpus is present) and a Llama-2-7B
decoder layer at sequence length 2048, both planners plan the model for each GPU; the cost
model gives each plan's modeled time and the executor's memory layout its device bytes.
Printed: planc / ARK-default ratios of modeled time, of device bytes (everything the plan
allocates, weights included) and of activation bytes (what is not a model input or weight).
Targets (issue 3): time <= 0.75x and bytes <= 0.6x on the FFN and the decoder layer.

Models ARK's default planner rejects (a default matmul tile that does not divide M or N) are
planned with `partial-tiles=true` and marked with `*`.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.ark_plan import model_pipeline, single_plan  # noqa: E402
from compiler.diagnostics import PlancError  # noqa: E402
from compiler.driver import run_pipeline, without_garbage_collection  # noqa: E402
from compiler.json_reader import load_json_file  # noqa: E402
from compiler.plan_simulator import simulate  # noqa: E402
from frontends.ark_model import import_document  # noqa: E402
from frontends.model_zoo import llama_decoder_layer  # noqa: E402

TARGETS = {"ffn": (0.75, 0.6), "llama-7b layer": (0.75, 0.6)}


def models(seq: int) -> dict:
    found = {"ffn": lambda: import_document(load_json_file(ROOT / "examples" / "ffn.json")),
             "attention": lambda: import_document(
                 load_json_file(ROOT / "examples" / "attention.json"))}
    tutorial = ROOT.parent / "shared" / "corpus" / "ark" / "tutorial_model.json"
    if tutorial.is_file():
        found["tutorial ffn"] = lambda: import_document(load_json_file(tutorial))
    found["llama-7b layer"] = lambda: llama_decoder_layer(seq=seq)
    return found


def plan(build, arch: str, planner: str) -> tuple[dict, float, bool]:
    """(cost-only simulation report, compile seconds, whether partial tiles were needed)."""
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
        return simulate(single_plan(module), functional=False), seconds, partial
    raise AssertionError("unreachable")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default="a100,h100,mi300x")
    parser.add_argument("--seq", type=int, default=2048)
    args = parser.parse_args()
    header = (f"{'model':<16}{'arch':<8}{'planc us':>10}{'ARK us':>10}{'time':>7}"
              f"{'planc MB':>10}{'ARK MB':>10}{'bytes':>7}{'act.':>7}{'compile s':>10}  target")
    print(header)
    print("-" * len(header))
    for name, build in models(args.seq).items():
        for arch in args.arch.split(","):
            ours, seconds, _ = plan(build, arch, "planc")
            theirs, _, partial = plan(build, arch, "ark-default")
            time_ratio = ours["modeled_time_s"] / theirs["modeled_time_s"]
            bytes_ratio = ours["device_bytes"] / theirs["device_bytes"]
            act_ratio = ours["activation_bytes"] / theirs["activation_bytes"]
            verdict = ""
            if name in TARGETS:
                t_goal, b_goal = TARGETS[name]
                verdict = (f"time {'met' if time_ratio <= t_goal else 'MISSED'}, bytes "
                           f"{'met' if bytes_ratio <= b_goal else 'MISSED'} (activations "
                           f"{'met' if act_ratio <= b_goal else 'MISSED'})")
            print(f"{name:<16}{arch:<8}{ours['modeled_time_s'] * 1e6:>10.1f}"
                  f"{theirs['modeled_time_s'] * 1e6:>9.1f}{'*' if partial else ' '}"
                  f"{time_ratio:>7.2f}{ours['device_bytes'] / 2**20:>10.1f}"
                  f"{theirs['device_bytes'] / 2**20:>10.1f}{bytes_ratio:>7.2f}{act_ratio:>7.2f}"
                  f"{seconds:>10.2f}  {verdict}")
    print("\ntime, bytes, act.: planc / ARK default (modeled time, device bytes, activation "
          "bytes = device bytes minus inputs and weights); * ARK default with partial tiles")


if __name__ == "__main__":
    main()
