"""`planc check` on ARK plans against the memories of a device (targets.ark.capacity, issue 25):
device memory (the executor's one allocation of every local buffer), SRAM per processor and
processors, each decided for the device `--arch` names or, without it, for the plan's
Architecture. The byte counts the tests expect are summed from the plan's JSON here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

A100 = json.loads((Path(__file__).parents[2] / "devices" / "a100.json").read_text())


def _device(folder: Path, name: str, **changes) -> None:
    (folder / f"{name}.json").write_text(json.dumps({**A100, "name": name, **changes}))


@pytest.fixture
def devices(tmp_path, monkeypatch):
    """The shipped GPUs, and a100 variants a user might describe."""
    from devices import hardware

    folder = tmp_path / "devices"
    folder.mkdir()
    monkeypatch.setenv("PLANC_DEVICE_PATH", str(folder))
    caches = (hardware.gpu_device, hardware.architecture_limits,
              hardware._raw_cached)  # noqa: SLF001 -- the test's own files
    for cached in caches:
        cached.cache_clear()
    yield folder
    for cached in caches:
        cached.cache_clear()


def _layout_bytes(doc: dict) -> int:
    """ARK's executor layout summed from the JSON: each local buffer as large as the largest
    span of a tensor on it (the product of the strides times the element size)."""
    sizes: dict[int, int] = {}
    width = {"FP16": 2, "BF16": 2, "FP32": 4, "INT32": 4, "UINT8": 1, "BYTE": 1}

    def visit(node):
        if isinstance(node, dict):
            if "Buffer" in node and "Strides" in node and "DataType" in node:
                span = width[node["DataType"]]
                for stride in node["Strides"]:
                    span *= stride
                buffer = node["Buffer"]
                if buffer["Rank"] in (-1, doc.get("Rank", 0)):
                    sizes[buffer["Id"]] = max(sizes.get(buffer["Id"], 0), span)
            for value in node.values():
                visit(value)
        elif isinstance(node, list):
            for value in node:
                visit(value)
    visit(doc)
    return sum(sizes.values())


def _rules(planc, path, *arch) -> tuple[int, set[tuple[str, str]]]:
    report = planc("check", "--strict", "--json", *(("--arch", *arch) if arch else ()),
                   path).json()
    return (0 if report["ok"] else 1), {(f["rule"], f["path"]) for f in report["findings"]}


def test_device_memory_is_checked_against_the_named_device(planc, ffn_plan, devices):
    need = _layout_bytes(json.loads(ffn_plan.read_text()))
    assert need > 1 << 20
    _device(devices, "a100_small", memory_bytes=need - 1)
    _device(devices, "a100_exact", memory_bytes=need)
    assert _rules(planc, ffn_plan) == (0, set())                # CUDA_80: an 80 GB a100
    assert _rules(planc, ffn_plan, "a100_exact") == (0, set())
    assert _rules(planc, ffn_plan, "a100_small") == (1, {("ark-plan.device-memory", "$")})


def test_sram_and_processors_are_checked_against_the_named_device(planc, ffn_plan, devices):
    doc = json.loads(ffn_plan.read_text())
    sram = max(rg["SramRange"][1] for pg in doc["ProcessorGroups"]
               for rg in pg["ResourceGroups"])
    first = next((i, j) for i, pg in enumerate(doc["ProcessorGroups"])
                 for j, rg in enumerate(pg["ResourceGroups"]) if rg["SramRange"][1] == sram)
    _device(devices, "a100_less_sram", shared_memory_per_processor=sram + 127)
    _device(devices, "a100_enough_sram", shared_memory_per_processor=sram + 128)
    _device(devices, "a100_fewer_sms", processors=doc["NumProcessors"] - 1)
    assert _rules(planc, ffn_plan, "a100_enough_sram") == (0, set())
    assert _rules(planc, ffn_plan, "a100_less_sram") == (
        1, {("ark-plan.sram", f"$.ProcessorGroups[{first[0]}].ResourceGroups[{first[1]}]")})
    assert _rules(planc, ffn_plan, "a100_fewer_sms") == (1, {("ark-plan.processors", "$")})


def test_corpus_plans_fit_their_architecture(planc):
    import os

    corpus = Path(os.environ.get("PLANC_CORPUS", Path(__file__).parents[3] / "shared" /
                                 "corpus")) / "ark"
    plans = sorted(corpus.glob("*plan*.json"))
    if not plans:
        pytest.skip("the ARK corpus is not there (PLANC_CORPUS)")
    for path in plans:
        code, found = _rules(planc, path)
        assert not {rule for rule, _ in found} & {"ark-plan.device-memory", "ark-plan.sram",
                                                  "ark-plan.processors"}, (path, found)
