"""The C++ runtime agrees with the format's definitions in dialects/plan.py and with numpy.

One harness program, built once, runs the runtime's pieces on many inputs:

* `task_seq` (the CPU's, which shares `task_of`/`processor_number` with the CUDA one) against
  `plan.distribute`, over random processor and task ranges with steps and starts, granularities,
  slot counts and rotations;
* `place_warp` (the CUDA slot of a warp) against slicing the WarpRange into slots;
* `Tiling` with the template arguments the printer emits, against `plan.task_tile`, for every
  operator of the test plans;
* the fp16 and bf16 conversions against numpy, bit for bit.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from backends.ark_plan import single_plan
from backends.cpu import CpuPrinter
from backends.plan_cxx import runtime_files
from compiler.output import write_product
from dialects import ark, plan
from ground import dtypes
from tests.codegen import plans, programs
from tests.codegen.cases import CASES

# One xdist worker runs them: the module's harness program (g++, about 3 CPU s) is a module
# fixture, which every worker running one of these tests would otherwise build again.
pytestmark = pytest.mark.xdist_group("runtime-harness")

RNG = random.Random(7)


def distribution_params(count: int = 40) -> list[dict]:
    params = []
    for _ in range(count):
        begin, step = RNG.randrange(0, 5), RNG.choice([1, 1, 2, 3])
        processors = plan.Range(begin, begin + step * RNG.randrange(1, 7) - RNG.randrange(0, step),
                                step)
        t_begin, t_step = RNG.randrange(0, 6), RNG.choice([1, 1, 2, 5])
        tasks = plan.Range(t_begin, t_begin + RNG.randrange(0, 60), t_step)
        params.append({"processors": processors, "tasks": tasks,
                       "granularity": RNG.choice([1, 1, 2, 3, 7]),
                       "slots": RNG.choice([1, 1, 2, 4]),
                       "first": RNG.randrange(0, len(processors))})
    return params


def warp_params(count: int = 40) -> list[tuple[int, int, int, int, int]]:
    params = []
    for _ in range(count):
        begin, step = RNG.randrange(0, 8), RNG.choice([1, 1, 2, 3])
        end = min(32, begin + step * RNG.randrange(1, 12))
        slot_warps = RNG.choice([1, 2, 3, 4])
        available = len(plan.Range(begin, end, step)) // slot_warps
        params.append((begin, end, step, slot_warps, RNG.randint(min(1, available), available)))
    return params


def tiled_operators() -> list[tuple[ark.ArkOp, str]]:
    """Every operator of the test plans with the `Shape, Unit` arguments the printer emits."""
    found = []
    for name in ("fp32_ops", "bf16_ops", "fp16_attention"):
        case = CASES[name]
        printer = CpuPrinter(single_plan(plans.import_plan_doc(case.plan(case.model()))))
        found += [(op, printer.tiling(op)) for op in printer.scheduled_operators()]
    return found


def harness_source(distributions, warps, tilings) -> str:
    cases = []
    for i, d in enumerate(distributions):
        r, t = d["processors"], d["tasks"]
        cases.append(f"""
  for (int proc = 0; proc < {r.end}; ++proc) {{
    std::vector<long long> seen;
    planc::task_seq<{r.begin}, {r.end}, {r.step}, {d['first']}, {t.begin}, {t.end}, {t.step},
                    {d['granularity']}, {d['slots']}, 1, 0, Record>(
        proc, reinterpret_cast<char*>(&seen), planc::CpuSlot{{}});
    std::printf("D {i} %d", proc);
    for (long long task : seen) std::printf(" %lld", task);
    std::printf("\\n");
  }}""")
    for i, (begin, end, step, slot_warps, slots) in enumerate(warps):
        cases.append(f"""
  for (int warp = 0; warp < 32; ++warp) {{
    const planc::WarpPlace place = planc::place_warp(warp, {begin}, {end}, {step}, {slot_warps},
                                                     {slots});
    std::printf("W {i} %d %d %d\\n", warp, place.slot, place.rank);
  }}""")
    for i, (_, tiling) in enumerate(tilings):
        cases.append(f"""
  {{
    using T = planc::Tiling<{tiling}>;
    for (long long task = 0; task <= T::count; ++task) {{
      const planc::Tile t = T::tile(task);
      std::printf("T {i} %lld %lld %lld %lld %lld %lld %lld %lld %lld\\n", task, t.begin[0],
                  t.begin[1], t.begin[2], t.begin[3], t.extent[0], t.extent[1], t.extent[2],
                  t.extent[3]);
    }}
  }}""")
    body = "".join(cases)
    return f"""#include <cstdio>
#include <vector>
#include "runtime/planc_cpu.h"

struct Record {{
  template <class Slot>
  static void run(const Slot&, char* arena, long long task) {{
    reinterpret_cast<std::vector<long long>*>(arena)->push_back(task);
  }}
}};

// convert FILE: float32 values in; for each: half bits, bf16 bits, float bits of the half.
static int convert(const char* path) {{
  std::FILE* f = std::fopen(path, "rb");
  std::vector<float> values;
  float v;
  while (std::fread(&v, sizeof v, 1, f) == 1) values.push_back(v);
  std::fclose(f);
  std::vector<planc::fp16> halves;
  for (float x : values) halves.push_back(planc::fp16{{planc::half_bits_from_float(x)}});
  std::vector<float> widened(values.size());  // the matmul packing's vectorised conversion
  planc::cpu::to_floats(halves.data(), widened.data(), static_cast<long long>(halves.size()));
  for (size_t i = 0; i < values.size(); ++i) {{
    const uint16_t h = halves[i].bits;
    std::printf("%u %u %u %u\\n", h, planc::bf16_bits_from_float(values[i]),
                planc::float_bits(planc::float_from_half_bits(h)),
                planc::float_bits(widened[i]));
  }}
  return 0;
}}

int main(int argc, char** argv) {{
  if (argc == 3) return convert(argv[2]);{body}
  return 0;
}}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory):
    if programs.CXX is None:
        pytest.skip("no C++ compiler (g++ or clang++) on PATH")
    distributions, warps, tilings = distribution_params(), warp_params(), tiled_operators()
    root = tmp_path_factory.mktemp("harness")
    write_product(root, {"harness.cpp": harness_source(distributions, warps, tilings),
                         **runtime_files("planc_cpu.h")})
    programs.run_checked([programs.CXX, *programs.CPU_FLAGS, "harness.cpp", "-o", "harness"],
                         cwd=root)
    lines = programs.run_checked([root / "harness"]).splitlines()
    return {"root": root, "distributions": distributions, "warps": warps, "tilings": tilings,
            "lines": lines}


def records(harness, kind: str) -> dict[int, list[list[int]]]:
    found: dict[int, list[list[int]]] = {}
    for line in harness["lines"]:
        tag, index, *values = line.split()
        if tag == kind:
            found.setdefault(int(index), []).append([int(v) for v in values])
    return found


def test_task_seq_runs_the_distribution_of_the_format(harness):
    runs = records(harness, "D")
    for index, d in enumerate(harness["distributions"]):
        expected = plan.distribute(d["processors"], d["tasks"], d["granularity"], d["slots"],
                                   d["first"])
        for proc, *tasks in runs[index]:
            slots = expected.get(proc, [])
            assert tasks == [task for slot in slots for task in slot], (d, proc)


def test_warps_find_their_slot_as_the_warp_range_is_sliced(harness):
    places = records(harness, "W")
    for index, (begin, end, step, slot_warps, slots) in enumerate(harness["warps"]):
        members = list(plan.Range(begin, end, step))
        for warp, slot, rank in places[index]:
            position = members.index(warp) if warp in members else None
            if position is None or position // slot_warps >= slots:
                assert (slot, rank) == (-1, 0)
            else:
                assert (slot, rank) == (position // slot_warps, position % slot_warps)


def test_tiles_are_the_task_tiles_of_the_format(harness):
    tiles = records(harness, "T")
    for index, (op, _) in enumerate(harness["tilings"]):
        shape = op.outputs[0].shape_list
        rows = tiles[index]
        assert rows[-1][1:] == [0] * 8, "past the last tile there is nothing to compute"
        assert len(rows) - 1 == op.config_value()["NumTasks"], op.label.data
        for task, *values in rows[:-1]:
            begin, extent = values[:4], values[4:]
            expected = plan.task_tile(op, task)
            lead = 4 - len(shape)
            assert begin[:lead] == [0] * lead and extent[:lead] == [1] * lead
            assert [(s.start, s.stop - s.start) for s in expected] == \
                list(zip(begin[lead:], extent[lead:], strict=True)), (op.label.data, task)


@pytest.mark.slow  # 19 s under load
def test_fp16_and_bf16_conversions_round_like_numpy(harness):
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    exact = halves.astype(np.float32)
    finite = exact[np.isfinite(exact)]
    neighbours = np.sort(np.unique(finite))
    midpoints = ((neighbours[:-1].astype(np.float64) + neighbours[1:]) / 2).astype(np.float32)
    rng = np.random.default_rng(3)
    wide = (rng.standard_normal(20000) * np.exp2(rng.uniform(-40, 40, 20000))).astype(np.float32)
    tiny = np.array([1e-45, -1e-45, 1e-40, 6e-8, 3e-8, 2.98e-8, 65504, 65519.99, 65520, 1e9,
                     np.inf, -np.inf, np.nan, 0.0, -0.0], dtype=np.float32)
    values = np.concatenate([exact, midpoints, -midpoints, wide, tiny])
    path = harness["root"] / "values.bin"
    values.tofile(path)
    out = np.array([line.split() for line in programs.run_checked(
        [harness["root"] / "harness", "convert", path]).splitlines()], dtype=np.uint64)
    half, bf16, back, widened = out[:, 0], out[:, 1], out[:, 2], out[:, 3]
    nan = np.isnan(values)
    with np.errstate(over="ignore"):  # values beyond the half range become inf
        expected_half = values[~nan].astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(half[~nan], expected_half)
    np.testing.assert_array_equal(bf16, dtypes.float_to_bf16_bits(values))
    assert np.all(np.isnan(values[nan].astype(np.float16)))
    # Every half converts to float exactly (the first 65536 values are all the halves).
    got = back[:1 << 16].astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(got[~np.isnan(exact)], exact[~np.isnan(exact)])
    assert np.all(np.isnan(got[np.isnan(exact)]))
    np.testing.assert_array_equal(widened, back)  # both conversions agree on every bit


def test_the_tiling_check_covers_every_kernel_family(harness):
    for family in (ark.UnaryOp, ark.BinaryOp, ark.ReduceOp, ark.TransposeOp, ark.EmbeddingOp,
                   ark.RopeOp, ark.MatmulOp, ark.ScalarAssignOp):
        assert any(isinstance(op, family) for op, _ in harness["tilings"]), family
    assert len(records(harness, "D")) == len(harness["distributions"])
