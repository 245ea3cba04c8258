"""`planc simulate`'s functional run (`check_tiles`) models what DRAM holds by the DRAM queue:
a load sees a stored block only when its store is ahead of it in `tensor_order`. Before, the
replay filled DRAM in workload order, so a reload queued before its store (what planc's
gemini-dram-order once wrote) read the right data and passed."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx", reason="the ONNX frontend is the planc[onnx] extra")

from dialects import gemini  # noqa: E402
from targets.gemini.simulator import check_tiles, dram_orders  # noqa: E402
from tests.onnx.test_concat import concat_network, scheduled, the_schedule  # noqa: E402


def _move(schedule: gemini.ScheduleOp, a: int, b: int) -> int:
    """Exchange queue positions `a` and `b` in every snapshot entry; how many changed."""
    changed = 0
    for wl in schedule.workloads():
        for entry in [*wl.buffer, *wl.wl0]:
            order = entry.value("tensor_order")
            if order in (a, b):
                entry.set("tensor_order", gemini.int_attr(a + b - order))
                changed += 1
    return changed


def test_a_reload_queued_before_its_store_reads_stale_dram():
    imp = scheduled(concat_network(), "1x1", None, 8000)    # small L2: maps go to DRAM
    schedule = the_schedule(imp.module)
    assert check_tiles(imp.module).ok
    orders = dram_orders(schedule)
    load = next(ld for ld in schedule.dram.loads if ld.ints_of("related_ifmap"))
    tid, store = load.value("transfer_id"), load.ints_of("related_ifmap")[0]
    at, later = orders[("store", store)], orders[("load", tid)]
    assert at < later
    assert _move(schedule, at, later) >= 2
    check = check_tiles(imp.module)
    assert not check.ok
    assert f"reads DRAM load {tid} at tensor_order {at}, before store {store} at {later} " \
        in check.problem
