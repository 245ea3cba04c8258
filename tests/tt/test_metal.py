"""`--target tt-metal`: the host program and kernels compile against a mock TT-Metalium SDK
with the real signatures, and, run on the mock's CPU emulation, compute the model's numbers."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from examples.build_examples import ffn
from frontends.model_builder import ModelBuilder
from ground import dtypes
from targets.ark.model_interpreter import run_model
from tests.conftest import EXAMPLES, corpus_params, write_json
from tests.tt import metal_harness as harness
from tests.tt.fixtures import matmul_plan

pytestmark = pytest.mark.skipif(harness.GXX is None, reason="g++ is not installed")


def emit(planc, source: Path, outdir: Path, *flags: str) -> Path:
    result = planc(source, "--target", "tt-metal", "-o", outdir, *flags)
    assert result.code == 0, result.err
    return outdir


def test_every_emitted_file_compiles(planc, tmp_path):
    out = emit(planc, EXAMPLES / "ffn.json", tmp_path / "ffn")
    checked = harness.syntax_check(out)
    assert len(checked) == 6 * 3 + 1
    assert (out / "planc_tt_host.hpp").exists()


def cb_table(text: str, pattern: str) -> dict[int, int]:
    return {int(index): int(pages) for pages, index in re.findall(pattern, text)}


def test_host_and_kernels_share_one_cb_table(planc, tmp_path):
    out = emit(planc, EXAMPLES / "ffn.json", tmp_path / "ffn", "--grid", "4x4")
    host = (out / "main.cpp").read_text()
    programs = host.split("Program program = CreateProgram();")[1:]
    for program, kernel_dir in zip(programs, sorted((out / "kernels").iterdir()), strict=True):
        host_cbs = set(re.findall(r"CircularBufferConfig\(\d+ \* \d+, \{\{CBIndex::c_(\d+),",
                                  program))
        kernel_cbs = set()
        for kernel in kernel_dir.glob("*.cpp"):
            kernel_cbs |= set(re.findall(r"= tt::CBIndex::c_(\d+);", kernel.read_text()))
        assert host_cbs == kernel_cbs and {"0", "16"} <= host_cbs
        # Runtime args: every index a kernel reads is one the host sets.
        for role in ("reader", "compute", "writer"):
            kernel = (kernel_dir / f"{role}.cpp").read_text()
            fixed = [int(i) for i in re.findall(r"get_arg_val<uint32_t>\((\d+)\)", kernel)]
            counts = runtime_arg_counts(program, role)
            assert counts and max(fixed) < min(counts)


def runtime_arg_counts(program: str, role: str) -> list[int]:
    """How many runtime args the host sets for `role` on each core: one SetRuntimeArgs call per
    core, or a table of (x, y, count) rows after the kernel's fixed buffer addresses."""
    counts = [len(args.split(",")) for args in re.findall(
        rf"SetRuntimeArgs\(program, {role}, CoreCoord\(\d+, \d+\), \{{(.*?)\}}\);",
        program, re.S)]
    for table in re.findall(rf"// {role}'s runtime args on \d+ cores.*?SetRuntimeArgs", program,
                            re.S):
        fixed = re.search(r"std::vector<uint32_t> args\{(.*?)\};", table).group(1)
        base = len(fixed.split(",")) if fixed.strip() else 0
        rows = re.search(r"runtime_cores\[\d+\]\[3\] = \{(.*?)\};", table, re.S).group(1)
        counts += [base + int(n) for n in re.findall(r"\{\d+, \d+, (\d+)\}", rows)]
    return counts


def test_api_pitfalls_are_avoided(planc, tmp_path):
    out = emit(planc, EXAMPLES / "ffn.json", tmp_path / "ffn")
    compute = (out / "kernels" / "00_matmul" / "compute.cpp").read_text()
    reader = (out / "kernels" / "00_matmul" / "reader.cpp").read_text()
    # FFN weights are [N, K]: the transpose is mm_init's, once; matmul_tiles has 5 arguments.
    assert "mm_init(cb_in0, cb_in1, cb_out0, 1);" in compute
    assert all(call.count(",") == 4 for call in re.findall(r"matmul_tiles\([^)]*\)", compute))
    for protocol in ("tile_regs_acquire();", "tile_regs_commit();", "tile_regs_wait();",
                     "pack_tile(0, cb_out0);", "tile_regs_release();"):
        assert protocol in compute
    assert "acquire_dst" not in compute and "commit_dst" not in compute
    assert "TensorAccessor(a_args, a_addr, 2048)" in reader
    assert re.search(r"noc_async_read_tile\(\w+, [ab], l1_addr", reader)


def mixed_model():
    """One kernel of every kind the emitter supports, with broadcasts and batches."""
    m = ModelBuilder()
    x = m.tensor([2, 64, 96], "BF16")
    w = m.tensor([96, 80], "BF16")
    h = m.matmul(x, w)                                  # batch-broadcast B
    h = m.add(h, m.tensor([1, 80], "BF16"))             # ROW broadcast
    h = m.mul(h, m.tensor([2, 64, 1], "BF16"))          # COL broadcast
    h = m.sub(h, m.tensor([1, 1], "BF16"))              # SCALAR broadcast
    h = m.scalar_mul(m.gelu(h), 0.5)
    h = m.exp(m.scalar_add(m.relu(h), -1.0))
    h = m.sigmoid(m.copy(h))
    m.matmul(h, m.tensor([48, 80], "BF16"), transpose_other=True)
    m.matmul(m.tensor([2, 64, 96], "BF16"), m.tensor([2, 96, 32], "BF16"))  # batched B
    m.sqrt(m.tensor([70, 50], "FP32"))
    return m.finish()


def emulate(planc, tmp_path, model_text: str, *flags: str, seed: int = 5):
    from frontends.ark_model import import_document
    from ground.json_reader import parse_json

    source = tmp_path / "model.json"
    source.write_text(model_text)
    reference = run_model(import_document(parse_json(model_text)), seed=seed)
    out = emit(planc, source, tmp_path / "out", *flags)
    exe = harness.build_emulator(out)
    found = harness.run_emulator(exe, tmp_path / "data", reference.inputs, reference.types,
                                 reference.outputs)
    assert found.keys() == set(reference.outputs)
    for tensor_id, values in found.items():
        expected = reference.tensors[tensor_id]
        tol = dtypes.tolerance(reference.types[tensor_id].data_type)
        assert np.allclose(values, expected, rtol=tol.rtol, atol=tol.atol, equal_nan=True), (
            tensor_id, float(np.nanmax(np.abs(values - expected))))
        assert np.nanmax(np.abs(expected)) > 0
    return out


@pytest.mark.slow  # 12-17 s under load
def test_emulated_program_computes_the_ffn(planc, tmp_path):
    """Z-order work lists are not row-major runs: cores get packed (io, jo) items."""
    out = emulate(planc, tmp_path, ffn(seq=64, hidden=128, intermediate=192), "--grid", "2x2",
                  "--partition", "z_order")
    assert "uint32_t item = get_arg_val" in (out / "kernels/00_matmul/reader.cpp").read_text()


@pytest.mark.slow  # 12-17 s under load
def test_emulated_program_computes_every_supported_kernel(planc, tmp_path):
    """On one core, column by column: the batched matmul's core keeps B's strip for the two
    tile rows of each batch and must fetch the next batch's strip, not reuse it."""
    from backends.ark_model import emit_model
    out = emulate(planc, tmp_path, emit_model(mixed_model()), "--grid", "1x1",
                  "--partition", "column_major")
    compute = (out / "kernels" / "12_matmul_2" / "compute.cpp").read_text()
    assert "uint32_t b_strip = ((io / 2) + jo);" in compute


@pytest.mark.slow  # 12-17 s under load
def test_kernelless_upstream_plan_runs_as_its_gemm(planc, tmp_path):
    """TileLang-TT's own plan (A in DRAM without interleaving: one page read at offsets)."""
    path = next((p.values[0] for p in corpus_params("tt")
                 if p.values[0] is not None and p.values[0].name.startswith("tilelang-tt__root")),
                None)
    if path is None:
        pytest.skip("upstream corpus not found (set PLANC_CORPUS)")
    out = emit(planc, path, tmp_path / "out")
    reader = (out / "kernels" / "00_matmul" / "reader.cpp").read_text()
    assert "a.get_noc_addr(0, " in reader and "noc_async_read(" in reader
    rng = np.random.default_rng(0)
    a = dtypes.round_to(rng.uniform(-1, 1, (128, 128)).astype(np.float32), "BF16")
    b = dtypes.round_to(rng.uniform(-1, 1, (128, 128)).astype(np.float32), "BF16")
    data = tmp_path / "data"
    data.mkdir()
    dtypes.to_storage(a, "BF16").tofile(data / "in_t0.bin")
    dtypes.to_storage(b, "BF16").tofile(data / "in_t1.bin")
    exe = harness.build_emulator(out)
    assert subprocess.run([str(exe), str(data)], capture_output=True).returncode == 0
    c = dtypes.to_compute(np.fromfile(data / "out_t3.bin", dtype=np.uint16), "BF16")
    assert np.allclose(c.reshape(128, 128), a @ b, rtol=4e-2, atol=4e-2)


def test_unsupported_kernels_are_one_clear_error(planc, tmp_path):
    out = tmp_path / "att"
    result = planc(EXAMPLES / "attention.json", "-t", "tt-metal", "-o", out)
    assert result.code == 1 and not out.exists()
    assert result.err == (
        f"planc: error: {EXAMPLES / 'attention.json'}: $.Nodes[1].Op: tt-metal: ReduceMean "
        "'reduce_mean': ReduceMean has no TT-Metalium kernel in planc yet (supported: Matmul, "
        "Add, Sub, Mul, Exp, Gelu, Relu, Rsqrt, Sigmoid, Sqrt, Copy, ScalarAdd, ScalarMul)\n")
    m = ModelBuilder()
    m.matmul(m.tensor([64, 32]), m.tensor([64, 32]), transpose_input=True)
    from backends.ark_model import emit_model
    source = tmp_path / "ti.json"
    source.write_text(emit_model(m.finish()))
    result = planc(source, "-t", "tt-metal", "-o", tmp_path / "ti")
    assert result.code == 1 and "TransposeInput is not supported" in result.err


def test_runtime_arguments_stay_under_tt_metal_limit(planc, tmp_path):
    doc = matmul_plan()
    # 400 tiles on one core, in Z order: a list of 400 packed work items is too many.
    tiles = [(i, j) for i in range(20) for j in range(20)]
    from passes.tt_partition import morton
    tiles.sort(key=lambda t: morton(*t))
    doc["core_grid"] = [1, 1]
    doc["core_ranges"] = [{"start": [0, 0], "extent": [1, 1]}]
    doc["work_partition"] = {"(0,0)": [{"io": i, "jo": j, "len_k": 2} for i, j in tiles]}
    doc["kernel"]["grid_tiles"] = [20, 20]
    for tensors in ("WriteTensors", "ResultTensors"):
        for tensor in doc["kernel"]["operator"][tensors]:
            tensor["Shape"] = tensor["Strides"] = tensor["PaddedShape"] = [640, 640]
    doc["kernel"]["operator"]["ReadTensors"][0].update(
        Shape=[640, 64], Strides=[640, 64], PaddedShape=[640, 64])
    doc["kernel"]["operator"]["ReadTensors"][1].update(
        Shape=[64, 640], Strides=[64, 640], PaddedShape=[64, 640])
    source = write_json(tmp_path / "z.json", doc)
    assert planc("check", source).code == 0
    result = planc(source, "-t", "tt-metal", "-o", tmp_path / "z")
    assert result.code == 1
    assert result.err == (
        f"planc: error: {source}: $: tt-metal: Matmul 'matmul': core (0,0) has 400 work items; "
        "its reader would take 403 runtime args, more than tt-metal's 341 (a row_major "
        "partition passes each core's tiles as one contiguous run; more cores also help)\n")
    # In row-major order the same tiles are one contiguous run: two arguments suffice.
    doc["work_partition"]["(0,0)"].sort(key=lambda w: (w["io"], w["jo"]))
    assert planc(write_json(tmp_path / "r.json", doc), "-t", "tt-metal", "-o",
                 tmp_path / "r").code == 0


def test_host_helpers_use_tenstorrent_tile_layout(tmp_path):
    """planc_tt_host.hpp's to_tiles against TT's layout: 32x32 tiles row-major over the
    matrix, each tile four 16x16 faces (top-left, top-right, bottom-left, bottom-right)."""
    from backends.tt_metal import runtime_header
    (tmp_path / "planc_tt_host.hpp").write_text(runtime_header())
    (tmp_path / "t.cpp").write_text(
        '#include "planc_tt_host.hpp"\n#include <cstdio>\nint main() {\n'
        "  std::vector<int> v(2 * 40 * 50);\n  for (std::size_t i = 0; i < v.size(); ++i) "
        "v[i] = static_cast<int>(i) + 1;\n  auto t = planc::to_tiles(v, 2, 40, 50);\n"
        "  if (planc::from_tiles(t, 2, 40, 50) != v) return 1;\n"
        '  for (int x : t) std::printf("%d\\n", x);\n}\n')
    subprocess.run([harness.GXX, "-std=c++17", "-Wall", "-Werror", "t.cpp", "-o", "t"],
                   cwd=tmp_path, check=True)
    tiles = np.array(subprocess.run([str(tmp_path / "t")], capture_output=True, text=True,
                                    check=True).stdout.split(), dtype=np.int64)
    values = np.arange(1, 2 * 40 * 50 + 1).reshape(2, 40, 50)
    padded = np.zeros((2, 64, 64), dtype=np.int64)
    padded[:, :40, :50] = values
    expected = (padded.reshape(2, 2, 2, 16, 2, 2, 16)      # b, tile r, face r, r, tile c, face c, c
                .transpose(0, 1, 4, 2, 5, 3, 6).reshape(-1))
    assert np.array_equal(tiles, expected)


@pytest.mark.skipif(shutil.which("cmake") is None or shutil.which("make") is None,
                    reason="cmake and make are not installed")
@pytest.mark.slow  # 12-17 s under load
def test_cmake_builds_the_host_program(planc, tmp_path):
    """The emitted CMakeLists.txt finds TT-Metalium the way tt-metal's own examples do
    (`find_package(TT-Metalium)`, target `TT::Metalium`) and compiles the host program; here
    the package is a stand-in whose headers are the mock SDK's."""
    out = emit(planc, EXAMPLES / "ffn.json", tmp_path / "ffn")
    assert "cmake -S . -B build" in (out / "README.md").read_text()
    package = tmp_path / "package"
    package.mkdir()
    (package / "TT-MetaliumConfig.cmake").write_text(
        "add_library(TT::Metalium INTERFACE IMPORTED)\n"
        "set_target_properties(TT::Metalium PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "
        f'"{harness.MOCK_SDK}")\n')
    build = tmp_path / "build"
    configure = subprocess.run(["cmake", "-S", out, "-B", build,
                                f"-DCMAKE_PREFIX_PATH={package}"], capture_output=True, text=True)
    assert configure.returncode == 0, configure.stderr
    compiled = subprocess.run(["make", "-C", build, "main.cpp.o"], capture_output=True, text=True)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    flags = (build / "CMakeFiles" / "planc_tt.dir" / "flags.make").read_text()
    assert f'-DPLANC_KERNEL_DIR=\\"{out}/\\"' in flags
