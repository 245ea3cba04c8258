"""GFLOP/s of planc's CPU program on the FFN example, against numpy doing the same model.

    python bench/cpu_ffn.py [--plan PLAN.json] [--model examples/ffn.json] [--iterations 10]
                            [--rounds 3]

Without `--plan`, the program is emitted from the model (`planc MODEL --target cpu`: planc's
ARK planner for its default device, the A100, then the CPU program), so its inputs and outputs
are the model's own tensors; with `--plan`, from that plan (whose inputs may be views of the
model's tensors, e.g. split-K halves of a weight: they are cut from the model's inputs here).
The program is built with the one-line command of the emitted README, checked against the
numpy model interpreter, and timed. numpy runs the same model in the same rounds, interleaved
with the program (the machine may be shared): directly (every operator as numpy computes it,
float32 BLAS matmuls, inputs converted to float32 beforehand, outputs rounded to their stored
type), and as planc's reference interpreter (`run_model`, which also models memory). Each side
reports its best round.
"""

from __future__ import annotations

import argparse
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

from backends.ark_plan import single_plan  # noqa: E402
from backends.cpu import BUILD  # noqa: E402
from compiler.driver import main as planc  # noqa: E402
from dialects import ark  # noqa: E402
from ground import dtypes  # noqa: E402
from targets.ark.model_interpreter import evaluate, run_model  # noqa: E402
from tests.codegen import plans, programs  # noqa: E402
from tests.sched.test_cpu_programs import program_inputs as cut_inputs  # noqa: E402


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


def emit(args: argparse.Namespace, work: Path) -> tuple[Path, Path, str]:
    """(plan file, program directory, where the plan comes from)."""
    program_dir = work / "program"
    if args.plan:
        source, plan_path = args.plan, args.plan
        how = "--plan"
    else:
        source, plan_path = args.model, work / "plan.json"
        how = "planc --target ark (a100), emitted from the model"
        if planc([str(source), "--target", "ark", "-o", str(plan_path)]) != 0:
            sys.exit("planc could not plan the model")
    if planc([str(source), "--target", "cpu", "-o", str(program_dir)]) != 0:
        sys.exit("planc could not emit the program")
    return plan_path, program_dir, how


def program_inputs(plan_path: Path, listing: dict, reference) -> dict[int, np.ndarray]:
    """The model run's inputs as the program's input tensors see them (views of a plan)."""
    if all(t["id"] in reference.inputs for t in listing["inputs"]):
        return reference.inputs
    plan_module = plans.import_plan_doc(json.loads(plan_path.read_text()))
    return cut_inputs(listing, reference, single_plan(plan_module))


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
    args = parser.parse_args()

    model = plans.import_model_doc(json.loads(args.model.read_text()))
    model_op = next(op for op in model.ops if isinstance(op, ark.ModelOp))
    work = Path(tempfile.mkdtemp(prefix="planc-bench-"))
    plan_path, program_dir, plan_source = emit(args, work)
    subprocess.run(BUILD.split(), cwd=program_dir, check=True)

    reference = run_model(model, seed=0)
    listing = programs.manifest(program_dir)
    programs.write_inputs(work / "check" / "in", listing["inputs"],
                          program_inputs(plan_path, listing, reference))
    programs.run_checked([program_dir / "plan", work / "check" / "in", work / "check" / "out"])
    outputs = programs.read_outputs(work / "check" / "out", listing["outputs"])
    programs.compare(outputs, reference)
    error = max(float(np.max(np.abs(outputs[t] - reference.tensors[t]))) for t in outputs)

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
