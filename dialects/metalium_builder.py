"""Building `metalium` kernel code: integer constants and arithmetic (folding zeros and ones so
index expressions stay readable), kernel API calls, and structured control flow (`loop` with
loop-carried values, `when`). Everything is created under an xDSL `ImplicitBuilder`, so ops land
in the block being built.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from xdsl.builder import ImplicitBuilder
from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr, i32
from xdsl.ir import Block, Region, SSAValue

from dialects import metalium as mt

Decoder = Callable[[SSAValue], tuple[SSAValue, SSAValue]]
"""Work item number i -> (io, jo) of the output tile it names."""



def const(value: int) -> SSAValue:
    return arith.ConstantOp(IntegerAttr(value, i32)).result


def named(value: SSAValue, name: str) -> SSAValue:
    value.name_hint = name
    return value


def literal(value: SSAValue) -> int | None:
    owner = value.owner
    return owner.value.value.data if isinstance(owner, arith.ConstantOp) else None


def add(a: SSAValue, b: SSAValue) -> SSAValue:
    """a + b, folding additions of zero so index expressions stay readable."""
    if literal(a) == 0:
        return b
    if literal(b) == 0:
        return a
    return arith.AddiOp(a, b).result


def mul(a: SSAValue, b: SSAValue) -> SSAValue:
    """a * b, folding products with zero and one."""
    if 0 in (literal(a), literal(b)):
        return const(0)
    if literal(a) == 1:
        return b
    if literal(b) == 1:
        return a
    return arith.MuliOp(a, b).result


def div(a: SSAValue, b: SSAValue) -> SSAValue:
    return arith.DivUIOp(a, b).result


def rem(a: SSAValue, b: SSAValue) -> SSAValue:
    return arith.RemUIOp(a, b).result


def differs(a: SSAValue, b: SSAValue) -> SSAValue:
    return arith.CmpiOp(a, b, "ne").result


def call(function: str, *args: SSAValue, template: Sequence[str] = ()) -> SSAValue | None:
    op = mt.call(function, *args, template=template)
    return op.result


@dataclass
class Loop:
    index: SSAValue
    carried: list[SSAValue]
    results: Sequence[SSAValue] = ()


@contextmanager
def loop(upper: SSAValue, name: str, carried: Sequence[SSAValue] = ()) -> Iterator[Loop]:
    """`for (uint32_t name = 0; name < upper; name += 1)`, with loop-carried values; the
    body sets `state.carried` to their next values."""
    body = Block(arg_types=[i32, *(v.type for v in carried)])
    named(body.args[0], name)
    for arg, value in zip(body.args[1:], carried, strict=True):
        arg.name_hint = value.name_hint
    state = Loop(body.args[0], list(body.args[1:]))
    for_op = scf.ForOp(const(0), upper, const(1), list(carried), body)
    with ImplicitBuilder(body):
        yield state
        scf.YieldOp(*state.carried)
    state.results = for_op.results


@contextmanager
def when(condition: SSAValue) -> Iterator[None]:
    then = Block()
    scf.IfOp(condition, [], Region(then))
    with ImplicitBuilder(then):
        yield
        scf.YieldOp()


def float_bits(value: float) -> int:
    return struct.unpack("<I", struct.pack("<f", value))[0]


