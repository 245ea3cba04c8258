"""The `metalium` dialect: TT-Metalium host programs and reader/compute/writer kernels.

Each `metalium.source` op is one C++ file: the host program (`kind = "host"`) or a kernel of a
Tensix core (`"reader"`, `"compute"`, `"writer"`). Kernel bodies are built from

* one op per TT-Metalium kernel API function (`metalium.cb_wait_front`, `metalium.matmul_tiles`,
  `metalium.noc_async_read_tile`, ...), defined from the `KERNEL_API` table: its C++ name is
  the op name, template arguments are the `template_args` property, operands are the call's
  arguments and the optional result its return value;
* declarations the printer turns into C++ declarations: circular-buffer ids (`metalium.cb`),
  named constants, runtime arguments (`metalium.arg`), TensorAccessors (`metalium.accessor`);
* `scf.for` / `scf.if` and `arith` integer ops for control flow and index arithmetic (i32 is
  uint32_t, i64 uint64_t, i1 bool).

Host programs use ops for the host API calls a program needs (buffers, circular buffers, kernels,
runtime args, one `metalium.program` region per kernel launch). The C++ printer
(`backends/tt_metal.py`) dispatches on op type; it knows nothing about plans.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    IntegerAttr,
    StringAttr,
    i32,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    opt_result_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects.json_value import bool_attr

# ---------------------------------------------------------------------------------------------
# Types
# ---------------------------------------------------------------------------------------------


@irdl_attr_definition
class CBType(ParametrizedAttribute, TypeAttribute):
    """A circular buffer id (tt::CBIndex), a compile-time constant of a kernel."""

    name = "metalium.cb"


@irdl_attr_definition
class AccessorType(ParametrizedAttribute, TypeAttribute):
    """A TensorAccessor: maps a buffer's page (tile) ids to NoC addresses."""

    name = "metalium.accessor"


@irdl_attr_definition
class BufferType(ParametrizedAttribute, TypeAttribute):
    """A device buffer on the host (std::shared_ptr<distributed::MeshBuffer>)."""

    name = "metalium.buffer"


@irdl_attr_definition
class CoresType(ParametrizedAttribute, TypeAttribute):
    """A set of core ranges on the host (CoreRangeSet)."""

    name = "metalium.cores"


@irdl_attr_definition
class KernelType(ParametrizedAttribute, TypeAttribute):
    """A kernel of a program on the host (KernelHandle)."""

    name = "metalium.kernel"


SOURCE_KINDS = ("host", "reader", "compute", "writer")


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


# ---------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class SourceOp(IRDLOperation):
    """One C++ source file at `path` (relative to the output directory)."""

    name = "metalium.source"
    path = prop_def(StringAttr)
    kind = prop_def(StringAttr)
    comment = opt_prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$kind $path attr-dict-with-keyword $body"

    def __init__(self, path: str, kind: str, body: Block, comment: str | None = None):
        props: dict[str, Attribute] = {"path": StringAttr(path), "kind": StringAttr(kind)}
        if comment is not None:
            props["comment"] = StringAttr(comment)
        super().__init__(properties=props, regions=[Region(body)])

    def verify_(self) -> None:
        if self.kind.data not in SOURCE_KINDS:
            raise VerifyException(f"source kind must be one of {', '.join(SOURCE_KINDS)}")


# ---------------------------------------------------------------------------------------------
# Kernel declarations
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class CBOp(IRDLOperation):
    """`constexpr uint32_t <name> = tt::CBIndex::c_<index>;`"""

    name = "metalium.cb"
    index = prop_def(IntegerAttr[I64])
    cb_name = prop_def(StringAttr)
    result = result_def(CBType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$cb_name `=` $index attr-dict"

    def __init__(self, name: str, index: int):
        super().__init__(properties={"cb_name": StringAttr(name), "index": _int(index)},
                         result_types=[CBType()])

    def verify_(self) -> None:
        if not 0 <= self.index.value.data < 32:
            raise VerifyException("circular buffer index must be in [0, 32)")


@irdl_op_definition
class ConstOp(IRDLOperation):
    """`constexpr uint32_t <name> = <value>;` a named compile-time constant."""

    name = "metalium.const"
    value = prop_def(IntegerAttr[I64])
    const_name = prop_def(StringAttr)
    result = result_def(i32)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$const_name `=` $value attr-dict"

    def __init__(self, name: str, value: int):
        super().__init__(properties={"const_name": StringAttr(name), "value": _int(value)},
                         result_types=[i32])


@irdl_op_definition
class ArgOp(IRDLOperation):
    """`uint32_t <name> = get_arg_val<uint32_t>(<index>);` a runtime argument. The index is
    an operand (a constant or an expression, for argument lists)."""

    name = "metalium.arg"
    index = operand_def(i32)
    arg_name = prop_def(StringAttr)
    result = result_def(i32)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$arg_name `=` $index attr-dict"

    def __init__(self, name: str, index: SSAValue):
        super().__init__(operands=[index], properties={"arg_name": StringAttr(name)},
                         result_types=[i32])


@irdl_op_definition
class AccessorOp(IRDLOperation):
    """A TensorAccessor over the buffer at `address` with `page_bytes` pages, configured by
    the kernel's compile-time args after those of `after` (or from index 0):

        constexpr auto <name>_args = TensorAccessorArgs<0>();
        const auto <name> = TensorAccessor(<name>_args, address, page_bytes);
    """

    name = "metalium.accessor"
    address = operand_def(i32)
    page_bytes = operand_def(i32)
    after = opt_operand_def(AccessorType)
    accessor_name = prop_def(StringAttr)
    result = result_def(AccessorType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$accessor_name `(` $address `,` $page_bytes `)` (`after` $after^)? "
                       "attr-dict")

    def __init__(self, name: str, address: SSAValue, page_bytes: SSAValue,
                 after: SSAValue | None = None):
        super().__init__(operands=[address, page_bytes, [after] if after else []],
                         properties={"accessor_name": StringAttr(name)},
                         result_types=[AccessorType()])


@irdl_op_definition
class NocAddrOp(IRDLOperation):
    """`accessor.get_noc_addr(page, offset)`: the NoC address of a byte inside a page."""

    name = "metalium.noc_addr"
    accessor = operand_def(AccessorType)
    page = operand_def(i32)
    offset = operand_def(i32)
    result = result_def(i64)
    assembly_format = "$accessor `[` $page `,` $offset `]` attr-dict"

    def __init__(self, accessor: SSAValue, page: SSAValue, offset: SSAValue):
        super().__init__(operands=[accessor, page, offset], result_types=[i64])


# ---------------------------------------------------------------------------------------------
# Kernel API calls
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ApiFunction:
    """A TT-Metalium kernel API function: C++ name, parameters, result, and header."""

    name: str
    params: tuple[str, ...]
    returns: Attribute | None = None
    header: str = "dataflow_api.h"
    """The header declaring it (for compute kernels; dataflow kernels include dataflow_api.h)."""


def _compute(header: str, *functions: tuple[str, tuple[str, ...]]) -> list[ApiFunction]:
    return [ApiFunction(name, params, None, f"compute_kernel_api/{header}")
            for name, params in functions]


KERNEL_API: tuple[ApiFunction, ...] = (
    # Circular buffers (dataflow_api.h for data movement kernels, cb_api.h for compute)
    ApiFunction("cb_reserve_back", ("cb", "num_tiles"), None, "compute_kernel_api/cb_api.h"),
    ApiFunction("cb_push_back", ("cb", "num_tiles"), None, "compute_kernel_api/cb_api.h"),
    ApiFunction("cb_wait_front", ("cb", "num_tiles"), None, "compute_kernel_api/cb_api.h"),
    ApiFunction("cb_pop_front", ("cb", "num_tiles"), None, "compute_kernel_api/cb_api.h"),
    ApiFunction("get_write_ptr", ("cb",), i32),
    ApiFunction("get_read_ptr", ("cb",), i32),
    # NoC transfers
    ApiFunction("noc_async_read_tile", ("id", "accessor", "dst_local_l1_addr")),
    ApiFunction("noc_async_write_tile", ("id", "accessor", "src_local_l1_addr")),
    ApiFunction("noc_async_read", ("src_noc_addr", "dst_local_l1_addr", "size")),
    ApiFunction("noc_async_write", ("src_local_l1_addr", "dst_noc_addr", "size")),
    ApiFunction("noc_async_read_barrier", ()),
    ApiFunction("noc_async_write_barrier", ()),
    # Compute: DST register protocol and packing
    *_compute("reg_api.h", ("tile_regs_acquire", ()), ("tile_regs_commit", ()),
              ("tile_regs_wait", ()), ("tile_regs_release", ())),
    *_compute("pack.h", ("pack_tile", ("idst", "ocb"))),
    # Matrix engine
    *_compute("matmul.h", ("mm_init", ("in0_cb", "in1_cb", "out_cb", "transpose")),
              ("matmul_tiles", ("in0_cb", "in1_cb", "in0_tile", "in1_tile", "idst"))),
    # Element-wise binary (FPU), plain and broadcast
    *_compute("eltwise_binary.h", ("binary_op_init_common", ("icb0", "icb1", "ocb")),
              ("add_tiles_init", ("icb0", "icb1")), ("sub_tiles_init", ("icb0", "icb1")),
              ("mul_tiles_init", ("icb0", "icb1")),
              ("add_tiles", ("icb0", "icb1", "itile0", "itile1", "idst")),
              ("sub_tiles", ("icb0", "icb1", "itile0", "itile1", "idst")),
              ("mul_tiles", ("icb0", "icb1", "itile0", "itile1", "idst"))),
    *_compute("bcast.h", ("init_bcast", ("icb0", "icb1", "ocb")),
              ("add_tiles_bcast", ("icb0", "icb1", "itile0", "itile1", "idst")),
              ("sub_tiles_bcast", ("icb0", "icb1", "itile0", "itile1", "idst")),
              ("mul_tiles_bcast", ("icb0", "icb1", "itile0", "itile1", "idst"))),
    # Element-wise unary (SFPU) on DST
    *_compute("eltwise_unary/eltwise_unary.h", ("init_sfpu", ("icb", "ocb"))),
    *_compute("tile_move_copy.h", ("copy_tile_init", ("cbid",)),
              ("copy_tile", ("in_cb", "in_tile", "idst"))),
    *_compute("eltwise_unary/exp.h", ("exp_tile_init", ()), ("exp_tile", ("idst",))),
    *_compute("eltwise_unary/gelu.h", ("gelu_tile_init", ()), ("gelu_tile", ("idst",))),
    *_compute("eltwise_unary/relu.h", ("relu_tile_init", ()), ("relu_tile", ("idst",))),
    *_compute("eltwise_unary/rsqrt.h", ("rsqrt_tile_init", ()), ("rsqrt_tile", ("idst",))),
    *_compute("eltwise_unary/sigmoid.h", ("sigmoid_tile_init", ()),
              ("sigmoid_tile", ("idst",))),
    *_compute("eltwise_unary/sqrt.h", ("sqrt_tile_init", ()), ("sqrt_tile", ("idst",))),
    *_compute("eltwise_unary/binop_with_scalar.h", ("binop_with_scalar_tile_init", ()),
              ("add_unary_tile", ("idst", "param")), ("mul_unary_tile", ("idst", "param"))),
)


class ApiCallOp(IRDLOperation):
    """A call of a kernel API function; subclasses are made from `KERNEL_API`."""

    FUNCTION: ClassVar[ApiFunction]
    args = var_operand_def()
    result = opt_result_def()
    template_args = opt_prop_def(ArrayAttr[StringAttr])
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "(`(` $args^ `:` type($args) `)`)? attr-dict (`->` type($result)^)?"

    def __init__(self, *args: SSAValue, template: Sequence[str] = ()):
        props = {"template_args": ArrayAttr([StringAttr(t) for t in template])} if template \
            else {}
        returns = self.FUNCTION.returns
        super().__init__(operands=[list(args)], properties=props,
                         result_types=[[returns] if returns is not None else []])

    @property
    def templates(self) -> list[str]:
        return [] if self.template_args is None else [t.data for t in self.template_args.data]

    def verify_(self) -> None:
        params = self.FUNCTION.params
        if len(self.args) != len(params):
            raise VerifyException(f"{self.FUNCTION.name} takes {len(params)} arguments "
                                  f"({', '.join(params)}), got {len(self.args)}")


def _api_op(function: ApiFunction) -> type[ApiCallOp]:
    cls = type(f"{''.join(p.title() for p in function.name.split('_'))}Op", (ApiCallOp,), {
        "__doc__": f"`{function.name}({', '.join(function.params)})`",
        "name": f"metalium.{function.name}", "__module__": __name__,
        "FUNCTION": function, "__annotations__": {"FUNCTION": ClassVar}})
    return irdl_op_definition(cls)


API_OPS: dict[str, type[ApiCallOp]] = {f.name: _api_op(f) for f in KERNEL_API}


def call(function: str, *args: SSAValue, template: Sequence[str] = ()) -> ApiCallOp:
    """The API call op of `function` (a C++ kernel API name) with `args`."""
    return API_OPS[function](*args, template=template)


# ---------------------------------------------------------------------------------------------
# Host program
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class MeshDeviceOp(IRDLOperation):
    """Opens device 0 as a unit mesh with its command queue (`mesh_device`, `cq`)."""

    name = "metalium.mesh_device"
    assembly_format = "attr-dict"


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A device buffer of `size` bytes in pages of `page_size`, in L1 or DRAM."""

    name = "metalium.buffer"
    buffer_name = prop_def(StringAttr)
    size = prop_def(IntegerAttr[I64])
    page_size = prop_def(IntegerAttr[I64])
    in_l1 = prop_def(BoolAttr)
    result = result_def(BufferType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$buffer_name `size` $size `page` $page_size `l1` $in_l1 attr-dict"

    def __init__(self, name: str, size: int, page_size: int, in_l1: bool):
        super().__init__(properties={"buffer_name": StringAttr(name), "size": _int(size),
                                     "page_size": _int(page_size), "in_l1": bool_attr(in_l1)},
                         result_types=[BufferType()])


class TensorFileOp(IRDLOperation):
    """Moves a tensor between a raw row-major file and a tiled device buffer."""

    buffer = operand_def(BufferType)
    file = prop_def(StringAttr)
    element = prop_def(StringAttr)
    """The C++ storage type of one element (uint16_t for FP16/BF16, float, ...)."""
    shape = prop_def(DenseArrayBase)
    """[batch, rows, cols]."""
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$buffer $file `:` $element attr-dict"

    def __init__(self, buffer: SSAValue, file: str, element: str, shape: Sequence[int]):
        super().__init__(operands=[buffer], properties={
            "file": StringAttr(file), "element": StringAttr(element),
            "shape": DenseArrayBase.from_list(i64, list(shape))})

    @property
    def dims(self) -> list[int]:
        return list(self.shape.get_values())


@irdl_op_definition
class WriteInputOp(TensorFileOp):
    """Reads a model input from its file, tilizes it and writes it to the device."""

    name = "metalium.write_input"


@irdl_op_definition
class ReadOutputOp(TensorFileOp):
    """Reads a result back from the device, untilizes it and writes it to its file."""

    name = "metalium.read_output"


@irdl_op_definition
class ProgramOp(IRDLOperation):
    """One kernel launch: a Program with its CBs, kernels and runtime args, enqueued."""

    name = "metalium.program"
    label = prop_def(StringAttr)
    body = region_def("single_block")
    traits = traits_def(NoTerminator())
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$label attr-dict-with-keyword $body"

    def __init__(self, label: str, body: Block):
        super().__init__(properties={"label": StringAttr(label)}, regions=[Region(body)])


@irdl_op_definition
class CoreRangesOp(IRDLOperation):
    """A CoreRangeSet; `ranges` holds (x0, y0, x1, y1) per range, inclusive as in tt-metal."""

    name = "metalium.core_ranges"
    cores_name = prop_def(StringAttr)
    ranges = prop_def(DenseArrayBase)
    result = result_def(CoresType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$cores_name attr-dict"

    def __init__(self, name: str, ranges: Sequence[tuple[int, int, int, int]]):
        flat = [v for r in ranges for v in r]
        super().__init__(properties={"cores_name": StringAttr(name),
                                     "ranges": DenseArrayBase.from_list(i64, flat)},
                         result_types=[CoresType()])

    @property
    def range_list(self) -> list[tuple[int, ...]]:
        flat = list(self.ranges.get_values())
        return [tuple(flat[i:i + 4]) for i in range(0, len(flat), 4)]


@irdl_op_definition
class CircularBufferOp(IRDLOperation):
    """CreateCircularBuffer on `cores`: `pages` pages of `page_bytes`, data `format`."""

    name = "metalium.circular_buffer"
    cores = operand_def(CoresType)
    index = prop_def(IntegerAttr[I64])
    pages = prop_def(IntegerAttr[I64])
    page_bytes = prop_def(IntegerAttr[I64])
    data_format = prop_def(StringAttr)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$cores `index` $index `pages` $pages `x` $page_bytes $data_format "
                       "attr-dict")

    def __init__(self, cores: SSAValue, index: int, pages: int, page_bytes: int,
                 data_format: str):
        super().__init__(operands=[cores], properties={
            "index": _int(index), "pages": _int(pages), "page_bytes": _int(page_bytes),
            "data_format": StringAttr(data_format)})


KERNEL_ROLES = ("reader", "compute", "writer")


@irdl_op_definition
class CreateKernelOp(IRDLOperation):
    """CreateKernel for the kernel source at `path` on `cores`; `accessors` are the buffers
    whose TensorAccessorArgs become its compile-time args, in order."""

    name = "metalium.create_kernel"
    cores = operand_def(CoresType)
    accessors = var_operand_def(BufferType)
    kernel_name = prop_def(StringAttr)
    path = prop_def(StringAttr)
    role = prop_def(StringAttr)
    result = result_def(KernelType)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$kernel_name $role $path `on` $cores (`accessors` `(` $accessors^ `)`)? "
                       "attr-dict")

    def __init__(self, name: str, role: str, path: str, cores: SSAValue,
                 accessors: Sequence[SSAValue] = ()):
        super().__init__(operands=[cores, list(accessors)], properties={
            "kernel_name": StringAttr(name), "path": StringAttr(path), "role": StringAttr(role)},
            result_types=[KernelType()])

    def verify_(self) -> None:
        if self.role.data not in KERNEL_ROLES:
            raise VerifyException(f"kernel role must be one of {', '.join(KERNEL_ROLES)}")


@irdl_op_definition
class RuntimeArgsOp(IRDLOperation):
    """SetRuntimeArgs of `kernel` on core (x, y): the addresses of `buffers`, then `values`."""

    name = "metalium.runtime_args"
    kernel = operand_def(KernelType)
    buffers = var_operand_def(BufferType)
    core_x = prop_def(IntegerAttr[I64])
    core_y = prop_def(IntegerAttr[I64])
    values = prop_def(DenseArrayBase)
    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = ("$kernel `core` ` ` `(` $core_x `,` $core_y `)` (`addresses` ` ` `(` "
                       "$buffers^ `)`)? attr-dict")

    MAX_ARGS: ClassVar[int] = 341
    """tt_metal::max_runtime_args: unique runtime args per kernel per core."""

    def __init__(self, kernel: SSAValue, core: tuple[int, int], buffers: Sequence[SSAValue],
                 values: Sequence[int]):
        super().__init__(operands=[kernel, list(buffers)], properties={
            "core_x": _int(core[0]), "core_y": _int(core[1]),
            "values": DenseArrayBase.from_list(i64, list(values))})

    @property
    def value_list(self) -> list[int]:
        return list(self.values.get_values())

    def verify_(self) -> None:
        count = len(self.buffers) + len(self.value_list)
        if count > self.MAX_ARGS:
            raise VerifyException(f"{count} runtime args on core ({self.core_x.value.data},"
                                  f"{self.core_y.value.data}) exceed tt-metal's limit of "
                                  f"{self.MAX_ARGS}")


@irdl_op_definition
class FinishOp(IRDLOperation):
    """Waits for the command queue and closes the device."""

    name = "metalium.finish"
    assembly_format = "attr-dict"


Metalium = Dialect(
    "metalium",
    [SourceOp, CBOp, ConstOp, ArgOp, AccessorOp, NocAddrOp, *API_OPS.values(), MeshDeviceOp,
     BufferOp, WriteInputOp, ReadOutputOp, ProgramOp, CoreRangesOp, CircularBufferOp,
     CreateKernelOp, RuntimeArgsOp, FinishOp],
    [CBType, AccessorType, BufferType, CoresType, KernelType],
)
