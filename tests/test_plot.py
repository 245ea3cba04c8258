"""Pictures and traces of plans of a shipped example (ffn.json, made small): files that are real images, timelines that agree
with the cost model's figures."""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler.api import load
from compiler.plot import Timeline, pictures
from tests.conftest import EXAMPLES

# One xdist worker runs them: the three plans are a module fixture, built once per worker.
pytestmark = pytest.mark.xdist_group("plot-plans")

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib is the plot extra: "
                                 "pip install -e '.[plot]'")


@pytest.fixture(scope="module")
def plans(tmp_path_factory, small_ffn):
    """ffn.json's plans for three targets, of the small ffn of tests/conftest.py (the same
    operators and pictures, a fraction of the simulated work)."""
    from compiler.driver import main

    folder = tmp_path_factory.mktemp("plans")
    made = {}
    for target, flags in (("ark", ()), ("tt", ("--grid", "4x4")), ("gemini", ("--mesh", "2x2"))):
        out = folder / f"ffn.{target}.json"
        assert main([str(small_ffn), "-t", target, "-o", str(out), *flags]) == 0
        made[target] = out
    return made


@pytest.mark.parametrize("target, count", [("ark", 2), ("tt", 8), ("gemini", 2)])
def test_pictures_are_real_images(planc, plans, tmp_path, target, count):
    image = tmp_path / f"{target}.png"
    result = planc("plot", plans[target], "-o", image)
    assert result.code == 0 and result.out.endswith(f"1 image of {count} panels\n"), result.err
    pixels = matplotlib.image.imread(image)
    assert pixels.shape[0] > 300 and pixels.shape[1] > 600
    # Not blank: a good share of the pixels are neither white nor transparent.
    drawn = (pixels[..., :3] < 0.9).any(axis=-1).mean()
    assert drawn > 0.05


def test_the_ark_timeline_ends_at_the_modeled_time(planc, plans):
    report = planc("simulate", plans["ark"], "--cost-only", "--json").json()
    (timeline,) = [p for p in pictures(load(plans["ark"])) if isinstance(p, Timeline)]
    end = max(s + d for s, d in zip(timeline.starts, timeline.durations, strict=True))
    assert end == pytest.approx(report["modeled_time_s"] * 1e6, rel=1e-9)
    assert set(timeline.rows) <= set(range(108))


def test_gemini_timeline_sums_each_cores_workload_time(plans):
    # In microseconds at Gemini's clock, as every timeline (and trace) is.
    module = load(plans["gemini"])
    (timeline,) = [p for p in pictures(module) if isinstance(p, Timeline)]
    schedule = module.ops.first
    for core in schedule.cores:
        total = sum(float(wl.value("time") or 0) for wl in core.workloads) / 1e3
        ends = [s + d for r, s, d in zip(timeline.rows, timeline.starts, timeline.durations,
                                         strict=True) if r == core.id]
        assert max(ends, default=0.0) == pytest.approx(total)


def test_simulate_writes_a_chrome_trace(planc, plans, tmp_path):
    trace = tmp_path / "t.json"
    report = planc("simulate", plans["ark"], "--cost-only", "--trace", trace, "--json").json()
    assert report["trace"] == str(trace)
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X"]
    assert spans and all(e["dur"] >= 0 and e["ts"] >= 0 for e in spans)
    assert max(e["ts"] + e["dur"] for e in spans) == pytest.approx(
        report["modeled_time_s"] * 1e6)


def test_models_have_no_pictures(planc, tmp_path):
    result = planc("plot", EXAMPLES / "ffn.json", "-o", tmp_path / "x.png")
    assert result.code == 1 and "not ark-model documents" in result.err
    assert "(a model has no schedule: draw the plan of `planc MODEL -t ark`" in result.err
    assert not (tmp_path / "x.png").exists()


# -- what the pictures show --------------------------------------------------------------------


def _drawn(picture):
    """`picture` drawn on a fresh axis (the drawers `planc plot` uses)."""
    import matplotlib.pyplot as plt

    from compiler.plot import DRAWERS

    figure, ax = plt.subplots()
    DRAWERS[type(picture)](picture, ax)
    plt.close(figure)
    return ax


def test_memory_steps_equal_the_live_bytes_at_every_time():
    # A second way to the same curve: at any time, the bytes of the intervals covering it.
    from compiler.plot import step_series

    rng = np.random.default_rng(7)
    for _ in range(50):
        starts = rng.integers(0, 40, size=12).astype(float)
        intervals = [(a, a + float(rng.integers(1, 20)), int(rng.integers(1, 1000)))
                     for a in starts]
        times, used = step_series(intervals)
        assert times == sorted(times) and used[-1] == 0
        for t in np.arange(-0.5, 70, 0.5):
            expected = sum(n for a, b, n in intervals if a <= t < b)
            index = np.searchsorted(times, t, side="right") - 1
            assert (used[index] if index >= 0 else 0) == expected


def test_the_ark_memory_curve_never_goes_back_in_time(plans):
    from compiler.plot import Occupancy

    (memory,) = [p for p in pictures(load(plans["ark"])) if isinstance(p, Occupancy)]
    times, used = memory.series["device"]
    assert times == sorted(times) and min(used) >= 0 and used[-1] == 0
    ax = _drawn(memory)
    assert ax.get_ylim()[0] == 0 and ax.get_xlim()[0] == 0


def test_legends_name_the_longest_kinds_and_group_the_rest():
    from compiler.plot import LEGEND_KINDS, OTHERS_COLOUR, legend_kinds

    labels = [f"k{i}" for i in range(30)]
    colours = legend_kinds(labels, [float(i) for i in range(30)])
    named = [k for k, c in colours.items() if c != OTHERS_COLOUR]
    assert named == [f"k{i}" for i in range(29, 29 - LEGEND_KINDS, -1)]   # longest first
    assert len({colours[k] for k in named}) == len(named)                 # none repeats
    t = Timeline("t", "core", rows=[0] * 30, starts=list(range(30)), durations=[1.0] * 30,
                 labels=labels, args=[{}] * 30)
    texts = [x.get_text() for x in _drawn(t).get_legend().get_texts()]
    assert len(texts) == LEGEND_KINDS + 1 and texts[-1] == f"{30 - LEGEND_KINDS} others"


def test_a_single_core_axis_shows_that_core_only():
    t = Timeline("t", "core", rows=[0, 0], starts=[0.0, 1.0], durations=[1.0, 2.0],
                 labels=["a", "b"], args=[{}, {}])
    ax = _drawn(t)
    assert list(ax.get_yticks()) == [0] and ax.get_ylim() == pytest.approx((0.6, -0.6))


def test_heatmap_numbers_stand_out_from_their_cells():
    from compiler.plot import Heatmap

    ax = _drawn(Heatmap("h", np.array([[0.0, 10.0]]), "output tiles per core"))
    colours = {t.get_text(): t.get_color() for t in ax.texts}
    assert colours == {"0": "black", "10": "white"}      # light cell, dark cell


def test_tt_pictures_say_what_each_kernel_counts_and_when_it_runs(planc, plans):
    from compiler.plot import Heatmap

    drawn = pictures(load(plans["tt"]))
    labels = {p.title.split(" on ")[0]: p.label for p in drawn if isinstance(p, Heatmap)}
    assert labels["1: Sigmoid 'sigmoid'"] == "output tiles per core"
    assert labels["0: Matmul 'matmul'"] == "output tiles x K tiles per core"
    (timeline,) = [p for p in drawn if isinstance(p, Timeline)]
    # The timeline's rows are the kernels the maps' titles number (they were `kernel 3`).
    assert {timeline.row_names[r] for r in timeline.rows} == set(labels)
    report = planc("simulate", plans["tt"], "--cost-only", "--json").json()
    end = max(s + d for s, d in zip(timeline.starts, timeline.durations, strict=True))
    assert end == pytest.approx(report["modeled_time_s"] * 1e6)
    assert all(set(a["operands"].values()) <= {"L1", "DRAM"} for a in timeline.args)


def test_traces_of_every_format_are_in_microseconds_with_args(planc, plans, tmp_path):
    for target in ("ark", "tt", "gemini"):
        trace = tmp_path / f"{target}.trace.json"
        assert planc("simulate", plans[target], "--cost-only", "--trace", trace).code == 0
        document = json.loads(trace.read_text())
        assert document["displayTimeUnit"] != "ns"
        spans = [e for e in document["traceEvents"] if e["ph"] == "X"]
        assert spans and all(e["args"] for e in spans), target
    gemini = json.loads((tmp_path / "gemini.trace.json").read_text())["traceEvents"]
    cycles = max(e["args"]["cycles"] for e in gemini if e["ph"] == "X")
    assert max(e["dur"] for e in gemini if e["ph"] == "X") == pytest.approx(cycles / 1e3)
    ark = json.loads((tmp_path / "ark.trace.json").read_text())["traceEvents"]
    counters = [e for e in ark if e["ph"] == "C"]
    assert counters and counters[-1]["args"]["bytes"] == 0


def test_mscclpp_plans_have_a_timeline(planc, tmp_path):
    plan = tmp_path / "ring.json"
    assert planc("--collective", "allreduce", "--ranks", "4", "-t", "mscclpp",
                 "-o", plan).code == 0
    report = planc("simulate", plan, "--json").json()
    (timeline,) = pictures(load(plan))
    end = max(s + d for s, d in zip(timeline.starts, timeline.durations, strict=True))
    # The kernel launch counts (the picture ended 4 us before `planc simulate`'s time).
    assert end == pytest.approx(report["modeled_time_s"] * 1e6, rel=1e-9)
    assert min(timeline.starts) > 0 and "us modeled, from a 4 us kernel launch" in timeline.title
    assert {timeline.row_names[r] for r in timeline.rows} >= {f"gpu {g} tb 0" for g in range(4)}
    gpu = {row: name.split()[1] for row, name in timeline.row_names.items()}
    assert timeline.links and all(gpu[a] != gpu[b] for a, _, b in timeline.links)
    image = tmp_path / "ring.png"
    assert planc("plot", plan, "-o", image).code == 0 and image.stat().st_size > 10_000


def test_a_trace_with_nothing_timed_is_refused(planc, tmp_path):
    # TileLang-TT's own plans carry no kernels for the cost model to time: an empty trace was
    # written and reported before.
    from tests.conftest import corpus_root

    plan = corpus_root() / "tt" / "tilelang-tt__root__tt.plan.json"
    if not plan.exists():
        pytest.skip(f"the upstream corpus is not at {corpus_root()} (set PLANC_CORPUS)")
    trace = tmp_path / "t.json"
    result = planc("simulate", plan, "--trace", trace)
    assert result.code == 1 and "nothing to trace" in result.err and not trace.exists()


def test_the_tt_l1_picture_and_the_capacity_rule_agree(planc, plans):
    from compiler.plot import Occupancy

    (l1,) = [p for p in pictures(load(plans["tt"])) if isinstance(p, Occupancy)]
    times, used = l1.series["L1 per core"]
    assert times == sorted(times) and 0 < max(used) <= l1.capacity
    assert planc("check", "--strict", plans["tt"]).code == 0


def test_many_named_rows_are_ticked_by_group():
    names = {g * 8 + b: f"gpu {g} tb {b}" for g in range(4) for b in range(8)}
    t = Timeline("t", "rank / thread block", row_names=names, rows=list(names),
                 starts=[0.0] * 32, durations=[1.0] * 32, labels=["op"] * 32, args=[{}] * 32)
    ax = _drawn(t)
    assert [x.get_text() for x in ax.get_yticklabels()] == [f"gpu {g}" for g in range(4)]
    assert list(ax.get_yticks()) == [0, 8, 16, 24]


def test_plot_takes_the_options_its_pictures_read(planc, plans, tmp_path):
    """`--arch` for a TT plan and `--message-size`, `--mscclpp-hw` for an MSCCL++ plan were
    refused by `planc plot`, though its pictures read them: a plan made for blackhole was
    drawn against wormhole_b0, a collective made for 1 KB at 1 MB."""
    from backends import make_options

    image = tmp_path / "x.png"
    assert planc("plot", plans["tt"], "-o", image, "--arch", "blackhole").code == 0
    timed = {arch: sum(next(p for p in pictures(load(plans["tt"]), make_options(
        "plot", arch=arch)) if isinstance(p, Timeline)).durations)
             for arch in ("wormhole_b0", "blackhole")}
    assert timed["blackhole"] != timed["wormhole_b0"]
    report = planc("simulate", plans["tt"], "--arch", "blackhole", "--cost-only", "--json")
    assert timed["blackhole"] == pytest.approx(report.json()["modeled_time_s"] * 1e6)
    plan = tmp_path / "ag.json"
    assert planc("--collective", "allgather", "--ranks", "4", "-t", "mscclpp",
                 "-o", plan).code == 0
    for flags in (["--message-size", "1K"], ["--mscclpp-hw", "a100"]):
        result = planc("plot", plan, "-o", image, *flags)
        assert result.code == 0, result.err
        trace = tmp_path / "t.json"
        report = planc("simulate", plan, "--trace", trace, "--json", *flags).json()
        spans = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
        end = max(e["ts"] + e["dur"] for e in spans)
        assert end == pytest.approx(report["modeled_time_s"] * 1e6, rel=1e-9)
    assert "1.02 kB message" in pictures(load(plan), make_options(
        "plot", message_size="1K"))[0].title
    result = planc("plot", plans["ark"], "-o", image, "--message-size", "1K")
    assert result.code == 1 and "reads it for mscclpp documents only" in result.err


def test_the_gemini_trace_names_each_workload_and_the_legend_says_layers(planc, plans,
                                                                           tmp_path):
    trace = tmp_path / "g.json"
    assert planc("simulate", plans["gemini"], "--trace", trace, "--cost-only").code == 0
    spans = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    # Each core's workloads are numbered 0, 1, ... in the IR (they were all null here).
    for core in {e["tid"] for e in spans}:
        ids = [e["args"]["workload"] for e in spans if e["tid"] == core]
        assert ids == list(range(len(ids)))
    (timeline,) = [p for p in pictures(load(plans["gemini"])) if isinstance(p, Timeline)]
    labels = [f"layer{i}" for i in range(12)]
    many = Timeline("t", "core", rows=[0] * 12, starts=list(range(12)), durations=[1.0] * 12,
                    labels=labels, args=[{}] * 12, kinds=timeline.kinds)
    assert _drawn(many).get_legend().get_title().get_text() == "12 layers, by time"


def test_notes_wider_than_their_bar_are_left_out_and_colour_bars_clear_their_neighbours():
    """A TT kernel's operand places spilled over the bars beside a short one, and a heatmap's
    colour-bar label ran into the next map's `core y`."""
    import matplotlib.pyplot as plt

    from compiler.plot import Heatmap, laid_out

    t = Timeline("t", "kernel", rows=[0, 1], starts=[0.0, 50.0], durations=[50.0, 0.5],
                 labels=["Matmul", "Mul"], args=[{"note": "A:L1 B:L1 C:L1"}] * 2)
    maps = [Heatmap(f"{i}: h", np.ones((8, 8)), "output tiles x K tiles per core")
            for i in range(3)]
    figure = laid_out([t, *maps])
    figure.canvas.draw()        # places the axis labels
    renderer = figure.canvas.get_renderer()
    timeline_ax = figure.axes[0]
    assert [x.get_text() for x in timeline_ax.texts] == ["A:L1 B:L1 C:L1"]   # the long bar's
    bars = [a for a in figure.axes if a.get_label() == "<colorbar>"]
    maps_ax = [a for a in figure.axes[1:] if a not in bars]
    assert len(bars) == 3 and len(maps_ax) == 3
    for bar in bars:
        label = bar.yaxis.label.get_window_extent(renderer)
        for other in maps_ax:
            assert not label.overlaps(other.yaxis.label.get_window_extent(renderer))
            assert not label.overlaps(other.get_window_extent(renderer))
    plt.close(figure)


def test_heatmap_titles_write_counts_without_exponents():
    """A 4x4 matmul's title read `mean of busy cores 1.41e+03`."""
    from compiler.plot import _count

    assert [_count(v) for v in (1408.0, 1407.5, 43.75, 11.0, 0.5, 123456.0)] == [
        "1,408", "1,408", "43.8", "11", "0.5", "123,456"]
