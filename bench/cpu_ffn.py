"""GFLOP/s of planc's CPU program on the FFN example, against numpy doing the same model.

    python bench/cpu_ffn.py [--plan PLAN.json] [--model examples/ffn.json] [--iterations 10]
                            [--rounds 3] [--processors N]

The plan is `--plan`, else what `planc MODEL --target ark` makes of the model (the ARK planner),
else, while planc cannot plan models yet, one written here the way ARK's default planner would
(one task per operator, ARK's default tiles) on `--processors` processors. The plan is emitted
with `--target cpu`, built with the one-line command of the emitted README, checked against the
numpy model interpreter, and timed. numpy runs the same model in the same rounds, interleaved
with the program (the machine may be shared): directly (every operator as numpy computes it,
float32 BLAS matmuls, inputs converted to float32 beforehand, outputs rounded to their stored
type), and as planc's reference interpreter (`run_model`, which also models memory). Each side
reports its best round.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from backends.cpu import BUILD  # noqa: E402
from compiler import dtypes  # noqa: E402
from compiler.driver import main as planc  # noqa: E402
from compiler.model_interpreter import evaluate, run_model  # noqa: E402
from dialects import ark  # noqa: E402
from tests.codegen import plans, programs  # noqa: E402


def flops(model: ark.ModelOp) -> int:
    """Floating-point operations of one run: 2MNK per matmul, one per element elsewhere."""
    total = 0
    for op in model.operators():
        if isinstance(op, ark.MatmulOp):
            m, n, k = op.problem_mnk()
            total += 2 * m * n * k * math.prod(op.outputs[0].shape_list[:-2] or [1])
        elif isinstance(op, ark.ReduceOp):
            total += op.inputs[0].num_elements
        elif isinstance(op, (ark.UnaryOp, ark.BinaryOp, ark.ScalarAssignOp)):
            total += op.outputs[0].num_elements
    return total


def ark_default_tiles(model_doc: dict) -> dict[str, list[int]]:
    """ARK's default tiles (ark.md 1.4): matmul (256,128) if M > N else (128,256), K 64 for
    16-bit types and 32 for FP32; element-wise [64,1] if the last-but-one dim is larger, else
    [1,64]."""
    tiles = {}
    for node in model_doc["Nodes"]:
        op = node["Op"]
        out = [1] * 4 + op["ResultTensors"][0]["Shape"]
        if op["Type"] == "Matmul":
            m, n = out[-2], out[-1]
            tk = 32 if op["ResultTensors"][0]["DataType"] == "FP32" else 64
            tiles[op["Name"]] = [256, 128, tk] if m > n else [128, 256, tk]
        elif op["Type"] not in ("Embedding", "Noop") and not op["Type"].startswith("Reduce"):
            tiles[op["Name"]] = [64, 1] if out[-2] > out[-1] else [1, 64]
    return tiles


def make_plan(model_path: Path, work: Path, processors: int) -> tuple[Path, str]:
    target = work / "plan.json"
    with contextlib.redirect_stderr(io.StringIO()) as why:
        code = planc([str(model_path), "--target", "ark", "-o", str(target)])
    if code == 0:
        return target, "planc --target ark"
    doc = json.loads(model_path.read_text())
    target.write_text(json.dumps(plans.plan_doc(doc, processors=processors, warps=8,
                                                tiles=ark_default_tiles(doc))))
    reason = why.getvalue().strip().removeprefix("planc: error: ")
    return target, (f"one task per operator with ARK's default tiles, written here ({reason})")


def numpy_direct(model: ark.ModelOp, inputs: dict[int, np.ndarray]):
    """A function running the model with numpy on float32 copies of `inputs`."""
    prepared = {}
    for op in model.operators():
        for value in op.read_tensors:
            tensor = value.type
            if tensor.tensor_id in inputs:
                prepared[value] = dtypes.round_to(inputs[tensor.tensor_id], tensor.data_type)

    def run() -> None:
        values = dict(prepared)
        for op in model.operators():
            result = evaluate(op, [values[v] for v in op.read_tensors])
            for value, out in zip(op.result_tensors, op.outputs[:1], strict=False):
                values[value] = dtypes.round_to(result, out.data_type)

    return run


def best_time(function, repeat: int) -> float:
    best = math.inf
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", type=Path, help="an ARK plan of the model")
    parser.add_argument("--model", type=Path, default=ROOT / "examples" / "ffn.json")
    parser.add_argument("--iterations", type=int, default=10, help="runs per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--processors", type=int, default=os.cpu_count() or 1,
                        help="processors of the plan written here (when planc cannot plan)")
    args = parser.parse_args()

    model = plans.import_model_doc(json.loads(args.model.read_text()))
    model_op = next(op for op in model.ops if isinstance(op, ark.ModelOp))
    work = Path(tempfile.mkdtemp(prefix="planc-bench-"))
    plan_path, plan_source = (args.plan, "--plan") if args.plan else \
        make_plan(args.model, work, args.processors)
    program_dir = work / "program"
    if planc([str(plan_path), "--target", "cpu", "-o", str(program_dir)]) != 0:
        sys.exit("planc could not emit the plan")
    subprocess.run(BUILD.split(), cwd=program_dir, check=True)

    reference = run_model(model, seed=0)
    outputs = programs.run_program(program_dir / "plan", reference, work / "check")
    programs.compare(outputs, reference)
    error = max(float(np.max(np.abs(outputs[t] - reference.tensors[t]))) for t in outputs)

    listing = programs.manifest(program_dir)
    direct = numpy_direct(model_op, reference.inputs)
    program, numpy_time, interpreter = math.inf, math.inf, math.inf
    for _ in range(args.rounds):
        report = subprocess.run([program_dir / "plan", work / "check" / "in", work / "out",
                                 "--warmup", "1", "--iterations", str(args.iterations)],
                                capture_output=True, text=True, check=True).stdout
        program = min(program, float(re.search(r": ([0-9.e-]+) s per iteration", report)[1]))
        numpy_time = min(numpy_time, best_time(direct, args.iterations))
        interpreter = min(interpreter, best_time(lambda: run_model(model, reference.inputs), 1))

    work_flops = flops(model_op)
    plan_doc = json.loads(plan_path.read_text())
    print(f"model: {args.model.name} ({work_flops / 1e9:.3f} GFLOP per run, "
          f"{len(listing['inputs'])} inputs, outputs {[t['id'] for t in listing['outputs']]})")
    print(f"plan: {plan_source}: {plan_doc['NumProcessors']} processors x "
          f"{plan_doc['NumWarpsPerProcessor']} warps, {len(plan_doc['TaskInfos'])} tasks")
    print(f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}; "
          f"best of {args.rounds} rounds of {args.iterations} runs")
    print(f"{'':44} {'ms/run':>9} {'GFLOP/s':>9} {'vs numpy':>9}")
    for name, seconds in ((f"planc CPU program ({BUILD.split(' plan.cpp')[0]})", program),
                          ("numpy, direct (float32 BLAS)", numpy_time),
                          ("numpy, planc's reference interpreter", interpreter)):
        print(f"{name[:44]:44} {seconds * 1e3:9.2f} {work_flops / seconds / 1e9:9.1f} "
              f"{numpy_time / seconds:8.2f}x")
    print(f"outputs match the model: max |program - model| = {error:.3g}")


if __name__ == "__main__":
    main()
