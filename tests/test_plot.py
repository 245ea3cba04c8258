"""Pictures and traces of plans of a shipped example (ffn.json, made small): files that are real images, timelines that agree
with the cost model's figures."""

from __future__ import annotations

import json

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


@pytest.mark.parametrize("target, count", [("ark", 2), ("tt", 6), ("gemini", 2)])
def test_pictures_are_real_images(planc, plans, tmp_path, target, count):
    image = tmp_path / f"{target}.png"
    result = planc("plot", plans[target], "-o", image)
    assert result.code == 0 and result.out.endswith(f"{count} pictures\n"), result.err
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
    module = load(plans["gemini"])
    (timeline,) = [p for p in pictures(module) if isinstance(p, Timeline)]
    schedule = module.ops.first
    for core in schedule.cores:
        total = sum(float(wl.value("time") or 0) for wl in core.workloads)
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
    assert not (tmp_path / "x.png").exists()
