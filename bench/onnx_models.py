"""Real exports (tests/onnx/exports: tiny GPT-2, BERT, Llama, DistilBERT, Qwen2 and ViT, a
small ResNet and MobileNet, from torch.onnx's TorchScript and dynamo exporters) through every
target that holds them: ARK plans (a100, h100, mi300x) for all, Tenstorrent plans for the
transformers, Gemini schedules on a 1x1 and a 2x2 mesh for the CNNs.

    python bench/onnx_models.py [--smoke] [--model gpt2 ...] [--target a100 ...]

For each model and target: the compile time (ONNX import with onnxruntime's folding, then the
target's pipeline), the plan's modeled time (planc's cost model, `planc simulate --cost-only`)
and, for ARK plans, the plain roofline's time of the plan and its lower bound for the model
(bench/roofline.py: no per-task or latency term), with modeled / bound. Gemini schedules give
their modeled latency (`planc simulate`); planc has no roofline bound for Gemini's cores.
"""

from __future__ import annotations

import argparse
import sys
import time
from argparse import Namespace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from roofline import model_bound, plan_seconds  # noqa: E402

from backends.ark_plan import model_pipeline, single_plan  # noqa: E402
from backends.tt_plan import lowering_pipeline  # noqa: E402
from compiler.pipeline import run_pipeline, without_garbage_collection  # noqa: E402
from devices.hardware import gpu_device  # noqa: E402
from dialects import tt  # noqa: E402
from frontends.onnx import import_model  # noqa: E402
from frontends.onnx_model import load  # noqa: E402
from targets.ark.plan_simulator import simulate  # noqa: E402
from targets.tt.simulator import cost_only  # noqa: E402

EXPORTS = ROOT / "tests" / "onnx" / "exports"
TARGETS = ("a100", "h100", "mi300x", "tt", "gemini-1x1", "gemini-2x2")
CNNS = ("resnet", "mobilenet")


def targets_of(path: Path) -> tuple[str, ...]:
    if path.stem.split("_")[0] in CNNS:
        return ("a100", "h100", "mi300x", "gemini-1x1", "gemini-2x2")
    return ("a100", "h100", "mi300x", "tt")


def compile_model(path: Path, target: str):
    """(module, compile seconds)."""
    start = time.perf_counter()
    if target.startswith("gemini"):
        from compiler.api import compile as planc_compile

        product = planc_compile(path, "gemini", mesh=target.split("-")[1])
        return product, time.perf_counter() - start
    with without_garbage_collection():
        module = import_model(load(str(path)), str(path), wants=("ark-model",)).module
        if target == "tt":
            spec = lowering_pipeline(Namespace(arch=None, grid=None, partition=None))
        else:
            spec = model_pipeline(target)
        run_pipeline(module, spec)
    return module, time.perf_counter() - start


def figures(module, target: str) -> tuple[float, float | None, float | None]:
    """(modeled seconds, roofline seconds, roofline bound) of the product."""
    if target.startswith("gemini"):
        import tempfile

        from compiler.api import simulate as planc_simulate

        with tempfile.TemporaryDirectory() as scratch:
            schedule = Path(scratch) / "schedule.json"
            schedule.write_text(module)
            return planc_simulate(schedule).get("modeled_time_s"), None, None
    if target == "tt":
        plans = [p for op in module.ops if isinstance(op, tt.PlansOp) for p in op.plans()]
        return cost_only(plans).json()["modeled_time_s"], None, None
    p = single_plan(module)
    device = gpu_device(target)
    report = simulate(p, functional=False)
    return report["modeled_time_s"], plan_seconds(p, device), model_bound(p, device)


def us(seconds: float | None) -> str:
    return f"{seconds * 1e6:.2f}" if seconds is not None else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="one model on a100")
    parser.add_argument("--model", action="append", help="models whose name contains this")
    parser.add_argument("--target", action="append", choices=TARGETS)
    args = parser.parse_args()
    models = sorted(EXPORTS.glob("*.onnx"))
    if args.model:
        models = [m for m in models if any(s in m.stem for s in args.model)]
    targets = args.target or TARGETS
    if args.smoke:
        models, targets = models[:1], ["a100"]
    header = (f"{'model':<20}{'target':<12}{'compile s':>10}{'modeled us':>12}"
              f"{'roofline us':>13}{'bound us':>10}{'modeled/bound':>15}")
    print(header)
    print("-" * len(header))
    for path in models:
        for target in [t for t in targets if t in targets_of(path)]:
            module, seconds = compile_model(path, target)
            modeled, roof, bound = figures(module, target)
            ratio = f"{modeled / bound:.1f}" if bound else "-"
            print(f"{path.stem:<20}{target:<12}{seconds:>10.2f}{us(modeled):>12}"
                  f"{us(roof):>13}{us(bound):>10}{ratio:>15}")
    print("\nmodeled: planc's cost model; roofline and bound: bench/roofline.py (GPU plans only;"
          " the bound moves every input, weight and output once at the device's peak rates);"
          " Gemini: the schedule's modeled latency, no bound")


if __name__ == "__main__":
    main()
