"""`--target tt-metal -o DIR`: a TT-Metalium host program and the kernels of every plan.

The pipeline lowers plans to the `metalium` dialect (`tt-to-metalium`, after the tt lowering
when the input is a model); this module only prints. `CppPrinter` walks one `metalium.source`
and dispatches on op type through the `PRINTERS` table: kernel API calls print generically
(`name<template args>(operands);`), declarations and host calls have one small printer each,
`scf.for`/`scf.if` become C++ loops and ifs (loop-carried values are variables), and pure
`arith` ops are printed inline where they are used. Includes are derived from the API calls a
file makes.

Output layout:

    DIR/main.cpp                        host program (one program launch per plan, in order)
    DIR/planc_tt_host.hpp               tile-layout and file helpers the host program uses
    DIR/kernels/NN_<name>/reader.cpp    per plan: reader, compute and writer kernels
    DIR/kernels/NN_<name>/compute.cpp
    DIR/kernels/NN_<name>/writer.cpp
    DIR/CMakeLists.txt                  builds the host program against an installed TT-Metalium
    DIR/README.md                       how to build and run it

The host program reads each model input from `<data dir>/in_t<id>.bin` (row-major, the
tensor's element type; the data dir is argv[1], default ".") and writes each result to
`out_t<id>.bin`. The code targets the TT-Metalium API of late 2025 (MeshDevice host API,
TensorAccessor, tile_regs_*, five-argument matmul_tiles).
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable
from importlib import resources
from typing import Any

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerType, ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from backends.plan_cxx import comment_text
from dialects import metalium as mt
from ground.diagnostics import PlancError, UnsupportedInput

RUNTIME_HEADER = "planc_tt_host.hpp"
HOST_INCLUDES = ("cstdint", "memory", "string", "vector", "tt-metalium/host_api.hpp",
                 "tt-metalium/device.hpp", "tt-metalium/distributed.hpp",
                 "tt-metalium/tensor_accessor_args.hpp")

BINARY_OPERATORS: dict[type[Operation], str] = {
    arith.AddiOp: "+", arith.SubiOp: "-", arith.MuliOp: "*", arith.DivUIOp: "/",
    arith.RemUIOp: "%", arith.ShRUIOp: ">>", arith.ShLIOp: "<<", arith.AndIOp: "&",
    arith.OrIOp: "|",
}
COMPARISONS = {"eq": "==", "ne": "!=", "ult": "<", "ule": "<=", "ugt": ">", "uge": ">="}
CMPI_NAMES = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
C_TYPES = {1: "bool", 8: "uint8_t", 16: "uint16_t", 32: "uint32_t", 64: "uint64_t"}


def c_type(value: SSAValue) -> str:
    if isinstance(value.type, IntegerType):
        return C_TYPES[value.type.width.data]
    return "auto"


class CppPrinter:
    """Prints one `metalium.source` as C++."""

    def __init__(self, source: mt.SourceOp):
        self.source = source
        self.lines: list[str] = []
        self.depth = 0
        self.names: dict[SSAValue, str] = {}
        self.taken: set[str] = set()

    # -- text ------------------------------------------------------------------------------

    def line(self, text: str = "") -> None:
        self.lines.append("    " * self.depth + text if text else "")

    def block(self, block: Block) -> None:
        self.depth += 1
        for op in block.ops:
            self.op(op)
        self.depth -= 1

    def op(self, op: Operation) -> None:
        for cls in type(op).__mro__:
            printer = PRINTERS.get(cls)
            if printer is not None:
                printer(self, op)
                return
        raise PlancError(f"tt-metal: no C++ printer for {op.name}")

    # -- names and expressions -----------------------------------------------------------------

    def declare(self, value: SSAValue, preferred: str | None = None) -> str:
        base = preferred or value.name_hint or "v"
        name, n = base, 1
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        self.names[value] = name
        return name

    def expr(self, value: SSAValue) -> str:
        if value in self.names:
            return self.names[value]
        owner = value.owner
        if isinstance(owner, arith.ConstantOp):
            number = owner.value.value.data % (1 << owner.result.type.width.data)
            return f"{number}u" if number > 0x7FFFFFFF else str(number)
        if type(owner) in BINARY_OPERATORS:
            return (f"({self.expr(owner.lhs)} {BINARY_OPERATORS[type(owner)]} "
                    f"{self.expr(owner.rhs)})")
        if isinstance(owner, arith.CmpiOp):
            predicate = COMPARISONS[CMPI_NAMES[owner.predicate.value.data]]
            return f"({self.expr(owner.lhs)} {predicate} {self.expr(owner.rhs)})"
        raise PlancError(f"tt-metal: value of {owner.name} is used before it is declared")

    def args(self, values) -> str:
        return ", ".join(self.expr(v) for v in values)

    # -- files -----------------------------------------------------------------------------

    def text(self) -> str:
        kind = self.source.kind.data
        # The comment names the operator, whose name comes from the input: one safe line
        # (a newline in it started a line `#error ...` in every kernel file).
        comment = comment_text(self.source.comment.data if self.source.comment else kind)
        self.lines = [f"// {comment}.", "// Generated by planc; edit the model or plan instead.",
                      ""]
        {"host": self.host_file, "compute": self.compute_file}.get(kind, self.dataflow_file)()
        return "\n".join(self.lines) + "\n"

    def includes(self, *headers: str) -> None:
        for header in headers:
            quoted = f'"{header}"' if header.endswith((".h", RUNTIME_HEADER)) else f"<{header}>"
            self.line(f"#include {quoted}")
        self.line()

    def dataflow_file(self) -> None:
        self.includes("cstdint", "dataflow_api.h")
        self.line("void kernel_main() {")
        self.block(self.source.body.block)
        self.line("}")

    def compute_file(self) -> None:
        headers = sorted({op.FUNCTION.header for op in self.source.walk()
                          if isinstance(op, mt.ApiCallOp)} | {"compute_kernel_api/common.h"})
        self.includes("cstdint", *headers)
        self.line("namespace NAMESPACE {")
        self.line("void MAIN {")
        self.block(self.source.body.block)
        self.line("}")
        self.line("}  // namespace NAMESPACE")

    def host_file(self) -> None:
        self.includes(*HOST_INCLUDES, RUNTIME_HEADER)
        self.line("using namespace tt;")
        self.line("using namespace tt::tt_metal;")
        self.line()
        self.line("// Kernel paths are relative to the output directory unless this is defined.")
        self.line("#ifndef PLANC_KERNEL_DIR")
        self.line('#define PLANC_KERNEL_DIR ""')
        self.line("#endif")
        self.line()
        self.line("int main(int argc, char** argv) {")
        self.block(self.source.body.block)
        self.depth += 1
        self.line("return 0;")
        self.depth -= 1
        self.line("}")


# ---------------------------------------------------------------------------------------------
# Kernel statements
# ---------------------------------------------------------------------------------------------


def _arith(p: CppPrinter, op: Operation) -> None:
    """Pure arithmetic is printed inline where it is used, unless the value has a name: then it
    becomes a local variable, for readable index computations."""
    result = op.results[0]
    if result.name_hint and result.uses and not isinstance(op, arith.ConstantOp):
        expression = p.expr(result)
        p.line(f"{c_type(result)} {p.declare(result)} = {expression};")


def _cb(p: CppPrinter, op: mt.CBOp) -> None:
    name = p.declare(op.result, op.cb_name.data)
    p.line(f"constexpr uint32_t {name} = tt::CBIndex::c_{op.index.value.data};")


def _const(p: CppPrinter, op: mt.ConstOp) -> None:
    name = p.declare(op.result, op.const_name.data)
    p.line(f"constexpr uint32_t {name} = {op.value.value.data};")


def _arg(p: CppPrinter, op: mt.ArgOp) -> None:
    index = p.expr(op.index)
    name = p.declare(op.result, op.arg_name.data)
    p.line(f"uint32_t {name} = get_arg_val<uint32_t>({index});")


def _accessor(p: CppPrinter, op: mt.AccessorOp) -> None:
    name = p.declare(op.result, op.accessor_name.data)
    offset = "0" if op.after is None else f"{p.expr(op.after)}_args.next_compile_time_args_offset()"
    p.line(f"constexpr auto {name}_args = TensorAccessorArgs<{offset}>();")
    p.line(f"const auto {name} = TensorAccessor({name}_args, {p.expr(op.address)}, "
           f"{p.expr(op.page_bytes)});")


def _noc_addr(p: CppPrinter, op: mt.NocAddrOp) -> None:
    call = f"{p.expr(op.accessor)}.get_noc_addr({p.args([op.page, op.offset])})"
    p.line(f"uint64_t {p.declare(op.result, 'noc_addr')} = {call};")


def _api_call(p: CppPrinter, op: mt.ApiCallOp) -> None:
    template = f"<{', '.join(op.templates)}>" if op.templates else ""
    call = f"{op.FUNCTION.name}{template}({p.args(op.args)})"
    if op.result is None:
        p.line(f"{call};")
    else:
        p.line(f"{c_type(op.result)} {p.declare(op.result)} = {call};")


def _for(p: CppPrinter, op: scf.ForOp) -> None:
    body = op.body.block
    for arg, init, result in zip(body.args[1:], op.iter_args, op.results, strict=True):
        name = p.declare(arg)
        p.names[result] = name
        p.line(f"{c_type(arg)} {name} = {p.expr(init)};")
    index = p.declare(body.args[0], body.args[0].name_hint or "i")
    step = p.expr(op.step)
    increment = f"++{index}" if step == "1" else f"{index} += {step}"
    p.line(f"for (uint32_t {index} = {p.expr(op.lb)}; {index} < {p.expr(op.ub)}; {increment}) {{")
    p.block(body)
    p.line("}")


def _yield(p: CppPrinter, op: scf.YieldOp) -> None:
    parent = op.parent_op()
    if not isinstance(parent, scf.ForOp):
        return
    for arg, value in zip(parent.body.block.args[1:], op.arguments, strict=True):
        if value is not arg:
            p.line(f"{p.names[arg]} = {p.expr(value)};")


def _if(p: CppPrinter, op: scf.IfOp) -> None:
    p.line(f"if {p.expr(op.cond)} {{")
    p.block(op.true_region.block)
    if op.false_region.blocks and any(
            not isinstance(o, scf.YieldOp) for o in op.false_region.block.ops):
        p.line("} else {")
        p.block(op.false_region.block)
    p.line("}")


# ---------------------------------------------------------------------------------------------
# Host statements
# ---------------------------------------------------------------------------------------------


def _mesh_device(p: CppPrinter, op: mt.MeshDeviceOp) -> None:
    p.line('const std::string data_dir = argc > 1 ? argv[1] : ".";')
    p.line("std::shared_ptr<distributed::MeshDevice> mesh_device = "
           "distributed::MeshDevice::create_unit_mesh(0);")
    p.line("distributed::MeshCommandQueue& cq = mesh_device->mesh_command_queue();")
    p.line("distributed::MeshCoordinateRange device_range(mesh_device->shape());")


def _buffer(p: CppPrinter, op: mt.BufferOp) -> None:
    name = p.declare(op.result, op.buffer_name.data)
    kind = "L1" if op.in_l1.value.data else "DRAM"
    p.line(f"auto {name} = distributed::MeshBuffer::create(")
    p.line(f"    distributed::ReplicatedBufferConfig{{.size = {op.size.value.data}}},")
    p.line(f"    distributed::DeviceLocalBufferConfig{{.page_size = {op.page_size.value.data}, "
           f".buffer_type = BufferType::{kind}}},")
    p.line("    mesh_device.get());")


def _shape(op: mt.TensorFileOp) -> str:
    return ", ".join(str(d) for d in op.dims)


def _write_input(p: CppPrinter, op: mt.WriteInputOp) -> None:
    element, file = op.element.data, op.file.data
    tiles = file.removesuffix(".bin")
    p.taken.add(tiles)
    p.line(f"std::vector<{element}> {tiles} = planc::load_tiles<{element}>(data_dir, "
           f'"{file}", {_shape(op)});')
    p.line(f"distributed::EnqueueWriteMeshBuffer(cq, {p.expr(op.buffer)}, {tiles}, false);")


def _read_output(p: CppPrinter, op: mt.ReadOutputOp) -> None:
    element, file = op.element.data, op.file.data
    tiles = file.removesuffix(".bin")
    p.taken.add(tiles)
    p.line(f"std::vector<{element}> {tiles};")
    p.line(f"distributed::EnqueueReadMeshBuffer(cq, {tiles}, {p.expr(op.buffer)}, true);")
    p.line(f'planc::store_tiles<{element}>(data_dir, "{file}", {tiles}, {_shape(op)});')


def _program(p: CppPrinter, op: mt.ProgramOp) -> None:
    p.line(f"{{  // {comment_text(op.label.data)}")
    p.depth += 1
    p.line("Program program = CreateProgram();")
    p.depth -= 1
    saved = set(p.taken)
    tables = _runtime_arg_tables(op.body.block)
    p.depth += 1
    for inner in op.body.block.ops:
        if not isinstance(inner, mt.RuntimeArgsOp) or inner not in tables:
            p.op(inner)
        elif tables[inner]:
            _runtime_args_table(p, tables[inner])
    p.depth -= 1
    p.taken = saved  # names declared in the program's scope can be reused by the next one
    p.depth += 1
    p.line("distributed::MeshWorkload workload;")
    p.line("workload.add_program(device_range, std::move(program));")
    p.line("distributed::EnqueueMeshWorkload(cq, workload, false);")
    p.depth -= 1
    p.line("}")


def _core_ranges(p: CppPrinter, op: mt.CoreRangesOp) -> None:
    name = p.declare(op.result, op.cores_name.data)
    ranges = ", ".join(f"CoreRange(CoreCoord({x0}, {y0}), CoreCoord({x1}, {y1}))"
                       for x0, y0, x1, y1 in op.range_list)
    p.line(f"CoreRangeSet {name}(std::vector<CoreRange>{{{ranges}}});")


def _circular_buffer(p: CppPrinter, op: mt.CircularBufferOp) -> None:
    index = f"CBIndex::c_{op.index.value.data}"
    page = op.page_bytes.value.data
    p.line(f"CreateCircularBuffer(program, {p.expr(op.cores)}, CircularBufferConfig("
           f"{op.pages.value.data} * {page}, {{{{{index}, tt::DataFormat::"
           f"{op.data_format.data}}}}}).set_page_size({index}, {page}));")


KERNEL_CONFIGS = {
    "reader": "DataMovementConfig{{.processor = DataMovementProcessor::RISCV_1, "
              ".noc = NOC::RISCV_1_default, .compile_args = {args}}}",
    "writer": "DataMovementConfig{{.processor = DataMovementProcessor::RISCV_0, "
              ".noc = NOC::RISCV_0_default, .compile_args = {args}}}",
    "compute": "ComputeConfig{{.math_fidelity = MathFidelity::HiFi4, .compile_args = {args}}}",
}


def _create_kernel(p: CppPrinter, op: mt.CreateKernelOp) -> None:
    name = p.declare(op.result, op.kernel_name.data)
    args = f"{name}_compile_args"
    p.line(f"std::vector<uint32_t> {args};")
    for buffer in op.accessors:
        p.line(f"TensorAccessorArgs(*{p.expr(buffer)}).append_to({args});")
    config = KERNEL_CONFIGS[op.role.data].format(args=args)
    p.line(f"KernelHandle {name} = CreateKernel(program, PLANC_KERNEL_DIR \"{op.path.data}\", "
           f"{p.expr(op.cores)},")
    p.line(f"    {config});")


def _runtime_args(p: CppPrinter, op: mt.RuntimeArgsOp) -> None:
    values = [f"static_cast<uint32_t>({p.expr(b)}->address())" for b in op.buffers]
    values += [f"{v}u" for v in op.value_list]
    call = (f"SetRuntimeArgs(program, {p.expr(op.kernel)}, CoreCoord({op.core_x.value.data}, "
            f"{op.core_y.value.data}), {{")
    if len(values) <= 6:
        p.line(call + ", ".join(values) + "});")
        return
    p.line(call)
    chunks = [values[i:i + 10] for i in range(0, len(values), 10)]
    for n, chunk in enumerate(chunks):
        p.line("    " + ", ".join(chunk) + ("});" if n == len(chunks) - 1 else ","))


TABLE_CORES = 8
"""A kernel's runtime args on this many cores or more are printed as a table and a loop, not as
one SetRuntimeArgs call per core: an 8x8 grid's three kernels made 1,152 calls in the FFN's
host program, 15 CPU s of g++ -O1 (the table compiles in a fraction of that)."""


def _runtime_arg_tables(block: Block) -> dict[mt.RuntimeArgsOp, list[mt.RuntimeArgsOp]]:
    """The runtime args to print as tables: each kernel's calls with the same buffers (in core
    order), under the first of them; the others under an empty list. Where SetRuntimeArgs
    stands among a program's calls does not matter: the program takes them all before it is
    enqueued."""
    groups: dict[tuple, list[mt.RuntimeArgsOp]] = {}
    for op in block.ops:
        if isinstance(op, mt.RuntimeArgsOp):
            groups.setdefault((op.kernel, tuple(op.buffers)), []).append(op)
    tables: dict[mt.RuntimeArgsOp, list[mt.RuntimeArgsOp]] = {}
    for members in groups.values():
        if len(members) >= TABLE_CORES:
            tables[members[0]] = members
            tables.update((member, []) for member in members[1:])
    return tables


def _runtime_args_table(p: CppPrinter, ops: list[mt.RuntimeArgsOp]) -> None:
    """One kernel's runtime args on many cores: a table of (x, y, count) per core and the
    cores' values one after another, set in a loop (the same calls, in the same order)."""
    kernel = p.expr(ops[0].kernel)
    fixed = [f"static_cast<uint32_t>({p.expr(b)}->address())" for b in ops[0].buffers]
    values = [op.value_list for op in ops]
    p.line(f"{{  // {kernel}'s runtime args on {len(ops)} cores: x, y, count of values")
    p.depth += 1
    p.line(f"static const uint32_t runtime_cores[{len(ops)}][3] = {{")
    rows = [f"{{{op.core_x.value.data}, {op.core_y.value.data}, {len(v)}}}"
            for op, v in zip(ops, values, strict=True)]
    _wrapped(p, rows, 8)
    flat = [f"{v}u" for row in values for v in row]
    if flat:
        p.line("static const uint32_t runtime_values[] = {")
        _wrapped(p, flat, 12)
        p.line("const uint32_t* next = runtime_values;")
    p.line("for (const auto& core : runtime_cores) {")
    p.depth += 1
    p.line(f"std::vector<uint32_t> args{{{', '.join(fixed)}}};")
    if flat:
        p.line("args.insert(args.end(), next, next + core[2]);")
        p.line("next += core[2];")
    p.line(f"SetRuntimeArgs(program, {kernel}, CoreCoord(core[0], core[1]), args);")
    p.depth -= 1
    p.line("}")
    p.depth -= 1
    p.line("}")


def _wrapped(p: CppPrinter, items: list[str], per_line: int) -> None:
    """`items` as the lines of a braced initializer, `per_line` to a line, closed by `};`."""
    p.depth += 1
    for start in range(0, len(items), per_line):
        last = start + per_line >= len(items)
        p.line(", ".join(items[start:start + per_line]) + ("};" if last else ","))
    p.depth -= 1


def _finish(p: CppPrinter, op: mt.FinishOp) -> None:
    p.line("distributed::Finish(cq);")
    p.line("mesh_device->close();")


PRINTERS: dict[type[Operation], Callable[[CppPrinter, Operation], None]] = {
    arith.ConstantOp: _arith, arith.CmpiOp: _arith, **dict.fromkeys(BINARY_OPERATORS, _arith),
    mt.CBOp: _cb, mt.ConstOp: _const, mt.ArgOp: _arg, mt.AccessorOp: _accessor,
    mt.NocAddrOp: _noc_addr, mt.ApiCallOp: _api_call,
    scf.ForOp: _for, scf.YieldOp: _yield, scf.IfOp: _if,
    mt.MeshDeviceOp: _mesh_device, mt.BufferOp: _buffer, mt.WriteInputOp: _write_input,
    mt.ReadOutputOp: _read_output, mt.ProgramOp: _program, mt.CoreRangesOp: _core_ranges,
    mt.CircularBufferOp: _circular_buffer, mt.CreateKernelOp: _create_kernel,
    mt.RuntimeArgsOp: _runtime_args, mt.FinishOp: _finish,
}
"""The C++ printer of every op type (looked up along the op class's MRO)."""


# ---------------------------------------------------------------------------------------------
# The target
# ---------------------------------------------------------------------------------------------


def runtime_header() -> str:
    return resources.files("backends.tt_metal_runtime").joinpath(RUNTIME_HEADER).read_text()


def emit_sources(module: ModuleOp) -> dict[str, str]:
    sources = [op for op in module.ops if isinstance(op, mt.SourceOp)]
    if not sources:
        raise PlancError("tt-metal: nothing to print (expected metalium.source ops; run "
                         "tt-to-metalium)")
    files = {source.path.data: CppPrinter(source).text() for source in sources}
    files[RUNTIME_HEADER] = runtime_header()
    return files


PROVED_BEFORE = "tt-to-metalium"
"""Translation validation proves the TT plans this pass turns into C++ (`backends.tt_plan`'s
proof against the input model, as `-t tt` runs it), before anything is written."""


def snapshot(module: ModuleOp, source_format: str, options: Namespace) -> Any:
    """The input model's expressions (`backends.tt_plan.snapshot`)."""
    from backends import tt_plan

    return tt_plan.snapshot(module, source_format, options)


def validate(module: ModuleOp, source_format: str, options: Namespace,
             before: Any = None) -> list[str]:
    """The TT plans the pipeline made, before `tt-to-metalium` lowers them, against the input
    model (`backends.tt_plan.validate`)."""
    from backends import tt_plan

    return tt_plan.validate(module, source_format, options, before)


def prove(module: ModuleOp, before: Any) -> list[str]:
    """`backends.tt_plan.prove` (after each pass, to name the one at fault)."""
    from backends import tt_plan

    return tt_plan.prove(module, before)


def pipeline(source_format: str, options: Namespace) -> str:
    from backends.tt_plan import lowering_pipeline
    from devices.tt import device_named

    arch = device_named(getattr(options, "arch", None)).name
    lower = f"tt-to-metalium{{arch={arch}}}"
    if source_format == "tt":
        return lower
    if source_format == "ark-model":
        return f"{lowering_pipeline(options)},{lower}"
    raise UnsupportedInput("tt-metal", "TT-Metalium C++", source_format)


# TT-Metalium's own programming examples build this way (`find_package(TT-Metalium)` exports
# `TT::Metalium`). Kernels are not compiled here: the runtime compiles them when the host
# program creates them, from the paths under PLANC_KERNEL_DIR.
CMAKE = """cmake_minimum_required(VERSION 3.22...3.30)
project(planc_tt_program LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)

if(NOT TARGET TT::Metalium)
    find_package(TT-Metalium REQUIRED)
endif()

add_executable(planc_tt main.cpp)
target_link_libraries(planc_tt PRIVATE TT::Metalium)
# The runtime compiles the kernels when the program creates them: point it at this folder.
target_compile_definitions(planc_tt PRIVATE PLANC_KERNEL_DIR="${CMAKE_CURRENT_SOURCE_DIR}/")
"""


def readme(files: dict[str, str]) -> str:
    kernels = sorted({path.rsplit("/", 1)[0] for path in files if path.startswith("kernels/")})
    listing = "\n".join(f"- `{k}/`: reader.cpp, compute.cpp, writer.cpp" for k in kernels)
    return f"""# planc TT-Metalium program

Generated by planc: a host program (`main.cpp`, with the helpers of `{RUNTIME_HEADER}`) that
runs {len(kernels)} kernel{"s" * (len(kernels) != 1)} one after the other on a Tenstorrent
device, each as a reader, a compute and a writer kernel per core:

{listing}

Build against an installed TT-Metalium (`TT_METAL_HOME` set, tt-metal built and installed):

    cmake -S . -B build && cmake --build build

Run from any directory; `DATA_DIR` defaults to the current one:

    ./build/planc_tt DATA_DIR

The program reads each model input from `DATA_DIR/in_t<id>.bin` and writes each result to
`DATA_DIR/out_t<id>.bin`: the tensor's elements in row-major order of its shape, in its element
type (little-endian). The kernels are compiled by the TT-Metalium runtime when the program
starts; CMake passes this folder as `PLANC_KERNEL_DIR` so it finds them.
"""


def emit(module: ModuleOp, options: Namespace) -> dict[str, str]:
    files = emit_sources(module)
    files["CMakeLists.txt"] = CMAKE
    files["README.md"] = readme(files)
    return files

