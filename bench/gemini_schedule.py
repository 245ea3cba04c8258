"""Gemini: planc's schedule of the corpus network against Gemini's own, and on larger meshes.

    python bench/gemini_schedule.py [--corpus DIR] [--json] [--smoke]

For the corpus pair (INT8 ResNet-34, batch 1: the frontend layer description and the scheduler
IR Gemini made from it, one core, 8 MB L2, 16 GB/s) it schedules the description with planc
and compares, as ratios planc / Gemini:

* compute time: the sum of the workloads' `time` (both from the IR);
* latency: the same with the single DRAM channel simulated (compiler.gemini_simulator);
* peak L2 bytes (largest snapshot) and DRAM bytes (loads + stores);

then schedules the same network on 2x2 and 4x4 meshes (and batch 4). It also reports how
closely planc's cycle model predicts Gemini's own per-workload times on Gemini's workloads,
and compile speed against a baseline measured in the same run (importing, verifying and
exporting Gemini's IR). Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.gemini import emit, schedule_pipeline  # noqa: E402
from compiler import gemini_model as model  # noqa: E402
from compiler.driver import run_pipeline  # noqa: E402
from compiler.gemini_simulator import schedule_metrics  # noqa: E402
from compiler.json_reader import load_json_file  # noqa: E402
from compiler.locations import verify_module  # noqa: E402
from frontends.gemini_ir import import_document as import_ir  # noqa: E402
from frontends.gemini_layers import import_document as import_layers  # noqa: E402

BANDWIDTH = 16.0


def corpus_files(folder: Path) -> tuple[Path, Path]:
    schedules = sorted(folder.glob("*_stschedule.json"))
    layers = [p for p in sorted(folder.glob("*.json")) if p not in schedules]
    if not schedules or not layers:
        raise SystemExit(f"no Gemini corpus pair in {folder} (set --corpus or PLANC_CORPUS)")
    return layers[0], schedules[0]


def schedule(layers_path: Path, mesh: str, batch: int | None):
    module = import_layers(load_json_file(layers_path))
    started = time.perf_counter()
    run_pipeline(module, schedule_pipeline(argparse.Namespace(
        mesh=mesh, batch=batch, buffer_size=None, dram_bw=BANDWIDTH)))
    text = emit(module)
    seconds = time.perf_counter() - started
    return next(op for op in module.ops if op.name == "gemini.schedule"), seconds, len(text)


def baseline_seconds(ir_path: Path) -> float:
    started = time.perf_counter()
    module = import_ir(load_json_file(ir_path))
    verify_module(module)
    emit(module)
    return time.perf_counter() - started


def cycle_model_agreement(ir_path: Path, layers_path: Path) -> dict:
    """planc's cycle model on Gemini's own workloads (tiles, sizes), per layer type."""
    sched = next(iter(import_ir(load_json_file(ir_path)).ops))
    graph = next(iter(import_layers(load_json_file(layers_path)).ops))
    layers = {layer.name_: layer for layer in graph.layers}
    errors: dict[str, list[float]] = {"pe": [], "pe-streamed": [], "vp": []}
    totals = {"planc": 0.0, "gemini": 0.0}
    for wl in sched.workloads():
        layer, actual = layers[wl.layer], wl.value("time")
        in_bytes = sum(f.value("size") for f in wl.ifmaps)
        if wl.value("layer_type") == "vp":
            predicted, kind = model.vp_cycles(layer, wl.ifmaps[0].value("size"),
                                              wl.value("ofmap_size")), "vp"
        else:
            streamed = [t for t in wl.wl0 if t.value("source") == "CORE"]
            if streamed:
                cycles = [model.pe_cycles(layer, (t.ints_of("ofmap_lower"),
                                                  t.ints_of("ofmap_upper")), in_bytes, 0)
                          for t in wl.tiles]
                predicted, kind = model.stream_time(cycles, streamed[0].value("size")), \
                    "pe-streamed"
            else:
                predicted = model.pe_cycles(layer, wl.box, in_bytes, wl.weight.value("size"))
                kind = "pe"
        errors[kind].append(abs(predicted - actual) / actual)
        totals["planc"] += predicted
        totals["gemini"] += actual
    return {"total_ratio": totals["planc"] / totals["gemini"],
            **{f"median_error_{k}": statistics.median(v) for k, v in errors.items() if v},
            **{f"max_error_{k}": max(v) for k, v in errors.items() if v}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(os.environ.get("PLANC_CORPUS", ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--corpus", type=Path, default=default / "gemini")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="the 1x1 mesh only")
    args = parser.parse_args()
    layers_path, ir_path = corpus_files(args.corpus)

    gemini = schedule_metrics(next(iter(import_ir(load_json_file(ir_path)).ops)), BANDWIDTH)
    base = baseline_seconds(ir_path)
    rows = []
    meshes = (("1x1", None),) if args.smoke else \
        (("1x1", None), ("2x2", None), ("4x4", None), ("2x2", 4))
    for mesh, batch in meshes:
        sched, seconds, size = schedule(layers_path, mesh, batch)
        m = schedule_metrics(sched, BANDWIDTH)
        rows.append({"mesh": mesh, "batch": batch or 1, "workloads": m.workloads,
                     "compute_cycles": m.compute_cycles,
                     "critical_compute_cycles": m.critical_compute_cycles,
                     "latency_cycles": round(m.latency_cycles), "peak_l2_bytes": m.peak_l2_bytes,
                     "dram_bytes": m.dram_bytes, "compile_s": round(seconds, 2),
                     "compile_vs_baseline": round(seconds / base, 1), "ir_bytes": size})
    ours = rows[0]
    versus = {
        "compute_time_ratio": ours["compute_cycles"] / gemini.compute_cycles,
        "latency_ratio": ours["latency_cycles"] / gemini.latency_cycles,
        "peak_l2_ratio": ours["peak_l2_bytes"] / gemini.peak_l2_bytes,
        "dram_bytes_ratio": ours["dram_bytes"] / gemini.dram_bytes,
    }
    report = {"gemini": {"compute_cycles": gemini.compute_cycles,
                         "latency_cycles": round(gemini.latency_cycles),
                         "peak_l2_bytes": gemini.peak_l2_bytes, "dram_bytes": gemini.dram_bytes,
                         "workloads": gemini.workloads},
              "planc_vs_gemini_1x1": versus, "meshes": rows,
              "cycle_model_on_gemini_workloads": cycle_model_agreement(ir_path, layers_path),
              "baseline_roundtrip_s": round(base, 3)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    g = report["gemini"]
    print(f"Gemini IR ({ir_path.name}): {g['workloads']} workloads, compute "
          f"{g['compute_cycles']} cycles, latency {g['latency_cycles']}, peak L2 "
          f"{g['peak_l2_bytes']} B, DRAM {g['dram_bytes']} B")
    print("planc / Gemini (1x1): " + ", ".join(f"{k} {v:.3f}" for k, v in versus.items()))
    print(f"{'mesh':>5} {'batch':>5} {'wl':>5} {'compute':>10} {'critical':>10} {'latency':>10} "
          f"{'peak L2':>9} {'DRAM B':>10} {'compile s':>9} {'x base':>7}")
    for r in rows:
        print(f"{r['mesh']:>5} {r['batch']:>5} {r['workloads']:>5} {r['compute_cycles']:>10} "
              f"{r['critical_compute_cycles']:>10} {r['latency_cycles']:>10} "
              f"{r['peak_l2_bytes']:>9} {r['dram_bytes']:>10} {r['compile_s']:>9} "
              f"{r['compile_vs_baseline']:>7}")
    c = report["cycle_model_on_gemini_workloads"]
    print("cycle model on Gemini's workloads: " + ", ".join(
        f"{k} {v:.3f}" for k, v in c.items()))
    print(f"baseline (import + verify + export of Gemini's IR): {base:.3f} s")


if __name__ == "__main__":
    main()
