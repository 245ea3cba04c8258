"""`-t cpu` programs take as inputs every byte they read that the model does not write first
("read before written", decided on byte regions), however the plan links the read to its
producers.

An ARK plan file links a tensor read after an operator wrote part of its buffer as a view of
that operator's result (`frontends.ark_plan`): a KV cache whose one row an operator updated
is read as a view of the update. The program used to take its inputs from plain tensors only,
so the cache's other rows were nobody's input (384 of 512 output elements from an
uninitialised arena). The models are built with `frontends.model_builder`, written to a
model file, planned to a plan file and read back, as a user does with `planc m.json -t ark`
and then `planc plan.json -t cpu`."""

from __future__ import annotations

import pytest

from backends.ark_model import emit_model
from backends.ark_plan import single_plan
from compiler import api
from frontends.model_builder import ModelBuilder
from targets.ark.byte_regions import ByteRegion, byte_set
from targets.ark.model_interpreter import run_model
from tests.codegen import programs
from tests.sched.test_cpu_programs import needs_compiler, program_inputs


def kv_update() -> ModelBuilder:
    """One new row of a [4, 128] FP32 cache, then the whole cache is read."""
    m = ModelBuilder()
    cache = m.tensor([4, 128], "FP32")
    x, w = m.tensor([1, 16], "FP32"), m.tensor([128, 16], "FP32")
    m.matmul(x, w, transpose_other=True, output=m.slice(cache, [1, 0], [1, 128]))
    m.scalar_mul(cache, 2.0)
    return m


def kv_append_3d() -> ModelBuilder:
    """A [1, 6, 32] FP16 cache appended at position 4, read whole as [6, 32]."""
    m = ModelBuilder()
    cache = m.tensor([1, 6, 32], "FP16")
    k, b = m.tensor([1, 1, 32], "FP16"), m.tensor([1, 1, 32], "FP16")
    m.add(k, b, output=m.slice(cache, [0, 4, 0], [1, 1, 32]))
    m.sigmoid(m.reshape(cache, [6, 32]))
    return m


def in_place_chain() -> ModelBuilder:
    """Updates of one [4, 8] buffer through three views: the top half scaled in place, then
    the whole buffer as [8, 4] shifted in place, then read as [4, 8]."""
    m = ModelBuilder()
    a = m.tensor([4, 8], "FP32")
    top = m.slice(a, [0, 0], [2, 8])
    m.scalar_mul(top, 3.0, output=top)
    flat = m.reshape(a, [8, 4])
    m.scalar_add(flat, 1.0, output=flat)
    m.add(a, m.tensor([4, 8], "FP32"))
    return m


MODELS = {"kv_update": kv_update, "kv_append_3d": kv_append_3d,
          "in_place_chain": in_place_chain}


def _plan_from_files(build, tmp_path):
    """The model as a model file, planned for an A100 into a plan file, read back."""
    model = tmp_path / "model.json"
    model.write_text(emit_model(build().finish()))
    plan = tmp_path / "plan.json"
    api.compile(model, "ark", arch="a100", output=plan)
    return api.load(plan)


def _brute_force_unwritten(p) -> set[tuple[int, int]]:
    """(buffer, byte) of every byte an operator reads before any operator wrote it, with
    each byte enumerated (the models here are small): the oracle for `input_files`."""
    written: set[tuple[int, int]] = set()
    needed: set[tuple[int, int]] = set()
    scheduled = {op for ops in p.task_operators().values() for op in ops}
    for op in (o for o in p.graph.ops if o in scheduled):
        reads, writes = op.operand_groups()
        for value in reads:
            region = ByteRegion.of(value.type)
            needed |= {(region.buffer, b) for b in byte_set(region)} - written
        for value in writes:
            region = ByteRegion.of(value.type)
            written |= {(region.buffer, b) for b in byte_set(region)}
    return needed


@pytest.mark.parametrize("name", sorted(MODELS))
def test_inputs_hold_every_byte_read_before_it_is_written(name, tmp_path):
    from backends.cpu import CpuPrinter

    p = single_plan(_plan_from_files(MODELS[name], tmp_path))
    given = set()
    for f in CpuPrinter(p).input_files():
        region = ByteRegion.of(f.tensor)
        given |= {(region.buffer, b) for b in byte_set(region)}
    missing = _brute_force_unwritten(p) - given
    assert not missing, f"{len(missing)} bytes are read before written and nobody's input"


@needs_compiler
@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[] if n == "kv_update" else [pytest.mark.slow]) for n in sorted(MODELS)])
def test_programs_of_plan_files_compute_the_model(name, tmp_path):
    """Built with g++ and run, the program's outputs equal the numpy interpreter's."""
    run = run_model(MODELS[name]().finish(), seed=5)
    module = _plan_from_files(MODELS[name], tmp_path)
    directory = programs.emit(module, "cpu", tmp_path / "program")
    program = programs.build_cpu(directory)
    listing = programs.manifest(directory)
    programs.write_inputs(tmp_path / "in", listing["inputs"],
                          program_inputs(listing, run, single_plan(module)))
    programs.run_checked([program, tmp_path / "in", tmp_path / "out"])
    outputs = programs.read_outputs(tmp_path / "out", listing["outputs"])
    # The plan file links the update's result to the later read, so it is no output of the
    # plan (the model run lists it): compare what the program writes, the last result among it.
    last = max(run.outputs)
    assert last in outputs and set(outputs) <= set(run.outputs), (sorted(outputs), run.outputs)
    programs.compare(outputs, ModelRunView(run, outputs))


class ModelRunView:
    """`run` with only the outputs in `outputs`, for `programs.compare`."""

    def __init__(self, run, outputs):
        self.tensors, self.types = run.tensors, run.types
        self.outputs = sorted(outputs)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_plan_simulator_gives_the_inputs_before_any_update(name, planc, tmp_path):
    """The model run's inputs are the buffers before any operator: the in-place chain reads
    its buffer whole after updating two of its parts in place, and the input for that read
    used to hold the updated parts, so the simulator (which stores every input before the
    first task) applied the updates twice (a max error of 6 on this plan)."""
    model = tmp_path / "model.json"
    model.write_text(emit_model(MODELS[name]().finish()))
    plan = tmp_path / "plan.json"
    assert planc(model, "-t", "ark", "--arch", "a100", "-o", plan).code == 0
    result = planc("simulate", plan, "--json")
    assert result.code == 0 and result.json()["max_abs_error"] == 0, result.out


def test_overlapping_inputs_agree_where_they_overlap():
    """Inputs are read from the buffers' first state: the chain's [8, 4] view is first read
    after the top half was scaled in place, and its input holds the top half as it was
    before, the same values as the top half's own input (before: the scaled ones)."""
    run = run_model(in_place_chain().finish(), seed=3)
    shapes = {tuple(run.types[t].shape_list): t for t in run.inputs}
    top, flat = run.inputs[shapes[(2, 8)]], run.inputs[shapes[(8, 4)]]
    assert (flat.reshape(-1)[:16] == top.reshape(-1)).all()
    assert not (run.tensors[shapes[(8, 4)]].reshape(-1)[:16] == top.reshape(-1)).all()
