"""Gemini: planc's schedules of the corpus networks against Gemini's own, and on larger meshes.

    python bench/gemini_schedule.py [--corpus DIR] [--batches 1,4,16] [--budgets 0.45,0.9]
                                    [--meshes] [--compile-ratio PAIRS] [--by-layer] [--json]
                                    [--smoke]

For every corpus pair (the frontend layer description of an INT8 ResNet and the scheduler IR
Gemini made from it: batch 1, one core, 8 MB L2, 16 GB/s) it schedules the description with
planc at each batch size and prints ratios planc / Gemini, all measured by the same code
(`targets.gemini.simulator.schedule_metrics`) on both IRs:

* compute: the sum of the workloads' `time` (each IR's own figures);
* compute (same model): against Gemini's workloads re-timed by planc's cycle model, so that
  only the schedules differ, not the two cycle models (planc's rates Gemini's own workloads at
  1.002x Gemini's figures on ResNet-34);
* latency: end of the last workload or DRAM transfer with the one DRAM channel simulated
  (loads and stores in `tensor_order`), and the same with Gemini's workloads re-timed;
* peak L2: the largest sum of the tensor sizes one workload's `buffer` snapshot lists;
* DRAM bytes: loads plus stores.

Baseline at batch B > 1: the corpus holds Gemini's IR for batch 1 only, so the baseline is that
schedule run B times one after another: compute, latency and DRAM bytes are B times the batch-1
figures, peak L2 is the batch-1 peak (the runs reuse the same buffer). Latency B x assumes no
overlap between consecutive runs (the next run's first loads could start during the previous
run's tail), which favours planc by at most one run's start-up (the first input load, about
1-2% of a run).

Gemini's own batch-B IRs (upstream, not in the corpus; `GEMINI_OWN`) are set beside it three
ways: raw (their summed `time`); normalised, with each vector-processor workload counted over
all its tiles (Gemini's batch-4 IR times a 4-sample vp workload as one sample: its four tiles,
one per sample, each list a `single_tile_time_pred` equal to the workload's `time`); and under
one model, planc's cycle model on Gemini's batch-1 workloads each widened to all B samples
(`retimed_at_batch`), which is the form of Gemini's batch-4 ResNet-34 IR: one workload per
layer over all samples, the same intra-core tiles. `--by-layer` lists the layers whose time
differs between the two under that model.

`--budgets` also schedules each case with other L2 budgets (shares of the buffer, planc's
`--l2-budget`) to show the latency / peak-L2 trade-off; `--meshes` schedules the first network
on 2x2 and 4x4 meshes (and batch 4 on 2x2) with the compile time against a baseline measured in
the same run (importing, verifying and exporting Gemini's IR); `--compile-ratio N` times the
whole `planc LAYERS -t gemini --mesh 4x4` and `--mesh 1x1` commands N times each, alternating,
in CPU seconds of the child processes. It also reports how closely
planc's cycle model predicts Gemini's own per-workload times. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.gemini import emit, schedule_pipeline  # noqa: E402
from compiler.pipeline import run_pipeline  # noqa: E402
from dialects import gemini as gemini_dialect  # noqa: E402
from dialects.locations import verify_module  # noqa: E402
from frontends.gemini_ir import import_document as import_ir  # noqa: E402
from frontends.gemini_layers import import_document as import_layers  # noqa: E402
from ground.json_reader import load_json_file  # noqa: E402
from targets.gemini import model  # noqa: E402
from targets.gemini.simulator import Metrics, schedule_metrics  # noqa: E402

BANDWIDTH = 16.0
GEMINI_OWN = {
    ("resnet34", 4): {"time": 4_127_203, "vp_one_sample": 238_255, "zebu_end": 4_280_215},
    ("resnet34", 16): {"time": 16_050_950},
    ("resnet50", 4): {"time": 5_197_331},
}
"""Gemini's own batch-B IRs, `scheduler_output/int8_resnet{34,50}.sim_quantized_b{B}_c1_bw16_
stschedule.json` in jingweicai/Gemini-Compiler-IR @ 782b6780 (not in the corpus): summed
workload `time`. ResNet-34 batch 4: 69 workloads, one per layer over all four samples; its vp
workloads each list four tiles (one per sample) whose `single_tile_time_pred` equals the
workload's `time` and the batch-1 IR's time of the same layer (read on 10 of its 32 vp
workloads: 0, 2, 3, 6, 7, 10, 13, 14, 66, 67), so their summed `time` is the batch-1 IR's vp sum
(`vp_one_sample`) and their tiles sum to 4x that. `zebu_end`: the end of the last instruction
of the upstream ZeBu trace of that schedule (`zebu_trace_output/..._b4_c1_bw16_sim.txt`), whose
vp workloads run four instructions each (e.g. workload 0: 4 x 12,568 cycles). The other two
are raw sums only: their vp workloads were not read (ResNet-50's batch-4 IR has 94 workloads
for 73 layers)."""
BUFFER = model.GeminiHardware.buffer_bytes


def corpus_pairs(folder: Path) -> list[tuple[str, Path, Path]]:
    """(network, layer description, Gemini's IR) for every pair in the corpus folder."""
    pairs = []
    for ir in sorted(folder.glob("*_stschedule.json")):
        layers = folder / (ir.name.split("_c1_")[0] + ".json")
        if layers.exists():
            pairs.append((ir.name.split(".")[0].removeprefix("int8_"), layers, ir))
    if not pairs:
        raise SystemExit(f"no Gemini corpus pair in {folder} (set --corpus or PLANC_CORPUS)")
    return pairs


def schedule(layers_path: Path, mesh: str, batch: int, budget: int | None = None):
    module = import_layers(load_json_file(layers_path))
    started = time.perf_counter()
    run_pipeline(module, schedule_pipeline(argparse.Namespace(
        mesh=mesh, batch=batch if batch > 1 else None, buffer_size=None, dram_bw=BANDWIDTH,
        l2_budget=budget)))
    text = emit(module)
    seconds = time.perf_counter() - started
    return next(op for op in module.ops if op.name == "gemini.schedule"), seconds, len(text)


def baseline_seconds(ir_path: Path) -> float:
    started = time.perf_counter()
    module = import_ir(load_json_file(ir_path))
    verify_module(module)
    emit(module)
    return time.perf_counter() - started


def predicted_times(ir_path: Path, layers_path: Path):
    """planc's cycle model on Gemini's own workloads (tiles, sizes): the schedule with each
    workload's prediction, per-kind relative errors, and the totals."""
    sched = next(iter(import_ir(load_json_file(ir_path)).ops))
    graph = next(iter(import_layers(load_json_file(layers_path)).ops))
    layers = {layer.name_: layer for layer in graph.layers}
    errors: dict[str, list[float]] = {"pe": [], "pe-streamed": [], "vp": []}
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
        wl.time = gemini_dialect.int_attr(int(predicted))
    return sched, errors


def _widened(box, batch: int):
    """`box` with its samples widened from one to `batch` (Gemini's batch-1 workloads hold
    sample 0)."""
    lower, upper = list(box[0]), list(box[1])
    upper[0] = lower[0] + (upper[0] - lower[0] + 1) * batch - 1
    return lower, upper


def retimed_at_batch(ir_path: Path, layers_path: Path, batch: int) -> dict:
    """planc's cycle model on Gemini's batch-1 workloads widened to `batch` samples (inputs
    and outputs `batch` times larger, the same weights and intra-core tiles): summed `time`
    by layer type, and by layer (`layers`). That is how Gemini's own batch-4 ResNet-34 IR is
    built (see GEMINI_OWN)."""
    sched = next(iter(import_ir(load_json_file(ir_path)).ops))
    graph = next(iter(import_layers(load_json_file(layers_path)).ops))
    layers = {layer.name_: layer for layer in graph.layers}
    sums: dict = {"pe": 0, "vp": 0, "layers": {}}
    for wl in sched.workloads():
        layer, kind = layers[wl.layer], wl.value("layer_type")
        in_bytes = batch * sum(f.value("size") for f in wl.ifmaps)
        if kind == "vp":
            cycles = model.vp_cycles(layer, batch * wl.ifmaps[0].value("size"),
                                     batch * wl.value("ofmap_size"))
        elif streamed := [t for t in wl.wl0 if t.value("source") == "CORE"]:
            cycles = model.stream_time([model.pe_cycles(layer, _widened(
                (t.ints_of("ofmap_lower"), t.ints_of("ofmap_upper")), batch), in_bytes, 0)
                for t in wl.tiles], streamed[0].value("size"))
        else:
            cycles = model.pe_cycles(layer, _widened(wl.box, batch), in_bytes,
                                     wl.weight.value("size"))
        sums[kind] += int(cycles)
        sums["layers"][wl.layer] = sums["layers"].get(wl.layer, 0) + int(cycles)
    return sums


def layer_times(sched) -> dict[str, tuple[int, int]]:
    """(summed `time`, workloads) of every layer of a schedule."""
    found: dict[str, tuple[int, int]] = {}
    for wl in sched.workloads():
        time_, count = found.get(wl.layer, (0, 0))
        found[wl.layer] = (time_ + wl.value("time"), count + 1)
    return found


def layer_differences(ours: dict[str, tuple[int, int]], theirs: dict[str, int]) -> list:
    """[layer, planc's cycles, workloads, Gemini's widened workloads' cycles] of every layer
    whose time differs, in Gemini's layer order: where the one-model ratio comes from."""
    return [[name, ours.get(name, (0, 0))[0], ours.get(name, (0, 0))[1], cycles]
            for name, cycles in theirs.items() if ours.get(name, (0, 0))[0] != cycles]


def against_own(network: str, batch: int, kinds: dict, same: dict,
                layers: dict[str, tuple[int, int]]) -> dict | None:
    """planc's summed time against Gemini's own batch-`batch` IR: raw, normalised (vp
    workloads over all their tiles) where known, and both under planc's cycle model
    (`layers`: planc's time by layer, set beside Gemini's widened workloads')."""
    own = GEMINI_OWN.get((network, batch))
    if own is None:
        return None
    ours = kinds["pe"] + kinds["vp"]
    row = {"gemini_time": own["time"], "raw": ours / own["time"],
           "same_model_gemini": same["pe"] + same["vp"],
           "same_model": ours / (same["pe"] + same["vp"]),
           "same_model_pe": kinds["pe"] / same["pe"],
           "by_layer": layer_differences(layers, same["layers"])}
    if "vp_one_sample" in own:
        pe = own["time"] - own["vp_one_sample"]
        normalised = pe + batch * own["vp_one_sample"]
        row.update(normalised_gemini=normalised, normalised=ours / normalised,
                   pe=kinds["pe"] / pe, vp=kinds["vp"] / (batch * own["vp_one_sample"]))
    if "zebu_end" in own:
        row["zebu_end"] = own["zebu_end"]
    return row


def cycle_model_agreement(gemini: Metrics, retimed: Metrics, errors: dict) -> dict:
    return {"total_ratio": retimed.compute_cycles / gemini.compute_cycles,
            **{f"median_error_{k}": statistics.median(v) for k, v in errors.items() if v},
            **{f"max_error_{k}": max(v) for k, v in errors.items() if v}}


def versus(ours: Metrics, gemini: Metrics, retimed: Metrics, batch: int) -> dict:
    """planc / Gemini's batch-1 schedule run `batch` times (see the module docstring)."""
    return {"compute": ours.compute_cycles / (batch * gemini.compute_cycles),
            "compute_same_model": ours.compute_cycles / (batch * retimed.compute_cycles),
            "latency": ours.latency_cycles / (batch * gemini.latency_cycles),
            "latency_same_model": ours.latency_cycles / (batch * retimed.latency_cycles),
            "peak_l2": ours.peak_l2_bytes / gemini.peak_l2_bytes,
            "dram_bytes": ours.dram_bytes / (batch * gemini.dram_bytes)}


def kind_cycles(sched) -> dict[str, int]:
    """Summed workload `time` by layer type (pe, vp), and the vp sum with every multi-sample
    workload timed as one sample (`vp_one_sample`: Gemini's own batch-B IRs time them so,
    see the module docstring), so that planc's figure can be set beside those IRs'."""
    sums = {"pe": 0, "vp": 0, "vp_one_sample": 0}
    for wl in sched.workloads():
        kind, time_ = wl.value("layer_type"), wl.value("time")
        sums[kind] = sums.get(kind, 0) + time_
        if kind == "vp":
            samples = wl.box[1][0] - wl.box[0][0] + 1
            sums["vp_one_sample"] += time_ / max(samples, 1)
    return sums


def metrics_row(m: Metrics) -> dict:
    return {"workloads": m.workloads, "compute_cycles": m.compute_cycles,
            "critical_compute_cycles": m.critical_compute_cycles,
            "latency_cycles": round(m.latency_cycles), "peak_l2_bytes": m.peak_l2_bytes,
            "dram_bytes": m.dram_bytes}


def compare(pairs, batches: list[int], budgets: list[float]) -> dict:
    report: dict = {"networks": {}, "rows": [], "budgets": []}
    for network, layers_path, ir_path in pairs:
        gemini = schedule_metrics(next(iter(import_ir(load_json_file(ir_path)).ops)),
                                  BANDWIDTH)
        retimed_schedule, errors = predicted_times(ir_path, layers_path)
        retimed = schedule_metrics(retimed_schedule, BANDWIDTH)
        gemini_kinds = kind_cycles(next(iter(import_ir(load_json_file(ir_path)).ops)))
        report["networks"][network] = {
            "gemini": metrics_row(gemini), "gemini_retimed": metrics_row(retimed),
            "gemini_kind_cycles": gemini_kinds,
            "cycle_model_on_gemini_workloads": cycle_model_agreement(gemini, retimed, errors)}
        for batch in batches:
            sched, seconds, _ = schedule(layers_path, "1x1", batch)
            ours = schedule_metrics(sched, BANDWIDTH)
            kinds = kind_cycles(sched)
            report["rows"].append({"network": network, "batch": batch, **metrics_row(ours),
                                   "compile_s": round(seconds, 2),
                                   **versus(ours, gemini, retimed, batch),
                                   "pe": kinds["pe"] / (batch * gemini_kinds["pe"]),
                                   "vp": kinds["vp"] / (batch * gemini_kinds["vp"]),
                                   "kind_cycles": kinds,
                                   "own": against_own(network, batch, kinds, retimed_at_batch(
                                       ir_path, layers_path, batch), layer_times(sched))})
            for share in budgets:
                sched, _, _ = schedule(layers_path, "1x1", batch, int(share * BUFFER))
                ours = schedule_metrics(sched, BANDWIDTH)
                report["budgets"].append({"network": network, "batch": batch,
                                          "l2_budget_share": share,
                                          **versus(ours, gemini, retimed, batch)})
    return report


def meshes(pairs) -> dict:
    _, layers_path, ir_path = pairs[0]
    base = baseline_seconds(ir_path)
    rows = []
    for mesh, batch in (("1x1", 1), ("2x2", 1), ("4x4", 1), ("2x2", 4)):
        sched, seconds, size = schedule(layers_path, mesh, batch)
        rows.append({"mesh": mesh, "batch": batch, **metrics_row(schedule_metrics(
            sched, BANDWIDTH)), "compile_s": round(seconds, 2),
            "compile_vs_baseline": round(seconds / base, 1), "ir_bytes": size})
    return {"baseline_roundtrip_s": round(base, 3), "rows": rows}


def command_cpu(argv: list[str]) -> float:
    """CPU seconds of one whole `planc` command run as a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-m", "compiler.driver", *argv], check=True, cwd=ROOT,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)), stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def compile_ratio(layers_path: Path, pairs: int) -> dict:
    """`planc LAYERS -t gemini --mesh 4x4` against `--mesh 1x1`, whole commands, CPU time,
    alternating so that both see the same load."""
    times: dict[str, list[float]] = {"1x1": [], "4x4": []}
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(pairs):
            for mesh in times:
                times[mesh].append(command_cpu([str(layers_path), "-t", "gemini", "--mesh",
                                                mesh, "-o", f"{folder}/{mesh}.json"]))
    return {"cpu_s": times,
            "min_ratio": min(times["4x4"]) / min(times["1x1"]),
            "median_ratio": statistics.median(times["4x4"]) / statistics.median(times["1x1"])}


def print_by_layer(report: dict) -> None:
    """The layers whose time differs from Gemini's widened workloads (`--by-layer`)."""
    for row in report["rows"]:
        if row["own"] is None:
            continue
        print(f"\n{row['network']} batch {row['batch']}, by layer: planc (workloads) against "
              f"Gemini's batch-1 workloads widened to {row['batch']} samples, one model")
        for name, ours, count, theirs in row["own"]["by_layer"]:
            print(f"  {name:<26} {ours:>9} ({count:>2}) {theirs:>9} {ours - theirs:>+9}")


def print_report(report: dict) -> None:
    for network, facts in report["networks"].items():
        g, r = facts["gemini"], facts["gemini_retimed"]
        print(f"Gemini IR {network} b1: {g['workloads']} workloads, compute "
              f"{g['compute_cycles']} cycles ({r['compute_cycles']} by planc's cycle model), "
              f"latency {g['latency_cycles']} ({r['latency_cycles']}), peak L2 "
              f"{g['peak_l2_bytes']} B, DRAM {g['dram_bytes']} B")
    print("\nplanc / Gemini (batch B: Gemini's batch-1 schedule run B times), 1 core, 16 GB/s")
    print(f"{'network':>9} {'batch':>5} {'wl':>5} {'compute':>8} {'same':>6} {'pe':>6} "
          f"{'vp':>6} {'latency':>8} {'same':>6} {'peak L2':>8} {'DRAM':>6} {'compile s':>9}")
    for row in report["rows"]:
        print(f"{row['network']:>9} {row['batch']:>5} {row['workloads']:>5} "
              f"{row['compute']:>8.3f} {row['compute_same_model']:>6.3f} "
              f"{row['pe']:>6.3f} {row['vp']:>6.3f} "
              f"{row['latency']:>8.3f} {row['latency_same_model']:>6.3f} "
              f"{row['peak_l2']:>8.3f} {row['dram_bytes']:>6.3f} {row['compile_s']:>9}")
    print("\nplanc's summed workload time against Gemini's own batch-B IR (upstream, not in "
          "the corpus): raw; normalised (Gemini's vp workloads over all their tiles); under "
          "one model (planc's cycle model on Gemini's batch-1 workloads widened to B samples)")
    for row in report["rows"]:
        own = row["own"]
        if own is None:
            continue
        line = (f"{row['network']} batch {row['batch']}: planc {row['compute_cycles']} / "
                f"{own['gemini_time']} = {own['raw']:.3f} raw")
        if "normalised" in own:
            line += (f"; normalised {own['normalised_gemini']}: {own['normalised']:.3f} "
                     f"(pe {own['pe']:.3f}, vp {own['vp']:.3f})")
        line += (f"; one model {own['same_model_gemini']}: {own['same_model']:.4f} "
                 f"(pe {own['same_model_pe']:.4f})")
        if "zebu_end" in own:
            line += f"; Gemini's ZeBu run of it ends at {own['zebu_end']}"
        print(line)
    if report["budgets"]:
        print("\nL2 budget (share of the 8 MB buffer) against latency and peak L2 ratios")
        print(f"{'network':>9} {'batch':>5} {'budget':>6} {'latency':>8} {'peak L2':>8}")
        for row in report["budgets"]:
            print(f"{row['network']:>9} {row['batch']:>5} {row['l2_budget_share']:>6} "
                  f"{row['latency']:>8.3f} {row['peak_l2']:>8.3f}")
    if "meshes" in report:
        m = report["meshes"]
        print(f"\n{'mesh':>5} {'batch':>5} {'wl':>5} {'compute':>10} {'critical':>10} "
              f"{'latency':>10} {'peak L2':>9} {'DRAM B':>10} {'compile s':>9} {'x base':>7}")
        for r in m["rows"]:
            print(f"{r['mesh']:>5} {r['batch']:>5} {r['workloads']:>5} {r['compute_cycles']:>10} "
                  f"{r['critical_compute_cycles']:>10} {r['latency_cycles']:>10} "
                  f"{r['peak_l2_bytes']:>9} {r['dram_bytes']:>10} {r['compile_s']:>9} "
                  f"{r['compile_vs_baseline']:>7}")
        print(f"baseline (import + verify + export of Gemini's IR): "
              f"{m['baseline_roundtrip_s']:.3f} s")
    if "compile_ratio" in report:
        c = report["compile_ratio"]
        shown = {mesh: ", ".join(f"{t:.2f}" for t in ts) for mesh, ts in c["cpu_s"].items()}
        print(f"\nwhole command, 4x4 against 1x1 (CPU s): 1x1 {shown['1x1']}; 4x4 "
              f"{shown['4x4']}: ratio {c['min_ratio']:.2f} (minima), "
              f"{c['median_ratio']:.2f} (medians)")
    for network, facts in report["networks"].items():
        print(f"cycle model on Gemini's {network} workloads: " + ", ".join(
            f"{k} {v:.3f}" for k, v in facts["cycle_model_on_gemini_workloads"].items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = Path(os.environ.get("PLANC_CORPUS", ROOT.parent / "shared" / "corpus"))
    parser.add_argument("--corpus", type=Path, default=default / "gemini")
    parser.add_argument("--batches", default="1,4,16")
    parser.add_argument("--budgets", default="",
                        help="also schedule with these L2 budgets (shares of the buffer)")
    parser.add_argument("--meshes", action="store_true", help="also 2x2 and 4x4 meshes")
    parser.add_argument("--compile-ratio", type=int, default=0, metavar="PAIRS",
                        help="time the whole 4x4 and 1x1 commands, PAIRS times each")
    parser.add_argument("--by-layer", action="store_true",
                        help="list the layers whose time differs from Gemini's own, one model")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="the first network, batch 1")
    args = parser.parse_args()
    pairs = corpus_pairs(args.corpus)
    batches = [int(b) for b in args.batches.split(",") if b]
    budgets = [float(b) for b in args.budgets.split(",") if b]
    if args.smoke:
        pairs, batches, budgets = pairs[:1], [1], []
    report = compare(pairs, batches, budgets)
    if args.meshes and not args.smoke:
        report["meshes"] = meshes(pairs)
    if args.compile_ratio and not args.smoke:
        report["compile_ratio"] = compile_ratio(pairs[0][1], args.compile_ratio)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print_report(report)
    if args.by_layer:
        print_by_layer(report)


if __name__ == "__main__":
    main()
