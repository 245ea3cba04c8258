"""Models and plans the code generator is tested on.

Each case is a model (the reference the emitted program is checked against) and a plan of it.
Together they cover every operator type planc emits kernels for, the three float types and an
integer type, strided views, in-place writes, and the plan shapes ARK's hand-tuned plans use.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from frontends.model_builder import ModelBuilder
from tests.ark.fixtures import small_model_doc
from tests.codegen import plans
from tests.plan.fixtures import small_plan_doc


def fp32_model() -> dict:
    """Every element-wise, reduction, layout and matmul form, FP32 (plus INT32 and FP16)."""
    m = ModelBuilder()
    x = m.tensor([2, 3, 10, 12], "FP32")
    w = m.tensor([12, 20], "FP32")
    y = m.matmul(x, w)                                       # other's batch broadcasts
    v = m.tensor([3, 12, 20], "FP32")
    z = m.matmul(y, v, transpose_other=True)                 # [2, 3, 10, 12]
    u = m.tensor([2, 1, 12, 10], "FP32")
    w2 = m.tensor([20, 12], "FP32")
    m.matmul(u, w2, transpose_input=True, transpose_other=True)   # both transposed
    h = m.add(z, m.tensor([12], "FP32"))                     # broadcast bias
    gate = m.div(m.gelu(h), m.exp(m.scalar_mul(h, 0.5)))
    positive = m.scalar_add(m.mul(h, h), 1.0)
    t = m.sub(m.add(gate, m.relu(h)), m.mul(m.sigmoid(h), m.sqrt(positive)))
    m.copy(m.rsqrt(positive))
    m.transpose(t, [0, 2, 1, 3])
    m.reduce_sum(t, -1)                                      # last axis, warp-wise
    m.reduce_max(t, 2, keep_dim=False)                       # inner axis, dropped
    m.reduce_mean(t, 1)
    m.cast(t, "FP16")
    m.cast(m.tensor([3, 5], "FP16"), "FP32")
    as_int = m.cast(m.scalar_mul(m.tensor([2, 3, 10, 12], "FP32"), 4.0), "INT32")  # truncates
    m.cast(m.div(m.add(as_int, as_int), m.scalar_assign([2, 3, 10, 12], 3.0, "INT32")),
           "FP32")
    m.exp(m.slice(h, [0, 1, 2, 4], [2, 2, 7, 8]))              # strided read
    big = m.tensor([6, 16], "FP32")
    m.copy(m.scalar_assign([2, 8], 2.5, "FP32"), output=m.slice(big, [1, 4], [2, 8]))
    scratch = m.sigmoid(m.tensor([4, 6], "FP32"))
    m.scalar_add(scratch, 1.0, output=scratch)                # in place
    m.rope(m.tensor([1, 6, 2, 8], "FP32"), m.tensor([1, 6, 1, 8], "FP32"))
    m.embedding(m.tensor([2, 5], "INT32"), m.tensor([16, 12], "FP32"))
    return plans.model_doc(m.finish())


def fp16_model() -> dict:
    """Attention-like FP16 block: projections, softmax, layer norm, head transpose."""
    m = ModelBuilder()
    x = m.tensor([1, 8, 32], "FP16")
    q = m.matmul(x, m.tensor([32, 32], "FP16"), transpose_other=True)
    scores = m.scalar_mul(m.matmul(q, x, transpose_other=True), 32 ** -0.5)
    context = m.matmul(m.softmax(scores), x)
    normed = m.gelu(m.layer_norm(context))
    heads = m.transpose(m.reshape(normed, [1, 8, 4, 8]), [0, 2, 1, 3])
    m.cast(heads, "FP32")
    return plans.model_doc(m.finish())


def bf16_model() -> dict:
    """BF16: matmul, RMSNorm, rope, embedding lookup."""
    m = ModelBuilder()
    x = m.tensor([4, 16], "BF16")
    h = m.matmul(x, m.tensor([24, 16], "BF16"), transpose_other=True)
    normed = m.relu(m.rms_norm(h, m.tensor([1, 24], "BF16")))
    m.rope(m.reshape(normed, [4, 2, 12]), m.tensor([1, 2, 12], "BF16"))
    rows = m.embedding(m.tensor([3], "INT32"), m.tensor([10, 24], "BF16"))
    m.add(rows, m.reduce_mean(h, 0))
    return plans.model_doc(m.finish())


def chain_model() -> dict:
    """matmul -> sigmoid -> mul -> scalar_mul, an independent branch, then add and reduce."""
    m = ModelBuilder()
    h = m.matmul(m.tensor([8, 24], "FP32"), m.tensor([24, 24], "FP32"))       # task 0
    c = m.scalar_mul(m.mul(h, m.sigmoid(h)), 2.0)                              # tasks 1-3
    d = m.exp(m.scalar_mul(m.tensor([8, 24], "FP32"), 0.1))                    # tasks 4-5
    m.reduce_sum(m.add(c, d), -1)                                              # tasks 6-7
    return plans.model_doc(m.finish())


def fused_chain() -> dict:
    """Fused tasks: sigmoid+mul+scalar_mul in one TaskInfo, the branch in another; the matmul
    has SRAM for only part of its K tile."""
    doc = plans.set_task_sram(plans.plan_doc(chain_model()), 0, 1024)
    return plans.fuse(plans.fuse(doc, [1, 2, 3]), [4, 5])


def renumbered_chain() -> dict:
    """Non-contiguous TaskInfo ids in no particular order; the matmul has no SRAM at all."""
    return plans.renumber(plans.set_task_sram(plans.plan_doc(chain_model()), 0, 0),
                          {0: 40, 1: 3, 2: 17, 3: 5, 4: 11, 5: 2, 6: 8, 7: 30})


def task_groups_chain() -> dict:
    """Several task groups per resource group, with range steps, starts and granularity, on a
    processor range with a step, a WarpRange and an SramRange that do not start at 0."""
    doc = plans.plan_doc(chain_model())
    count = plans.num_tasks(doc, 1)
    doc = plans.split_task_group(doc, 1, [
        {"TaskRange": [0, count, 2], "Granularity": 1},
        {"TaskRange": [1, count, 2], "Granularity": 2}])
    count = plans.num_tasks(doc, 6)
    doc = plans.split_task_group(doc, 6, [
        {"TaskRange": [0, 5], "Granularity": 3},
        {"TaskRange": [5, count, 2], "Granularity": 1},
        {"TaskRange": [6, count, 2], "Granularity": 2}])
    doc = plans.set_resources(doc, 2, processors=[0, 4, 2], warps=[1, 4])
    doc = plans.set_resources(doc, 3, processors=[1, 4], warps=[0, 4, 2])
    sram = doc["TaskInfos"][0]["SramBytes"]
    return plans.set_resources(doc, 0, sram=[512, 512 + sram])


def concurrent_chain() -> dict:
    """The independent branch runs on processors [2, 4) while the chain runs on [0, 2), as
    consecutive processor groups with no barrier between them; one more group holds two
    resource groups side by side."""
    doc = plans.plan_doc(chain_model())
    for task in (0, 1, 2, 3):
        doc = plans.set_resources(doc, task, processors=[0, 2])
    for task in (4, 5):
        doc = plans.set_resources(doc, task, processors=[2, 4])
    order = [0, 4, 1, 2, 5, 3, 6, 7]
    doc["ProcessorGroups"] = [plans.group_of(doc, t) for t in order]
    return plans.merge_groups(doc, [2, 5])


def fused_softmax() -> dict:
    """The FP16 model with its softmax fused into one task per row (ARK's Llama plan does)."""
    doc = plans.plan_doc(fp16_model(), tiles={"sub": [1, 8], "exp": [1, 8], "div": [1, 8]})
    names = [info["Ops"][0]["Name"] for info in doc["TaskInfos"]]
    fused = [doc["TaskInfos"][names.index(n)]["Id"]
             for n in ("reduce_max", "sub", "exp", "reduce_sum", "div")]
    return plans.fuse(doc, fused)


@dataclass(frozen=True)
class Case:
    model: Callable[[], dict]
    plan: Callable[[dict], dict]
    """Plan of the model's document."""


CASES: dict[str, Case] = {
    "small_plan": Case(small_model_doc, lambda _: small_plan_doc()),
    "fp32_ops": Case(fp32_model, lambda doc: plans.plan_doc(doc, processors=3)),
    "fp16_attention": Case(fp16_model, plans.plan_doc),
    "bf16_ops": Case(bf16_model, lambda doc: plans.plan_doc(doc, processors=2, warps=8)),
    "fused_chain": Case(chain_model, lambda _: fused_chain()),
    "renumbered_chain": Case(chain_model, lambda _: renumbered_chain()),
    "task_groups_chain": Case(chain_model, lambda _: task_groups_chain()),
    "concurrent_chain": Case(chain_model, lambda _: concurrent_chain()),
    "fused_softmax": Case(fp16_model, lambda _: fused_softmax()),
}
