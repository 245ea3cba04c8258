"""What the `cpu` and `cuda` targets emit, and how they refuse what they cannot run."""

from __future__ import annotations

import json
import re
from argparse import Namespace

import pytest

from backends import ark_plan, cpu, cuda
from backends.ark_plan import single_plan
from dialects import plan
from frontends.ark_plan import import_document
from frontends.model_builder import ModelBuilder
from ground.diagnostics import PlancError
from ground.json_reader import load_json_file
from tests.codegen import plans
from tests.codegen.cases import CASES, chain_model, concurrent_chain, fp16_model
from tests.conftest import EXAMPLES, corpus_params, write_json
from tests.plan.fixtures import small_plan_doc

TARGETS = ("cpu", "cuda")
PLAN_FILES = [p for p in corpus_params("ark")
              if p.values[0] is None or "TaskInfos" in json.loads(p.values[0].read_text())]


def emit(doc: dict, target: str, **options) -> dict[str, str]:
    backend = cpu if target == "cpu" else cuda
    return backend.emit(plans.import_plan_doc(doc), Namespace(**options))


@pytest.mark.parametrize("target", TARGETS)
def test_cli_writes_a_buildable_directory(planc, tmp_path, target):
    source = write_json(tmp_path / "plan.json", small_plan_doc())
    result = planc(source, "--target", target, "-o", tmp_path / "out")
    assert result.code == 0, result.err
    files = {p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*")
             if p.is_file()}
    sources = {"plan.cpp"} if target == "cpu" else {"kernel.cu", "host.cu"}
    runtime = {"runtime/planc_types.h", "runtime/planc_kernels.h", "runtime/planc_host.h",
               f"runtime/planc_{target}.h"}
    assert files == sources | runtime | {"tensors.json", "README.md", "CMakeLists.txt"}
    manifest = json.loads((tmp_path / "out" / "tensors.json").read_text())
    assert [t["id"] for t in manifest["inputs"]] == [0, 1]
    assert [(t["id"], t["shape"], t["dtype"]) for t in manifest["outputs"]] == \
        [(7, [4, 16], "FP32")]


@pytest.mark.parametrize("target", TARGETS)
def test_directory_targets_need_an_output_directory(planc, tmp_path, target):
    source = write_json(tmp_path / "plan.json", small_plan_doc())
    result = planc(source, "--target", target)
    assert result.code == 1
    assert result.err == f"planc: error: --target {target} writes a directory; give it with " \
                         "-o DIR\n"


def outcome(function) -> tuple[str, object]:
    try:
        return "returned", function()
    except Exception as e:  # noqa: BLE001 -- comparing what two calls do, whatever it is
        return type(e).__name__, str(e)


@pytest.mark.parametrize("target", TARGETS)
def test_model_inputs_are_planned_by_the_ark_target(target):
    """A model goes through the `ark` target's pipeline (the ARK planner) first."""
    options = Namespace(json_layout="denser")
    backend = cpu if target == "cpu" else cuda
    assert outcome(lambda: backend.pipeline("ark-model", options)) == \
        outcome(lambda: ark_plan.pipeline("ark-model", options))
    assert backend.pipeline("ark-plan", options) == ""


def test_a_model_runs_if_and_only_if_planc_can_plan_it(planc, tmp_path):
    planned = planc(EXAMPLES / "ffn.json", "--target", "ark", "-o", tmp_path / "plan.json")
    result = planc(EXAMPLES / "ffn.json", "--target", "cpu", "-o", tmp_path / "out")
    if planned.code == 0:
        assert result.code == 0 and (tmp_path / "out" / "plan.cpp").is_file()
    else:
        assert (result.code, result.err) == (planned.code, planned.err)
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("target", TARGETS)
def test_communication_is_refused_with_the_operator_path(planc, tmp_path, target):
    doc = plans.plan_doc(plans.model_doc(_sendrecv_model()))
    source = write_json(tmp_path / "plan.json", doc)
    result = planc(source, "--target", target, "-o", tmp_path / "out")
    assert result.code == 1
    assert re.fullmatch(r"planc: error: .*plan\.json: \$\.TaskInfos\[1\]\.Ops\[0\]: Send 'send': "
                        rf"communication operators are not supported by --target {target} "
                        r"\(it runs one rank's compute plan\)\n", result.err), result.err
    assert not (tmp_path / "out").exists()


def _sendrecv_model():
    m = ModelBuilder(rank=0, world_size=2)
    m.send(m.scalar_mul(m.tensor([4, 8], "FP32"), 2.0), remote_rank=1)
    return m.finish()


@pytest.mark.parametrize("path", PLAN_FILES)
@pytest.mark.parametrize("target", TARGETS)
def test_corpus_plans(path, target):
    module = import_document(load_json_file(path))
    backend = cpu if target == "cpu" else cuda
    if path.name.startswith("allreduce"):
        with pytest.raises(PlancError, match="communication operators are not supported"):
            backend.emit(module, Namespace())
        return
    files = backend.emit(module, Namespace())
    body = files["plan.cpp" if target == "cpu" else "kernel.cu"]
    p = single_plan(module)
    assert body.count("task_seq<") == sum(len(rg.task_groups()) for pg in p.processor_groups()
                                          for rg in pg.resource_groups())


def test_matmul_of_integers_has_no_kernel():
    m = ModelBuilder()
    m.matmul(m.tensor([4, 8], "INT32"), m.tensor([8, 4], "INT32"))
    doc = plans.plan_doc(plans.model_doc(m.finish()))
    with pytest.raises(PlancError, match="Matmul 'matmul': INT32 matmuls have no kernel") as info:
        emit(doc, "cpu")
    assert info.value.path == "$.TaskInfos[0].Ops[0]"


def test_task_indices_without_processors_are_refused():
    doc = small_plan_doc()
    doc["ProcessorGroups"][1]["ProcessorRange"] = [1, 1]
    doc["ProcessorGroups"][1]["ResourceGroups"][0]["ProcessorRange"] = [1, 1]
    with pytest.raises(PlancError, match=r"task group of task 1 has task indices \[0, 8\] but "
                                         r"its resource group has no processors") as info:
        emit(doc, "cuda")
    assert info.value.path == "$.ProcessorGroups[1].ResourceGroups[0].TaskGroups[0]"


def test_unknown_operator_types_are_refused():
    doc = small_plan_doc()
    doc["TaskInfos"][1]["Ops"][0]["Type"] = "Softplus"
    with pytest.raises(PlancError, match="operator type 'Softplus' has no kernel in --target cpu"):
        emit(doc, "cpu")


def test_a_slice_of_an_input_is_read_from_the_input_itself():
    m = ModelBuilder()
    x = m.tensor([4, 8], "FP32")
    m.add(m.exp(m.slice(x, [1, 0], [3, 8])), m.exp(m.slice(x, [0, 0], [3, 8])))
    m.sqrt(x)
    m.sqrt(m.slice(m.tensor([6, 8], "FP32"), [2, 0], [4, 8]))
    manifest = json.loads(emit(plans.plan_doc(plans.model_doc(m.finish())), "cpu")[
        "tensors.json"])
    assert [(t["id"], t["shape"]) for t in manifest["inputs"]] == [(0, [4, 8]), (12, [4, 8])]


# -- the body follows the plan ----------------------------------------------------------------


def body_events(text: str) -> list[str]:
    """The body's barriers ("sync [b, e]") and task groups ("task N") in order."""
    body = text[text.index("void body("):]
    events = []
    for line in body.splitlines():
        if sync := re.search(r"in_range\((?:proc|blockIdx\.x), (\d+), (\d+), (\d+)\)", line):
            begin, end, step = sync.groups()
            events.append(f"sync {plan.Range(int(begin), int(end), int(step))}")
        elif task := re.search(r"task_seq<.*\bTask(\d+)\b", line):
            events.append(f"task {task.group(1)}")
    return events


def plan_events(p: plan.PlanOp) -> list[str]:
    events = []
    for group, syncs in zip(p.processor_groups(), plan.barriers(p.processor_groups()),
                            strict=True):
        events += [f"sync {r}" for r in syncs]
        events += [f"task {tg.task}" for rg in group.resource_groups()
                   for tg in rg.task_groups() if len(tg.tasks)]
    return events


@pytest.mark.parametrize("name", ["concurrent_chain", "task_groups_chain", "fused_softmax"])
@pytest.mark.parametrize("target", TARGETS)
def test_body_runs_groups_in_order_with_the_plans_barriers_only(name, target):
    doc = CASES[name].plan(CASES[name].model())
    text = emit(doc, target)["plan.cpp" if target == "cpu" else "kernel.cu"]
    assert body_events(text) == plan_events(single_plan(plans.import_plan_doc(doc)))


def test_disjoint_processor_groups_run_concurrently():
    events = body_events(emit(concurrent_chain(), "cpu")["plan.cpp"])
    # The branch (tasks 4, 5 on [2, 4)) starts right after task 0 on [0, 2), no barrier
    # between; the first barrier only waits for task 0's processors.
    assert events[:4] == ["task 0", "task 4", "sync [0, 2]", "task 1"]


def test_split_k_halves_are_not_separated_by_a_barrier():
    path = next((p.values[0] for p in PLAN_FILES if p.values[0] is not None
                 and p.values[0].name == "tutorial_plan_2_split_k.json"), None)
    if path is None:
        pytest.skip("upstream corpus not found")
    events = body_events(cpu.emit(import_document(load_json_file(path)),
                                  Namespace())["plan.cpp"])
    assert events[events.index("task 5") + 1] == "task 6"


# -- CUDA specifics ----------------------------------------------------------------------------


def slot_plan(slot_warps: list[tuple[list[int], int]], warps: int = 32) -> plan.PlanOp:
    """A plan whose processor groups each run one task over a WarpRange with slots of the given
    number of warps."""
    m = ModelBuilder()
    x = m.tensor([64, 64], "FP32")
    for _ in slot_warps:
        x = m.exp(x)
    doc = plans.plan_doc(plans.model_doc(m.finish()), warps=warps)
    for (warp_range, per_slot), info, pg in zip(slot_warps, doc["TaskInfos"],
                                                doc["ProcessorGroups"], strict=True):
        info["NumWarps"] = info["Ops"][0]["Config"]["NumWarps"] = per_slot
        pg["ResourceGroups"][0]["WarpRange"] = warp_range
    return single_plan(plans.import_plan_doc(doc))


def test_disjoint_slot_warps_get_different_named_barriers():
    p = slot_plan([([0, 8], 4), ([0, 8], 2), ([8, 32, 2], 3), ([1, 32, 2], 3)])
    ids = cuda.named_barriers(p)
    assert set(ids) == set(cuda.slot_warp_sets(p))
    for a, id_a in ids.items():
        assert 1 <= id_a <= 15
        for b, id_b in ids.items():
            if a != b and a.isdisjoint(b):
                assert id_a != id_b, (sorted(a), sorted(b))


def test_slots_beyond_fifteen_named_barriers_use_shared_memory():
    p = slot_plan([([0, 32], 2)])
    ids = sorted(cuda.named_barriers(p).values())
    assert ids == [-1, *range(1, 16)]
    kernel = cuda.CudaPrinter(p).kernel()
    emitted = re.search(r"Task0, ([-\d, ]+)>\(arena, smem\);", kernel).group(1)
    assert sorted(int(v) for v in emitted.split(", ")) == ids


def test_too_many_warps_per_processor_for_cuda():
    doc = small_plan_doc()
    doc["NumWarpsPerProcessor"] = 33
    # A plan naming CUDA_80 is refused by the plan verifier (its architecture's limits); the
    # emitter's own check covers plans whose Architecture names no known device.
    with pytest.raises(PlancError, match="NumWarpsPerProcessor 33 exceeds the 32 warps one "
                                         "processor of CUDA_80 can hold"):
        emit(doc, "cuda")
    del doc["Architecture"]
    with pytest.raises(PlancError, match="NumWarpsPerProcessor 33 needs 1056 threads per block; "
                                         "CUDA allows 1024"):
        emit(doc, "cuda")


@pytest.mark.parametrize(("architecture", "flag", "sm"), [
    ("CUDA_80", None, "80"), ("CUDA_90", None, "90"), ("ROCM_942", None, "80"),
    ("CUDA_80", "sm_90", "90"), ("CUDA_80", "86", "86")])
def test_cuda_architecture_of_the_build_files(architecture, flag, sm):
    doc = small_plan_doc()
    doc["Architecture"] = architecture
    files = emit(doc, "cuda", cuda_arch=flag)
    assert f"nvcc -std=c++17 -O3 -arch=sm_{sm} host.cu kernel.cu -o plan" in files["README.md"]
    assert f"set(CMAKE_CUDA_ARCHITECTURES {sm})" in files["CMakeLists.txt"]


def test_bad_cuda_architecture_flag(planc, tmp_path):
    source = write_json(tmp_path / "plan.json", small_plan_doc())
    result = planc(source, "--target", "cuda", "--cuda-arch", "volta", "-o", tmp_path / "out")
    assert result.code == 1
    assert result.err == "planc: error: --cuda-arch: expected an architecture like sm_80 or 90, " \
                         "got 'volta'\n"


def test_shared_memory_covers_every_sram_range():
    doc = plans.set_resources(plans.plan_doc(chain_model()), 0, sram=[4096, 4096 + 3072])
    printer = cuda.CudaPrinter(single_plan(plans.import_plan_doc(doc)))
    assert printer.shared_bytes == cuda.RESERVED_SMEM + 4096 + 3072
    assert f"constexpr int kSharedBytes = {printer.shared_bytes};" in printer.kernel()


def test_every_kernel_call_is_shared_text_between_targets():
    doc = plans.plan_doc(fp16_model())
    cpu_tasks = emit(doc, "cpu")["plan.cpp"]
    cuda_tasks = emit(doc, "cuda")["kernel.cu"]

    def tasks(text: str) -> str:
        return text[text.index("// TaskInfo 0"):text.index("void body(") if "void body(" in text
                    else None].rsplit("\n\n", 2)[0]

    assert tasks(cpu_tasks) == tasks(cuda_tasks)
