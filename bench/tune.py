"""planc tune at work: ARK planner decisions for a Llama-2-7B decoder layer, a Gemini
architecture sweep on ResNet-34, and evaluations per second with 1 and 2 workers.

    python bench/tune.py [--seq 2048] [--budget 24] [--smoke]

* The FFN example and the Llama layer (a100, h100, mi300x): planc's default plan against the
  candidate the tuner returns (its default space, model-guided search), under planc's cost
  model and under the static-distribution roofline (`targets/ark/static_roofline.py`); the
  gains are default / tuned under each. Tune returns only candidates no slower than the
  default under either model.
* Gemini sweep (ResNet-34 from the corpus, else the attention example): cores 1 to 16 (meshes
  1x1 to 4x4) x L2 of 2 to 16 MB, every point, and the time/L2 front.
* Throughput: the same 8 candidates of the Llama layer (sequence 512) evaluated with 1 and 2
  local workers, in this run. The expected throughput with W workers is W / (seconds per
  candidate) as long as candidates are independent (they are) and each worker has a core;
  the store (SQLite, one row per candidate) is written by the driver and costs well under a
  millisecond a row.

`--smoke` runs every part on its smallest setting (the test suite's bench smoke test).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from backends.ark_model import emit_model  # noqa: E402
from compiler.tune import TuneOptions, tune  # noqa: E402
from compiler.tune_search import no_worse  # noqa: E402
from frontends.model_zoo import llama_decoder_layer  # noqa: E402

CORPUS = ROOT.parent / "shared" / "corpus" / "gemini" / "int8_resnet34.sim_quantized_b1.json"


def write_llama(folder: Path, seq: int) -> str:
    path = folder / f"llama_{seq}.json"
    path.write_text(emit_model(llama_decoder_layer(seq=seq)))
    return str(path)


def llama(folder: Path, seq: int, budget: int, verify: int) -> None:
    model = write_llama(folder, seq)
    print(f"\n## Llama-2-7B decoder layer, sequence {seq}: {budget} candidates per GPU\n")
    study(folder, model, "llama", budget, verify)


def ffn(folder: Path, budget: int, verify: int) -> None:
    print(f"\n## examples/ffn.json: {budget} candidates per GPU\n")
    study(folder, str(ROOT / "examples" / "ffn.json"), "ffn", budget, verify)


ARCHS = ("a100", "h100", "mi300x")


def study(folder: Path, model: str, name: str, budget: int, verify: int) -> None:
    """Tune `model` on each GPU; planc's default and tune's result under both models (planc's
    cost model and the static-distribution roofline): tune returns nothing slower than the
    default under either."""
    print("| GPU | default: cost / roofline | tuned: cost / roofline | gain: cost / roofline "
          "| cost model's own best: cost / roofline | evaluated in | tuned decisions |")
    print("|---|---|---|---|---|---|---|")
    for arch in ARCHS:
        started = time.perf_counter()
        (r,) = tune(TuneOptions(target="ark", models=[model], archs=[arch],
                                out=folder / f"{name}-{arch}", budget=budget, verify=verify,
                                progress=False))
        seconds = time.perf_counter() - started
        best = r.best or min((x for x in r.rows if x["status"] == "scored"
                              and no_worse(x, r.default)), key=lambda x: x["modeled_time_s"])
        changed = {k: v for k, v in best["decisions"].items()
                   if r.default and r.default["decisions"].get(k) != v}
        d = r.default
        fastest = min((x for x in r.rows if x["status"] == "scored"),
                      key=lambda x: (x["modeled_time_s"], x["sequence"]))
        print(f"| {arch} | {d['modeled_time_s'] * 1e6:.1f} / {d['static_s'] * 1e6:.1f} us | "
              f"{best['modeled_time_s'] * 1e6:.1f} / {best['static_s'] * 1e6:.1f} us | "
              f"{d['modeled_time_s'] / best['modeled_time_s']:.2f}x / "
              f"{d['static_s'] / best['static_s']:.2f}x | "
              f"{d['modeled_time_s'] / fastest['modeled_time_s']:.2f}x / "
              f"{d['static_s'] / fastest['static_s']:.2f}x | {seconds:.0f} s | "
              f"{changed or 'the default'} |")


def gemini(folder: Path, smoke: bool) -> None:
    model = str(CORPUS) if CORPUS.exists() and not smoke else str(ROOT / "examples" /
                                                                     "attention.json")
    meshes = ("1x1", "2x2") if smoke else ("1x1", "1x2", "2x2", "2x4", "4x4")
    sizes = (2 << 20, 8 << 20) if smoke else (2 << 20, 4 << 20, 8 << 20, 16 << 20)
    space = f"mesh={','.join(meshes)}; buffer_size={','.join(map(str, sizes))}"
    started = time.perf_counter()
    (r,) = tune(TuneOptions(target="gemini", models=[model], archs=[None],
                            out=folder / "gemini", space=space, budget=len(meshes) * len(sizes),
                            strategy="exhaustive", objective="pareto", verify=1,
                            progress=False))
    print(f"\n## Gemini architecture sweep on {Path(model).name}: {len(r.rows)} points in "
          f"{time.perf_counter() - started:.0f} s\n")
    print("| cores | L2 per core | latency | peak L2 used | on the front |")
    print("|---|---|---|---|---|")
    front = {x["key"] for x in r.front}
    for x in sorted(r.rows, key=lambda x: (x["decisions"]["mesh"],
                                           x["decisions"]["buffer_size"])):
        if x["status"] != "scored":
            print(f"| {x['decisions']['mesh']} | {x['decisions']['buffer_size'] >> 20} MB | "
                  f"refused: {x['error'][:60]} | | |")
            continue
        mesh = x["decisions"]["mesh"].split("x")
        print(f"| {int(mesh[0]) * int(mesh[1])} ({x['decisions']['mesh']}) | "
              f"{x['decisions']['buffer_size'] >> 20} MB | {x['modeled_time_s'] * 1e3:.3f} ms | "
              f"{x['device_bytes'] / 1e6:.2f} MB | {'yes' if x['key'] in front else ''} |")


def throughput(folder: Path, seq: int) -> None:
    model = write_llama(folder, seq)
    print(f"\n## Evaluations per second (Llama layer, sequence {seq}, a100, 8 candidates)\n")
    print("| workers | seconds | candidates/s | mean seconds per candidate |")
    print("|---|---|---|---|")
    for workers in (1, 2):
        started = time.perf_counter()
        (r,) = tune(TuneOptions(target="ark", models=[model], archs=["a100"],
                                out=folder / f"rate-{workers}", budget=8, strategy="random",
                                workers=workers, verify=0, progress=False))
        seconds = time.perf_counter() - started
        mean = sum(x["eval_s"] for x in r.rows) / len(r.rows)
        print(f"| {workers} | {seconds:.1f} | {len(r.rows) / seconds:.2f} | {mean:.2f} |")
    print("\nWith W workers on W free cores expect about W / (mean seconds per candidate) "
          "candidates per second; on this 2-core machine the second worker shares a core with "
          "the driver.")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--budget", type=int, default=24)
    parser.add_argument("--smoke", action="store_true", help="smallest setting of every part")
    args = parser.parse_args()
    seq, budget = (64, 3) if args.smoke else (args.seq, args.budget)
    if args.smoke:          # one GPU: the others run the same code
        global ARCHS
        ARCHS = ARCHS[:1]
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        ffn(folder, budget, verify=0)
        llama(folder, seq, budget, verify=0)
        gemini(folder, args.smoke)
        throughput(folder, 64 if args.smoke else 512)


if __name__ == "__main__":
    main()
