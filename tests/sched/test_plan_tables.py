"""`ark-plan` shares what it knows of a schedule between its passes (`passes.sched_tables`) and
lowers phases kept as plain data; run pass by pass, every pass computes everything afresh from
the IR. Both must give the same plan, byte for byte, on hand-written, example, generated and
aliasing models; and the plan ops `sched-to-plan` builds generically equal what their
constructors build."""

from __future__ import annotations

import pytest
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region

from backends.ark_plan import PLANC_PASSES, emit_plan
from compiler.pipeline import run_pipeline
from dialects import ark, plan, sched
from dialects.locations import verify_module
from dialects.utils import bare_op
from frontends.model_zoo import generated
from passes.sched_fuse import kernel_op
from passes.sched_tables import Launch
from passes.sched_to_plan import (
    processor_group_op,
    resource_group_op,
    resource_groups,
    task_group_op,
    task_op,
)
from tests.sched.aliasing_models import random_model
from tests.sched.models import MODELS
from tests.sched.test_pipeline import EXAMPLE_MODELS, example

BUILDS = {**{name: MODELS[name] for name in sorted(MODELS)},
          **{name: example(name) for name in EXAMPLE_MODELS},
          "generated_300": lambda: generated(300),
          **{f"aliasing_{seed}": (lambda seed=seed: random_model(seed)) for seed in range(6)}}


def plan_text(build, pipeline: str) -> str:
    module: ModuleOp = build()
    run_pipeline(module, pipeline)
    verify_module(module)
    return emit_plan(module)


@pytest.mark.parametrize("arch", ["a100", "mi300x"])
@pytest.mark.parametrize("name", sorted(BUILDS))
def test_ark_plan_equals_the_passes_one_by_one(name, arch):
    build = BUILDS[name]
    whole = plan_text(build, f"ark-plan{{device={arch}}}")
    assert whole == plan_text(build, PLANC_PASSES.format(device=arch))


def test_the_split_k_model_is_among_them():
    """The comparison covers split-K (which rewrites operators between two uses of the
    tables) on at least one model."""
    assert any("_k1" in plan_text(BUILDS[name], "ark-plan{device=a100}")
               for name in ("llama_layer", "deep_matmul", "ffn.json") if name in BUILDS)


def test_generic_plan_ops_equal_the_constructed_ones():
    kernel = sched.KernelOp(7, "matmul")
    kernel.set_tiling(96, 4, 24576)
    r = plan.range_attr
    assert str(task_op(kernel)) == str(plan.TaskOp(7, 4, 24576))
    assert str(task_group_op(7, r(0, 96), 3)) == str(plan.TaskGroupOp(7, r(0, 96), 3))
    made = resource_group_op(r(0, 8), r(0, 4), r(0, 100), [task_group_op(1, r(0, 8), 1)])
    built = plan.ResourceGroupOp(r(0, 8), r(0, 4), r(0, 100),
                                 [plan.TaskGroupOp(1, r(0, 8), 1)])
    assert str(made) == str(built)
    made_pg = processor_group_op(r(0, 108), [made])
    built_pg = plan.ProcessorGroupOp(r(0, 108), [built])
    assert str(made_pg) == str(built_pg)
    assert made_pg.properties == built_pg.properties


def test_bare_ops_are_the_generic_ones():
    """`bare_op` gives what `create` gives: the same fields, properties and regions; a kernel
    built bare equals the constructed one."""
    r = plan.range_attr
    properties = {"task_id": sched.int_attr(3), "task_range": r(0, 8),
                  "granularity": sched.int_attr(1)}
    bare, generic = bare_op(plan.TaskGroupOp, properties), plan.TaskGroupOp.create(
        properties=properties)
    assert bare.__dict__ == generic.__dict__ and bare.properties is not properties
    made, built = kernel_op(5, "rows"), sched.KernelOp(5, "rows")
    assert str(made) == str(built) and made.properties == built.properties
    made.verify()
    block = Block([task_group_op(1, r(0, 8), 1)])
    group = bare_op(plan.ResourceGroupOp, {"processor_range": r(0, 8), "warp_range": r(0, 4),
                                           "sram_range": r(0, 0)}, [Region(block)])
    assert group.regions[0].parent is group and group.regions[0].block is block
    with pytest.raises(TypeError, match="not built bare"):
        bare_op(ark.AddOp, {})


def test_launches_sharing_processors_make_one_resource_group():
    R = plan.Range
    same = [Launch(k, R(0, 8), R(0, 108), R(0, 4), R(0, 0)) for k in (3, 4)]
    other = Launch(5, R(0, 8), R(0, 54), R(0, 4), R(0, 0))
    groups = resource_groups([*same, other, *same])
    assert [[tg.task for tg in g.task_groups()] for g in groups] == [[3, 4], [5], [3, 4]]
    assert [g.processors for g in groups] == [R(0, 108), R(0, 54), R(0, 108)]
