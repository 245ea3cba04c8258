"""gemini-dram-order hands its landed, numbered and allocated L2 tensors to gemini-allocate-l2
(`targets.gemini.l2.hand_over` / `take_over`) instead of the latter planning them again. The
handed tensors must equal a fresh `plan_tensors` + numbering + first fit on the IR dram-order
left, on real and generated schedules; any change to the IR (or other hardware options) must
make allocate-l2 plan afresh, and both ways must give the same IR."""

from __future__ import annotations

import argparse
import functools
import json
import random

import pytest
from xdsl.dialects.builtin import StringAttr
from xdsl.passes import PassPipeline

from backends.gemini import schedule_pipeline
from backends.mlir import print_module
from compiler.context import planc_context
from dialects import dnn
from frontends.gemini_layers import import_document as import_layers
from ground.json_reader import load_json_file, parse_json
from passes import get_all_passes
from passes.gemini_allocate_l2 import _number
from targets.gemini import model
from targets.gemini.l2 import allocate, plan_tensors, take_over
from targets.gemini.plan import ISSUE, get_int, layer_table, schedule_of, set_int
from tests.conftest import corpus_root
from tests.gemini.test_l2_quality import generated_network


def _through_dram_order(module, **options):
    """Run the scheduling pipeline on `module` up to and including gemini-dram-order; return
    the gemini-allocate-l2 pass that would follow."""
    spec = schedule_pipeline(argparse.Namespace(**options))
    passes = PassPipeline.parse_spec(get_all_passes(), spec).passes
    index = next(i for i, p in enumerate(passes) if p.name == "gemini-allocate-l2")
    PassPipeline(tuple(passes[:index])).apply(planc_context(), module)
    return passes[index]


def _fresh(module, hw):
    """What gemini-allocate-l2 plans on `module` without a handover."""
    schedule = schedule_of(module, "test")
    tensors = plan_tensors(schedule, layer_table(dnn.find_graph(module)), hw)
    cores = {core.id: core for core in schedule.cores}
    _number(tensors, cores)
    for core_id, found in tensors.items():
        allocate(cores[core_id], found, schedule.value("buffersize"))
    return tensors


def _corpus_module():
    path = corpus_root() / "gemini" / "int8_resnet34.sim_quantized_b1.json"
    if not path.exists():
        pytest.skip(f"upstream corpus not found at {path.parent} (set PLANC_CORPUS to its path)")
    return import_layers(load_json_file(path))


def _generated_module(seed: int):
    rng = random.Random(seed)
    module = import_layers(parse_json(json.dumps(generated_network(rng))))
    buffer = rng.choice([16384, 65536, 8 * 1024 * 1024])
    options = {"batch": rng.choice([None, 2, 4]), "buffer_size": buffer,
               "l2_budget": rng.choice([None, buffer // 3]),
               "mesh": rng.choice(["1x1", "2x1", "2x2"])}
    return module, options


def _cases():
    yield from (pytest.param("corpus", {"mesh": mesh}, id=f"resnet34-{mesh}")
                for mesh in ("1x1", "2x2", "4x4"))
    yield from (pytest.param("generated", seed, id=f"generated-{seed}") for seed in range(8))


def _module(source, arg):
    if source == "corpus":
        return _corpus_module(), arg
    return _generated_module(arg)


@pytest.mark.parametrize(("source", "arg"), list(_cases()))
def test_handed_tensors_equal_a_fresh_plan(source, arg):
    module, options = _module(source, arg)
    allocate_l2 = _through_dram_order(module, **options)
    handed = take_over(module, allocate_l2.hw)
    assert handed is not None
    fresh = _fresh(module, allocate_l2.hw)
    assert handed == fresh
    assert all(t.address >= 0 and t.tensor_id >= 0 for found in handed.values() for t in found)
    assert take_over(module, allocate_l2.hw) is None   # taken once
    for tensor in (t for found in fresh.values() for t in found if t.pieces):
        # a tensor's box is the union of its pieces (`plan_tensors` takes it a coordinate at
        # a time; `model.union` is the reference)
        assert tensor.box == functools.reduce(model.union, [p[2] for p in tensor.pieces])


@pytest.mark.parametrize(("source", "arg"), [("corpus", {"mesh": "2x2"}), ("generated", 3)])
def test_allocate_l2_gives_the_same_ir_with_and_without_the_handover(source, arg):
    module, options = _module(source, arg)
    allocate_l2 = _through_dram_order(module, **options)
    copy = module.clone()     # other ops: the handover does not apply to it
    allocate_l2.apply(planc_context(), module)
    allocate_l2.apply(planc_context(), copy)
    assert print_module(module) == print_module(copy)


def _change_an_issue(module):
    load = schedule_of(module, "test").dram.loads[0]
    set_int(load, ISSUE, get_int(load, ISSUE) + 1)


def _move_a_workload(module):
    core = schedule_of(module, "test").cores[0]
    first = core.workloads[0]
    first.detach()
    core.body.block.add_op(first)


def _mark_a_layer(module):
    layer = next(iter(dnn.find_graph(module).layers))
    layer.attributes["planc.test"] = StringAttr("changed")


def _mark_an_ofmap(module):
    ofmap = schedule_of(module, "test").cores[0].workloads[0].ofmaps[0]
    ofmap.attributes["planc.test"] = StringAttr("changed")


@pytest.mark.parametrize("change", [_change_an_issue, _move_a_workload, _mark_a_layer,
                                    _mark_an_ofmap])
def test_a_changed_ir_is_planned_afresh(change):
    module, options = _generated_module(1)
    allocate_l2 = _through_dram_order(module, **options)
    change(module)
    assert take_over(module, allocate_l2.hw) is None


def test_other_hardware_is_planned_afresh():
    module, options = _generated_module(2)
    allocate_l2 = _through_dram_order(module, **options)
    other = type(allocate_l2)(buffer_size=allocate_l2.buffer_size, dram_bw=allocate_l2.dram_bw,
                              l2_budget=allocate_l2.l2_budget + 1024)
    assert take_over(module, other.hw) is None


@pytest.mark.parametrize("seed", range(6))
def test_the_live_sweep_lists_what_testing_every_tensor_lists(seed):
    """gemini-allocate-l2 lists each position's tensors by one sweep (`live_at_each`) rather
    than testing every tensor of the core at every position (quadratic in a core's
    workloads); both must give the same tensors in the same order, including tensors listed
    nowhere (last before first) and ones that start at the first or end at the last position."""
    from passes.gemini_allocate_l2 import live_at_each
    from targets.gemini.l2 import L2Tensor

    rng = random.Random(seed)
    positions = rng.randrange(1, 40)
    tensors = []
    for _ in range(rng.randrange(0, 60)):
        first = rng.randrange(-2, positions + 2)
        last = first + rng.randrange(-2, positions)
        tensors.append(L2Tensor(0, "ifmap", 8, ([], []), 8, 8, 0, set(), first=first,
                                last=last))
    swept = list(live_at_each(tensors, positions))
    assert len(swept) == positions
    for position, live in enumerate(swept):
        expected = [t for t in tensors if t.first <= position <= t.last]
        assert [id(t) for t in live] == [id(t) for t in expected], position
