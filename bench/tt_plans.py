"""Tenstorrent plans: plan quality by partition strategy, and lowering speed.

    python bench/tt_plans.py [--arch wormhole_b0] [--grid 8x8]

For each workload, the modeled time (targets.tt.schedule's cost model) of every partition
strategy and of `auto`, as a ratio to row_major, TileLang-TT's default, measured in the same
run; and the wall time of lowering the model to plans (tt-tile, tt-partition, tt-place).
Ratios below 1 mean faster than TileLang-TT's partition. Never part of the test run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.pipeline import run_pipeline  # noqa: E402
from devices.tt import device_named, parse_grid  # noqa: E402
from dialects.tt_kernels import kernel_buffers, kernel_geometry  # noqa: E402
from frontends.ark_model import import_document  # noqa: E402
from frontends.model_builder import ModelBuilder  # noqa: E402
from ground.json_reader import load_json_file  # noqa: E402
from passes.tt_partition import STRATEGIES, choose_strategy, partition_tiles  # noqa: E402
from targets.tt.schedule import kernel_cost  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def matmul(m: int, k: int, n: int):
    def build():
        b = ModelBuilder()
        b.matmul(b.tensor([m, k]), b.tensor([k, n]))
        return b.finish()
    return build


def example(name: str):
    return lambda: import_document(load_json_file(ROOT / "examples" / name))


WORKLOADS = {
    "matmul 1024x1024x1024": matmul(1024, 1024, 1024),
    "matmul 4096x512x256 (tall)": matmul(4096, 512, 256),
    "matmul 32x4096x4096 (decode)": matmul(32, 4096, 4096),
    "matmul 1000x700x300 (ragged)": matmul(1000, 700, 300),
    "examples/ffn.json": example("ffn.json"),
    "examples/attention.json": example("attention.json"),
}


def modeled(plans, grid, device, strategy: str) -> float:
    total = 0.0
    for plan in plans:
        op = plan.kernel.operator
        geometry = kernel_geometry(op)
        chosen = choose_strategy(plan, grid, device) if strategy == "auto" else strategy
        work = partition_tiles(geometry.grid_tiles, grid, chosen)
        total += kernel_cost(geometry, op, work, kernel_buffers(op), device).seconds
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", default=None)
    parser.add_argument("--grid", default=None)
    args = parser.parse_args()
    device = device_named(args.arch)
    grid = parse_grid(args.grid, device)
    columns = [*STRATEGIES, "auto"]
    print(f"device {device.name}, grid {grid[0]}x{grid[1]}; modeled time relative to row_major")
    print(f"{'workload':<30} {'row_major µs':>12} " + " ".join(f"{c:>12}" for c in columns)
          + f" {'lower ms':>9}")
    for name, build in WORKLOADS.items():
        module = build()
        start = time.perf_counter()
        run_pipeline(module, f"tt-tile,tt-partition{{grid={grid[0]}x{grid[1]} "
                             f"arch={device.name}}},tt-place{{arch={device.name}}}")
        lowering = time.perf_counter() - start
        plans = module.ops.first.plans()
        base = modeled(plans, grid, device, "row_major")
        ratios = [modeled(plans, grid, device, s) / base for s in columns]
        print(f"{name:<30} {base * 1e6:>12.1f} " + " ".join(f"{r:>12.3f}" for r in ratios)
              + f" {lowering * 1e3:>9.0f}")


if __name__ == "__main__":
    main()
