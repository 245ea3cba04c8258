"""Hardware descriptions: data files loaded by name, checked, and the plan verifier's
architecture limits taken from them."""

from __future__ import annotations

import json

import pytest

from devices import hardware
from dialects.locations import verify_module
from frontends.ark_plan import import_document
from ground.diagnostics import PlancError, UsageError
from ground.json_reader import JsonNode
from tests.plan.fixtures import small_plan_doc


def test_known_gpus_and_their_shape():
    assert {"a100", "h100", "mi300x"} <= set(hardware.device_names("gpu"))
    a100, h100, mi300x = (hardware.gpu_device(n) for n in ("a100", "h100", "mi300x"))
    assert (a100.architecture, a100.processors, a100.warp_size) == ("CUDA_80", 108, 32)
    assert (h100.architecture, h100.processors) == ("CUDA_90", 132)
    assert (mi300x.architecture, mi300x.processors, mi300x.warp_size) == ("ROCM_942", 304, 64)
    # ARK's default matmul configurations are among each device's kernels.
    assert hardware.MatmulKernel((128, 256, 64), 8, 147456) in a100.matmul_kernels["FP16"]
    assert hardware.MatmulKernel((128, 256, 32), 4, 24672) in mi300x.matmul_kernels["FP16"]
    assert a100.sram_per_processor == 166912 - 128
    assert mi300x.matmul_rate("FP16") > h100.matmul_rate("FP16") > a100.matmul_rate("FP16")


def _ck_lds_bytes(m: int, n: int, warps: int, dtype: str) -> int:
    """Composable Kernel's GridwiseGemm_k0mk1_k0nk1_mn_xdl_cshuffle_v1::
    GetSharedMemoryNumberOfByte, step by step, for the parameters ARK's gemm_ck.h passes:
    K per block 32 (FP16, K1 8) or 16 (FP32, K1 4), one padding row (LdsExtraM/N), 32x32 XDL
    instructions and one XDL per wave in each C-shuffle step."""
    k_per_block, k1, elem = {"FP16": (32, 8, 2), "FP32": (16, 4, 4)}[dtype]
    k0 = k_per_block // k1

    def space(rows: int) -> int:
        # naive descriptor (K0, rows, K1) with strides ((rows + 1) * K1, K1, 1)
        return (k0 - 1) * (rows + 1) * k1 + (rows - 1) * k1 + (k1 - 1) + 1

    align = k1  # lcm(AK1, BK1)
    a, b = (-(-space(rows) // align) * align for rows in (m, n))
    c_shuffle = warps * 32 * 32  # (MWave * 32) x (NWave * 32) elements, MWave * NWave = warps
    return max((a + b) * elem, c_shuffle * elem)


@pytest.mark.parametrize("dtype", ["FP16", "FP32"])
def test_mi300x_matmul_lds_sizes_are_composable_kernels(dtype):
    """ARK's IsEq<SmemBytes, SramBytes> makes a wrong LDS size a compile error: every FP16 and
    FP32 tile must ask exactly what CK's formula gives, which for ARK's own default tile is
    ARK's 24672."""
    kernels = hardware.gpu_device("mi300x").matmul_kernels[dtype]
    assert _ck_lds_bytes(128, 256, 4, dtype) == 24672
    assert len(kernels) > 2
    for kernel in kernels:
        m, n, _ = kernel.tile
        assert kernel.sram == _ck_lds_bytes(m, n, kernel.warps, dtype), kernel
        assert kernel.tile[2] == {"FP16": 32, "FP32": 16}[dtype]
        # The thread clusters of ARK's configurations divide the tile.
        assert m % 32 == 0 and n % 32 == 0 and m * n // (32 * 32) >= kernel.warps


def test_unknown_device_lists_the_known_ones():
    with pytest.raises(UsageError, match=r"unknown device 'v100': did you mean h100\? \(known "
                                         r"GPUs: a100, h100 or mi300x"):
        hardware.gpu_device("v100")
    with pytest.raises(UsageError, match=r"unknown device 'v100': did you mean h100\? \(known "
                                         r"devices: a100, blackhole, h100, mi300x or wormhole_b0"):
        hardware.load_device("v100")
    with pytest.raises(UsageError, match=r"unknown device 'tpu' \(known GPUs"):
        hardware.gpu_device("tpu")


def test_one_folder_describes_every_kind_of_device():
    assert hardware.device_names("gpu") == ["a100", "h100", "mi300x"]
    assert hardware.device_names("tenstorrent") == ["blackhole", "wormhole_b0"]
    with pytest.raises(UsageError, match="device 'wormhole_b0' is a tenstorrent device, not "
                                         "a GPU"):
        hardware.gpu_device("wormhole_b0")


def test_user_devices_from_a_folder(tmp_path, monkeypatch):
    doc = json.loads((hardware.DEVICES / "a100.json").read_text())
    doc.update(name="a30", description="A30", processors=56)
    (tmp_path / "a30.json").write_text(json.dumps(doc))
    (tmp_path / "npu.json").write_text(json.dumps({"name": "npu", "kind": "tenstorrent"}))
    monkeypatch.setenv("PLANC_DEVICE_PATH", str(tmp_path))
    hardware.gpu_device.cache_clear()
    try:
        assert hardware.gpu_device("a30").processors == 56
        assert hardware.load_device("npu")["kind"] == "tenstorrent"
        with pytest.raises(UsageError, match="device 'npu' is a tenstorrent device, not a GPU"):
            hardware.gpu_device("npu")
        broken = dict(doc, processors=0)
        (tmp_path / "broken.json").write_text(json.dumps(broken))
        with pytest.raises(PlancError) as info:
            hardware.gpu_device("broken")
        assert info.value.path == "$.processors" and info.value.file.endswith("broken.json")
    finally:
        hardware.gpu_device.cache_clear()


@pytest.mark.parametrize("change, path, message", [
    (lambda d: d["ProcessorGroups"][0]["ResourceGroups"][0].update(SramRange=[0, 200000]),
     "$.ProcessorGroups[0].ResourceGroups[0]",
     "SramRange [0, 200000] exceeds the 166784 bytes of shared memory a plan may use on one "
     "processor of CUDA_80"),
    (lambda d: d.update(NumWarpsPerProcessor=40),
     "$", "NumWarpsPerProcessor 40 exceeds the 32 warps one processor of CUDA_80 can hold"),
    (lambda d: d.update(Architecture="ROCM_942", NumWarpsPerProcessor=17),
     "$", "NumWarpsPerProcessor 17 exceeds the 16 warps one processor of ROCM_942 can hold"),
])
def test_plans_are_checked_against_their_architecture(change, path, message):
    doc = small_plan_doc()
    change(doc)
    with pytest.raises(PlancError) as info:
        verify_module(import_document(JsonNode(doc)))
    assert info.value.path == path
    assert info.value.message == message


def test_unknown_architectures_have_no_limits():
    doc = small_plan_doc()
    doc.update(Architecture="CUDA_70", NumWarpsPerProcessor=40)
    for rg in (g["ResourceGroups"][0] for g in doc["ProcessorGroups"]):
        rg["WarpRange"] = [0, 40]
    verify_module(import_document(JsonNode(doc)))
