"""Human reports: units a person can read, long lists summarised, every key still shown."""

from __future__ import annotations

import pytest

from compiler.report import figure, human_report, seconds, size


@pytest.mark.parametrize("value, text", [
    (3.9958089533371974e-05, "40 us"), (0.0123, "12.3 ms"), (2.5, "2.5 s"),
    (7e-9, "7 ns"), (0.0, "0 s")])
def test_seconds(value, text):
    assert seconds(value) == text


@pytest.mark.parametrize("value, text", [
    (21233664, "21.2 MB"), (512, "512 B"), (1536, "1.54 kB"), (3 * 10**9, "3 GB")])
def test_sizes(value, text):
    assert size(value) == text


def test_lists_of_numbers_become_min_median_max():
    assert figure("per_processor_utilisation", [0.5] * 10 + [1.0]) == (
        "11 values: min 0.5, median 0.5, max 1")
    assert figure("latency_cycles", 1342336) == "1,342,336 cycles"


def test_every_key_is_shown_with_its_unit(planc, ffn_plan):
    """On the small ffn's A100 plan (compiled once per session): the same keys as the
    example's, simulated in a tenth of the time."""
    plan = ffn_plan
    raw = planc("simulate", plan, "--json").json()
    text = planc("simulate", plan).out
    assert text.startswith(f"{plan}: ok: ark-plan\n")
    lines = text.splitlines()[1:]
    assert len(lines) == len(raw) - 2          # every figure but format and ok, one a line
    (modeled,) = [line for line in lines if line.split()[:2] == ["modeled", "time"]]
    assert modeled.split()[2:] == seconds(raw["modeled_time_s"]).split() and modeled.endswith("us")
    assert "(summed over processors)" in text and " MB " in text


def test_failures_say_so():
    report = {"format": "mscclpp", "ok": False, "deadlocks": ["gpu 1 tb 0 op 6 waits"]}
    assert human_report("p.json", report).splitlines() == [
        "p.json: FAILED: mscclpp", "  deadlocks  gpu 1 tb 0 op 6 waits"]


def test_records_and_message_sizes_read_like_the_other_figures():
    """A TT kernel read `modeled_time_s 30.3 us, max_tiles_per_core 11` and the MSCCL++ message
    size `67,108,864`, with no unit."""
    report = {"format": "tt", "ok": True, "message_size": 67108864,
              "kernels": [{"name": "Matmul 'matmul'", "max_tiles_per_core": 11,
                           "modeled_time_s": 3.03e-05, "max_abs_error": 0.0}],
              "slowest_task_groups": [{"task": 0, "processor_group": 1, "seconds": 2.64e-05}]}
    lines = human_report("p.json", report).splitlines()
    assert lines[1:] == [
        "  message size         67,108,864 B",
        "  kernels              name Matmul 'matmul', max tiles per core 11, modeled time "
        "30.3 us, max abs error 0",
        "  slowest task groups  task 0, processor group 1, time 26.4 us"]


def test_a_tt_report_names_the_device_that_timed_it(planc, small_ffn, tmp_path):
    """A tt.plan.json names no device: a blackhole plan was timed as a wormhole_b0 and the
    report did not say so."""
    plan = tmp_path / "tt.json"
    assert planc(small_ffn, "-t", "tt", "--arch", "blackhole", "-o", plan).code == 0
    default = planc("simulate", plan, "--cost-only", "--json").json()
    chosen = planc("simulate", plan, "--cost-only", "--json", "--arch", "blackhole").json()
    assert (default["device"], chosen["device"]) == ("wormhole_b0", "blackhole")
    assert "a TT plan does not name its device" in default["device_source"]
    assert chosen["modeled_time_s"] != default["modeled_time_s"]
    lines = planc("simulate", plan, "--cost-only").out.splitlines()
    assert lines[1].split() == ["device", "wormhole_b0"]
    # Nothing was computed: no kernel claims an error of 0 and ok.
    assert all("max_abs_error" not in k and "ok" not in k for k in default["kernels"])
    full = planc("simulate", plan, "--json").json()
    assert all(k["ok"] and "max_abs_error" in k for k in full["kernels"])
