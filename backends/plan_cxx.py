"""C++ from ARK plans: what the `cpu` and `cuda` targets share.

`PlanPrinter` prints a `plan.plan` against the runtime headers of `backends/runtime/`. Printing
dispatches on op type, as xDSL's own printers do:

* a `plan.task` becomes a struct whose `run(slot, arena, task)` calls one tile kernel per
  operator of the TaskInfo, in order, with a slot barrier between them (the operators of a
  fused task hand tiles to each other through memory); each `ark` operator type prints its
  kernel call;
* the `plan.processor_group`s become the plan body, in order, each preceded by the barriers
  `plan.barriers` asks for (none between disjoint groups, which then run concurrently);
* each task group of a `plan.resource_group` becomes one `task_seq` call whose slot layout and
  first processor come from `plan.resource_group_schedule`, so the code distributes task
  indices exactly as the format's definition (and every simulator built on it) does.

The task structs are the same text for both targets; only the headers differ in how a slot
runs (one CPU thread, or a group of warps). Subclasses print the rest: threads and `main` for
the CPU, the kernel and its host program for CUDA. Memory is `plan.buffer_layout`: every tensor
is a byte offset into one arena plus element strides, so views, slices and in-place reuse need
no special handling.
"""

from __future__ import annotations

import io
import json
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from functools import singledispatchmethod
from importlib import resources

from xdsl.ir import Operation, SSAValue
from xdsl.utils.base_printer import BasePrinter

from dialects import ark, plan
from dialects.locations import source_path
from ground.diagnostics import PlancError, UnsupportedInput
from targets.ark.byte_regions import ByteRegion, covered_by_union
from targets.ark.cost_model import refuse_impossible_grid
from targets.ark.model_outputs import final_outputs

RUNTIME_DIR = "runtime"
RUNTIME_HEADERS = ("planc_types.h", "planc_kernels.h", "planc_host.h")

CTYPES: dict[str, str] = {
    "FP32": "float", "FP16": "planc::fp16", "BF16": "planc::bf16", "INT32": "int32_t",
    "UINT32": "uint32_t", "INT8": "int8_t", "UINT8": "uint8_t", "BYTE": "uint8_t",
}
"""The C++ element type of each ARK data type (fp16/bf16 are 16-bit patterns, see planc_types.h)."""

UNARY_FUNCTIONS: dict[type[ark.ArkOp], str] = {
    ark.ExpOp: "planc::Exp{}", ark.GeluOp: "planc::Gelu{}", ark.ReluOp: "planc::Relu{}",
    ark.RsqrtOp: "planc::Rsqrt{}", ark.SigmoidOp: "planc::Sigmoid{}",
    ark.SqrtOp: "planc::Sqrt{}", ark.CopyOp: "planc::Copy{}",
}
BINARY_FUNCTIONS: dict[type[ark.ArkOp], str] = {
    ark.AddOp: "planc::Add{}", ark.SubOp: "planc::Sub{}", ark.MulOp: "planc::Mul{}",
    ark.DivOp: "planc::Div{}",
}
REDUCTIONS: dict[type[ark.ArkOp], str] = {
    ark.ReduceSumOp: "planc::ReduceSum", ark.ReduceMaxOp: "planc::ReduceMax",
    ark.ReduceMeanOp: "planc::ReduceMean",
}


def plan_pipeline(target: str, source_format: str, options) -> str:
    """Plans are emitted as they are; models are first planned by the `ark` target's pipeline."""
    if source_format == "ark-plan":
        return ""
    if source_format == "ark-model":
        from backends import ark_plan

        return ark_plan.pipeline(source_format, options)
    raise UnsupportedInput(target, "a program" if target == "cpu" else "a CUDA program",
                      source_format)


def validate_program(module, source_format: str, options, before=None) -> list[str]:
    """Translation validation of a program planned from a model: the plan it runs against the
    input model (`ark_plan.prove`; the plan's runtime rules are `planc check`'s, under the
    distribution these programs run, `--ark-runtime planc`)."""
    from backends import ark_plan

    if source_format != "ark-model":
        return []
    return [f"against the input model: {p}" for p in ark_plan.prove(module, before)]


def runtime_files(*extra: str) -> dict[str, str]:
    """The runtime headers a program includes, by their path in the output directory."""
    folder = resources.files("backends.runtime")
    return {f"{RUNTIME_DIR}/{name}": folder.joinpath(name).read_text(encoding="utf-8")
            for name in (*RUNTIME_HEADERS, *extra)}


# ---------------------------------------------------------------------------------------------
# Tensors as the kernels see them
# ---------------------------------------------------------------------------------------------


def pad4(values: Sequence[int], fill: int) -> list[int]:
    return [fill] * (4 - len(values)) + list(values)


def dims(values: Sequence[int]) -> str:
    return f"planc::Dims4<{', '.join(str(v) for v in values)}>"


def element_strides(tensor: ark.TensorType) -> list[int]:
    """Elements between neighbours along each dim (ARK's Strides are the array's extents)."""
    extents = tensor.strides_list
    return [math.prod(extents[i + 1:]) for i in range(len(extents))]


def broadcast_strides(tensor: ark.TensorType, out_shape4: Sequence[int]) -> list[int]:
    """Element strides of `tensor` per dim of a 4-dim output it broadcasts onto (0 where it
    broadcasts, dims aligned on the right as in numpy)."""
    shape, strides = pad4(tensor.shape_list, 1), pad4(element_strides(tensor), 0)
    return [s if d == n else 0 for d, n, s in zip(shape, out_shape4, strides, strict=True)]


def float_literal(value: float) -> str:
    """A C++ float literal of the float32 nearest to `value` (ARK's FLOAT args are float32)."""
    single = float32(value)
    if math.isnan(single):
        return "NAN"
    if math.isinf(single):
        return "INFINITY" if single > 0 else "-INFINITY"
    return f"{single!r}f"


def float32(value: float) -> float:
    """`float(np.float32(value))` without importing numpy (the compile path does not): the C
    cast to float both do. Out of float32's range numpy gives an infinity and warns, so numpy
    does it then."""
    try:
        return struct.unpack("f", struct.pack("f", value))[0]
    except OverflowError:
        import numpy as np

        return float(np.float32(value))


def spans_buffer(tensor: ark.TensorType) -> bool:
    """Does the tensor cover its whole layout (no offsets, shape = strides)?"""
    return not any(tensor.offsets_list) and tensor.shape_list == tensor.strides_list


def root_view(value: SSAValue) -> Operation:
    """The op that defines the data of `value`, looking through aliasing views."""
    owner = value.owner
    while isinstance(owner, ark.ViewOp) and owner.source is not None:
        owner = owner.source.owner
    return owner


@dataclass(frozen=True)
class TensorFile:
    """A tensor the program reads from or writes to a file."""

    tensor: ark.TensorType
    offset: int

    def manifest(self) -> dict:
        t = self.tensor
        return {"id": t.tensor_id, "dtype": t.data_type, "shape": t.shape_list,
                "file": f"t{t.tensor_id}.bin"}

    def cxx(self) -> str:
        t = self.tensor
        shape = ", ".join(map(str, pad4(t.shape_list, 1)))
        strides = ", ".join(map(str, pad4(element_strides(t), 0)))
        return (f"{{{t.tensor_id}, \"{t.data_type}\", {t.element_bytes}, {{{shape}}}, "
                f"{{{strides}}}, {self.offset}}}")


# ---------------------------------------------------------------------------------------------
# The printer
# ---------------------------------------------------------------------------------------------


MAX_ARENA_BYTES = 1 << 40
"""The largest arena a generated program allocates (no GPU or host planc targets has more)."""


class PlanPrinter(BasePrinter):
    """Prints one plan as C++ for a target; see the module docstring."""

    target = "c++"

    def __init__(self, p: plan.PlanOp):
        plan.refuse_too_many_tasks(p, "a generated program")
        refuse_impossible_grid(p)      # `constexpr int kProcessors = 2^40` would not compile
        super().__init__(stream=io.StringIO())
        self.plan = p
        self.layout = plan.buffer_layout(p)
        if self.layout.total_bytes > MAX_ARENA_BYTES:
            raise PlancError(f"the plan's buffers need {self.layout.total_bytes / 1e9:.3g} GB, "
                             f"more than the {MAX_ARENA_BYTES / 1e9:.3g} GB a generated program "
                             "allocates")
        self.tasks = p.tasks()
        self.operators = p.task_operators()
        self.scheduled = sorted({tg.task for pg in p.processor_groups()
                                 for rg in pg.resource_groups() for tg in rg.task_groups()
                                 if len(tg.tasks)})
        self.barrier_sites: list[tuple[int, plan.Range]] = []
        """(processor group index, synchronised range) for every barrier of the body, known
        once the plan op is printed."""
        self._check_supported()

    # -- output helpers ----------------------------------------------------------------------

    def line(self, text: str = "") -> None:
        """One line at the current indentation."""
        indent = " " * (self._indent * self.indent_num_spaces) if text else ""
        self.print_string(f"{indent}{text}\n", indent=0)

    def take(self) -> str:
        """The text printed so far; the printer starts anew."""
        text = self.stream.getvalue()
        self.stream = io.StringIO()
        return text

    def block(self, opening: str, closing: str = "}"):
        printer = self

        class _Block:
            def __enter__(self):
                printer.line(opening)
                printer._indent += 1

            def __exit__(self, *exc):
                printer._indent -= 1
                printer.line(closing)

        return _Block()

    # -- what the plan needs -----------------------------------------------------------------

    def scheduled_operators(self) -> list[ark.ArkOp]:
        return [op for task in self.scheduled for op in self.operators.get(task, [])]

    def _check_supported(self) -> None:
        for op in self.scheduled_operators():
            if isinstance(op, ark.CommOp):
                raise PlancError(
                    f"{op.ark_type} '{op.label.data}': communication operators are not "
                    f"supported by --target {self.target} (it runs one rank's compute plan)",
                    path=source_path(op))
            for tensor in (*op.inputs, *op.outputs):
                if tensor.buffer_id not in self.layout.offsets:
                    raise PlancError(
                        f"{op.ark_type} '{op.label.data}': tensor {tensor.tensor_id} is on "
                        f"buffer {tensor.buffer_id} of rank {tensor.buffer.rank.data}, which "
                        "this rank cannot address", path=source_path(op))

    def offset(self, tensor: ark.TensorType) -> int:
        return self.layout.offsets[tensor.buffer_id] + tensor.byte_offset

    def pointer(self, tensor: ark.TensorType, *, const: bool = False) -> str:
        qualifier = "const " if const else ""
        return f"planc::at<{qualifier}{CTYPES[tensor.data_type]}>(arena, {self.offset(tensor)})"

    def model_order(self) -> list[ark.ArkOp]:
        """The scheduled operators in the order of the model (the plan's graph)."""
        scheduled = set(self.scheduled_operators())
        return [op for op in self.plan.graph.ops if op in scheduled]

    def input_files(self) -> list[TensorFile]:
        """The model's tensors whose data the program is given: every byte an operator reads
        that no earlier operator wrote (decided on byte regions, `covered_by_union`), however
        the read is linked to its producers. A read through views of a plain tensor gives
        that tensor's file (split-K halves of a weight: the weight itself); a read through a
        view of an operator's result gives the read tensor's own (an ARK plan reads a KV cache
        whose one row an operator updated as a view of that operator's result: the other
        rows are input all the same). A tensor written whole before it is read is not input.

        When one of them spans its whole buffer, the others on that buffer (slices of it)
        are read from it rather than from files of their own.
        """
        found: dict[int, ark.TensorType] = {}
        written: dict[int, list[ByteRegion]] = {}
        for op in self.model_order():
            reads, writes = op.operand_groups()
            for value in reads:
                region = ByteRegion.of(value.type)
                if covered_by_union(region, written.get(region.buffer, ())):
                    continue
                root = root_view(value)
                tensor = root.result.type if isinstance(root, ark.ViewOp) else value.type
                found.setdefault(tensor.tensor_id, tensor)
            for value in writes:
                region = ByteRegion.of(value.type)
                written.setdefault(region.buffer, []).append(region)
        whole: dict[int, int] = {}
        for t in found.values():
            if spans_buffer(t):
                whole.setdefault(t.buffer_id, t.tensor_id)
        return [TensorFile(t, self.offset(t)) for t in found.values()
                if whole.get(t.buffer_id, t.tensor_id) == t.tensor_id]

    def output_files(self) -> list[TensorFile]:
        """Results no operator uses and no later operator overwrites through another view
        (`targets.ark.model_outputs.final_outputs`): what the plan computes for its user."""
        return [TensorFile(value.type, self.offset(value.type))
                for value in final_outputs(self.model_order())]

    def manifest(self) -> str:
        doc = {"arena_bytes": self.layout.total_bytes,
               "inputs": [f.manifest() for f in self.input_files()],
               "outputs": [f.manifest() for f in self.output_files()]}
        return json.dumps(doc, indent=2) + "\n"

    def tensor_tables(self) -> None:
        for name, files in (("kInputs", self.input_files()), ("kOutputs", self.output_files())):
            with self.block(f"const std::vector<planc::TensorFile> {name} = {{", "};"):
                for f in files:
                    self.line(f"{f.cxx()},")

    def header_comment(self, what: str) -> None:
        p = self.plan
        self.line(f"// {what}, generated by planc from an ARK plan: rank {p.rank.value.data}, "
                  f"{p.processor_count} processors x {p.warps_per_processor} warps,")
        self.line(f"// {len(self.scheduled)} scheduled tasks, {len(p.processor_groups())} "
                  f"processor groups, a {self.layout.total_bytes}-byte arena.")

    # -- dispatch on op type -----------------------------------------------------------------

    @singledispatchmethod
    def print(self, op: Operation) -> None:
        raise PlancError(f"{op.name}: --target {self.target} cannot print this operation",
                         path=source_path(op))

    @print.register
    def _(self, op: plan.PlanOp) -> None:
        for task_id in self.scheduled:
            self.print(self.tasks[task_id])
        groups = op.processor_groups()
        syncs = plan.barriers(groups)
        self.barrier_sites = [(index, processors) for index, ranges in enumerate(syncs)
                              for processors in ranges]
        self.print_body_declarations()
        with self.block(self.body_signature()):
            site = 0
            for group, ranges in zip(groups, syncs, strict=True):
                for processors in ranges:
                    self.print_barrier(site, processors)
                    site += 1
                self.print(group)

    @print.register
    def _(self, op: plan.TaskOp) -> None:
        operators = self.operators.get(op.task_id, [])
        self.line(f"// TaskInfo {op.task_id}: {len(operators)} operator(s), {op.warps} warp(s), "
                  f"{op.sram} SRAM bytes.")
        with self.block(f"struct Task{op.task_id} {{", "};"):
            self.line("template <class Slot>")
            with self.block("static PLANC_DEV void run(const Slot& slot, char* arena, "
                            "long long task) {"):
                self.line("(void)slot; (void)arena; (void)task;")
                for index, operator in enumerate(operators):
                    if index > 0:
                        self.line("slot.sync();  // the next operator reads this one's tile")
                    self.line(f"// {describe_operator(operator)}")
                    self.print(operator)
        self.line()

    @print.register
    def _(self, op: plan.ProcessorGroupOp) -> None:
        self.line(f"// Processor group: processors {op.processors}.")
        for rg in op.resource_groups():
            self.print(rg)

    @print.register
    def _(self, op: plan.ResourceGroupOp) -> None:
        self.line(f"//   resource group: processors {op.processors}, warps {op.warps}, "
                  f"SRAM {op.sram}.")
        for schedule in plan.resource_group_schedule(op, self.tasks):
            tg = schedule.task_group
            if len(tg.tasks) == 0:
                self.line(f"//   (task group of task {tg.task} has no task indices)")
                continue
            if len(op.processors) == 0:
                raise PlancError(f"task group of task {tg.task} has task indices {tg.tasks} but "
                                 f"its resource group has no processors ({op.processors})",
                                 path=source_path(tg))
            self.print_task_group(op, schedule, first_processor(op, schedule))

    # Operators: one kernel call each.

    @print.register
    def _(self, op: ark.ArkOp) -> None:
        if op.is_virtual:
            self.line("// (virtual: nothing to compute)")
            return
        raise PlancError(f"{op.ark_type} '{op.label.data}': operator type '{op.ark_type}' has no "
                         f"kernel in --target {self.target}", path=source_path(op))

    @print.register
    def _(self, op: ark.NoopOp) -> None:
        self.line("// (nothing to compute)")

    @print.register
    def _(self, op: ark.UnaryOp) -> None:
        (x,) = op.inputs
        self.elementwise(op, unary_function(op), [(x, x)])

    @print.register
    def _(self, op: ark.ScalarAssignOp) -> None:
        self.elementwise(op, f"planc::Fill{{{float_literal(op.value.value.data)}}}", [])

    @print.register
    def _(self, op: ark.BinaryOp) -> None:
        a, b = op.inputs
        self.elementwise(op, BINARY_FUNCTIONS[type(op)], [(a, a), (b, b)])

    @print.register
    def _(self, op: ark.RopeOp) -> None:
        (a, b), (out,) = op.inputs, op.outputs
        if out.shape_list[-1] % 2:
            raise PlancError(f"Rope '{op.label.data}': the last dim ({out.shape_list[-1]}) must "
                             "hold pairs", path=source_path(op))
        shape = pad4(out.shape_list, 1)
        self.call(f"planc::rope<{self.tiling(op)}, {dims(pad4(element_strides(out), 0))}, "
                  f"{dims(broadcast_strides(a, shape))}, {dims(broadcast_strides(b, shape))}>",
                  [self.pointer(out), self.pointer(a, const=True), self.pointer(b, const=True)])

    @print.register
    def _(self, op: ark.TransposeOp) -> None:
        (x,), (out,) = op.inputs, op.outputs
        strides = element_strides(x)
        permuted = pad4([strides[p] for p in op.perm], 0)
        self.call(f"planc::transpose<{self.tiling(op)}, {dims(pad4(element_strides(out), 0))}, "
                  f"{dims(permuted)}>", [self.pointer(out), self.pointer(x, const=True)])

    @print.register
    def _(self, op: ark.ReduceOp) -> None:
        (x,), (out,) = op.inputs, op.outputs
        axis, strides = op.axis_index, element_strides(x)
        kept = list(range(len(x.shape_list))) if op.keeps_dim else \
            [d for d in range(len(x.shape_list)) if d != axis]
        by_output = pad4([0 if d == axis else strides[d] for d in kept], 0)
        warp_wise = "true" if op.config_value().get("ImplType") == "WarpWise" else "false"
        self.call(f"planc::reduce<{self.tiling(op)}, {dims(pad4(element_strides(out), 0))}, "
                  f"{dims(by_output)}, {x.shape_list[axis]}, {strides[axis]}, "
                  f"{REDUCTIONS[type(op)]}, {warp_wise}>",
                  [self.pointer(out), self.pointer(x, const=True)])

    @print.register
    def _(self, op: ark.EmbeddingOp) -> None:
        (indices, weight), (out,) = op.inputs, op.outputs
        row_stride, col_stride = element_strides(weight)
        self.call(f"planc::embedding<{self.tiling(op)}, {dims(pad4(element_strides(out), 0))}, "
                  f"{dims(pad4(element_strides(indices) + [0], 0))}, {weight.shape_list[0]}, "
                  f"{row_stride}, {col_stride}>",
                  [self.pointer(out), self.pointer(indices, const=True),
                   self.pointer(weight, const=True)])

    @print.register
    def _(self, op: ark.MatmulOp) -> None:
        (a, b), (c,) = op.inputs, op.outputs
        if c.data_type not in ark.FLOAT_DATA_TYPES:
            raise PlancError(f"Matmul '{op.label.data}': {c.data_type} matmuls have no kernel "
                             "(FP32, FP16 and BF16 do)", path=source_path(op))
        m, n, k = op.problem_mnk()
        tile_m, tile_n, tile_k = op.config_value()["TileShapeMNK"]
        out_shape = pad4(c.shape_list, 1)
        a_batch, (a_rows, a_cols) = matrix_strides(a, out_shape)
        b_batch, (b_rows, b_cols) = matrix_strides(b, out_shape)
        a_mk = (a_cols, a_rows) if op.trans_input else (a_rows, a_cols)
        b_kn = (b_cols, b_rows) if op.trans_other else (b_rows, b_cols)
        self.call(f"planc::matmul<{m}, {n}, {k}, {tile_m}, {tile_n}, {tile_k}, {dims(out_shape)}, "
                  f"{dims(pad4(element_strides(c), 0))}, {dims([*a_batch, *a_mk])}, "
                  f"{dims([*b_batch, *b_kn])}>",
                  [self.pointer(c), self.pointer(a, const=True), self.pointer(b, const=True)])

    # -- pieces of operator calls ------------------------------------------------------------

    def tiling(self, op: ark.ArkOp) -> str:
        """`Shape, Unit`: the output's 4 dims and the tile one task index computes."""
        return f"{dims(pad4(op.outputs[0].shape_list, 1))}, {dims(plan.unit_shape(op))}"

    def call(self, kernel: str, arguments: Sequence[str]) -> None:
        self.line(f"{kernel}(")
        with self.indented(2):
            self.line(f"slot, task, {', '.join(arguments)});")

    def elementwise(self, op: ark.ArkOp, function: str,
                    inputs: Sequence[tuple[ark.TensorType, ark.TensorType]]) -> None:
        out = op.outputs[0]
        shape = pad4(out.shape_list, 1)
        operands = [f"planc::In<{CTYPES[t.data_type]}, {dims(broadcast_strides(t, shape))}>"
                    f"{{{self.pointer(t, const=True)}}}" for t, _ in inputs]
        self.call(f"planc::elementwise<{self.tiling(op)}, {dims(pad4(element_strides(out), 0))}>",
                  [function, self.pointer(out), *operands])

    # -- what each target prints its own way --------------------------------------------------

    def body_signature(self) -> str:
        raise NotImplementedError

    def print_body_declarations(self) -> None:
        """Whatever the body's barriers need declared before it."""

    def print_barrier(self, site: int, processors: plan.Range) -> None:
        raise NotImplementedError

    def print_task_group(self, rg: plan.ResourceGroupOp, schedule: plan.TaskGroupSchedule,
                         first: int) -> None:
        raise NotImplementedError


def matrix_strides(tensor: ark.TensorType, out_shape4: Sequence[int]
                   ) -> tuple[list[int], tuple[int, int]]:
    """A matmul operand's element strides: per batch dim of the output (0 where it broadcasts)
    and along its own last two dims (a 1-dim operand is one row)."""
    strides, shape = element_strides(tensor), tensor.shape_list
    batch_shape, batch_strides = pad4(shape[:-2], 1)[2:], pad4(strides[:-2], 0)[2:]
    batch = [s if d == n else 0
             for d, n, s in zip(batch_shape, out_shape4[:2], batch_strides, strict=True)]
    rows, cols = ([0] + strides)[-2:]
    return batch, (rows, cols)


def unary_function(op: ark.ArkOp) -> str:
    if isinstance(op, (ark.ScalarAddOp, ark.ScalarMulOp)):
        name = "ScalarAdd" if isinstance(op, ark.ScalarAddOp) else "ScalarMul"
        return f"planc::{name}{{{float_literal(op.factor.value.data)}}}"
    if isinstance(op, ark.CastOp):
        src, dst = op.inputs[0].data_type, op.outputs[0].data_type
        truncates = src == "FP32" and dst not in ark.FLOAT_DATA_TYPES
        return "planc::TruncatingCast{}" if truncates else "planc::Cast{}"
    return UNARY_FUNCTIONS[type(op)]


def comment_text(text: str) -> str:
    """Text from the input made safe inside a C++ `//` comment: one line of printable ASCII
    (a newline in an operator's name would otherwise end the comment and inject code)."""
    return "".join(c if " " <= c <= "~" else "?" for c in text).replace("*/", "*?")


def describe_operator(op: ark.ArkOp) -> str:
    def tensor(t: ark.TensorType) -> str:
        return f"t{t.tensor_id} {t.shape_list} {t.data_type}"

    reads = ", ".join(tensor(t) for t in op.inputs) or "nothing"
    writes = ", ".join(tensor(t) for t in op.outputs) or "nothing"
    return comment_text(f"{op.ark_type} '{op.label.data}': {reads} -> {writes}")


def first_processor(rg: plan.ResourceGroupOp, schedule: plan.TaskGroupSchedule) -> int:
    """Where the schedule's rotation starts: the position, in the resource group's processor
    range, of the processor that runs the group's first task index."""
    first_task = schedule.task_group.tasks.begin
    for position, processor in enumerate(rg.processors):
        slots = schedule.assignment[processor]
        if slots and slots[0] and slots[0][0] == first_task:
            return position
    raise AssertionError("a non-empty task group runs its first task somewhere")


def range_args(r: plan.Range) -> str:
    return f"{r.begin}, {r.end}, {r.step}"


def program_readme(printer: PlanPrinter, title: str, build: str, cmake: str,
                   notes: str = "") -> str:
    """README.md of an emitted program: how to build and run it, what it reads and writes."""
    p = printer.plan
    inputs = ", ".join(f"t{f.tensor.tensor_id}" for f in printer.input_files()) or "none"
    outputs = ", ".join(f"t{f.tensor.tensor_id}" for f in printer.output_files()) or "none"
    return f"""# {title}

Generated by planc from an ARK plan (rank {p.rank.value.data} of {p.world_size.value.data}, \
{p.processor_count} processors x {p.warps_per_processor} warps, {len(printer.scheduled)} scheduled \
tasks, {len(p.processor_groups())} processor groups, a {printer.layout.total_bytes}-byte arena).

Build in one line:

    {build}

or with CMake: `{cmake}`.

Run:

    ./plan INPUT_DIR OUTPUT_DIR [--iterations N] [--warmup N]

The program reads every input tensor from `INPUT_DIR/t<Id>.bin` and writes every output tensor
to `OUTPUT_DIR/t<Id>.bin`: the tensor's elements in row-major order of its shape, densely, in
the stored type (little-endian; FP16 and BF16 as their 16-bit patterns). `tensors.json` lists
them with their data types and shapes (inputs: {inputs}; outputs: {outputs}). With
`--iterations N` the plan runs N times (after `--warmup` untimed runs) and the time per
iteration is printed.
{notes}"""
