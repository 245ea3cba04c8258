"""`planc tune` never returns a plan worse than the untuned one under either model (planc's
cost model, `modeled_time_s`, and the static-distribution roofline, `static_s`)."""

from __future__ import annotations

import itertools

from compiler.tune import summary
from compiler.tune_search import StudyResult, no_worse, ranked


def _row(sequence: int, time: float, static: float | None, nbytes: int = 100) -> dict:
    return {"key": str(sequence), "status": "scored", "modeled_time_s": time,
            "static_s": static, "device_bytes": nbytes, "sequence": sequence,
            "decisions": {"n": sequence}, "verdict": None}


def test_only_candidates_no_worse_under_both_models_are_admissible():
    default = _row(0, 10.0, 10.0)
    times = (9.0, 10.0, 11.0)
    for time, static in itertools.product(times, (*times, None)):
        row = _row(1, time, static)
        # Brute force: admissible exactly when neither figure is above the default's.
        expected = time <= 10.0 and (static is None or static <= 10.0)
        assert no_worse(row, default) is expected, (time, static)
    assert no_worse(default, default)
    assert no_worse(_row(1, 99.0, 99.0), None)


def test_the_best_admissible_candidate_is_not_the_cost_models_best():
    default = _row(0, 10.0, 10.0)
    rows = [default, _row(1, 8.0, 12.0), _row(2, 9.0, 9.5), _row(3, 9.5, 8.0)]
    best = next(r for r in ranked(rows, "time") if no_worse(r, default))
    assert best["sequence"] == 2      # 1 is faster by the cost model, slower by the roofline


def test_summary_reports_both_models():
    default, best = _row(0, 10e-6, 20e-6), _row(1, 8e-6, 16e-6)
    result = StudyResult("m.json", "a100", rows=[default, best], best=best, default=default,
                         best_file="best.json")
    text = summary([result], "time")
    assert "planc's default: 10 us (static roofline 20 us)" in text
    assert "best (time): 8 us (static roofline 16 us)" in text
    assert "1.25x faster, 1.25x under the static roofline" in text
