"""Helpers shared by planc's dialects."""

from __future__ import annotations

from typing import TypeVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region
from xdsl.utils.exceptions import VerifyException

from compiler.diagnostics import PlancError

RootT = TypeVar("RootT", bound=Operation)


class VerifyAtError(VerifyException):
    """A rule checked by a container op (which sees the whole document) but broken by one of
    its children: `op` is the child, so the error is reported at the child's JSON path."""

    def __init__(self, message: str, op: Operation):
        super().__init__(message)
        self.op = op


def body_block(region: Region) -> Block:
    """The single block of a container op's body.

    Container bodies are declared with `region_def()` rather than "single_block" because an
    empty `{}` in MLIR text parses to a region without blocks (a plan or model with nothing in
    it is legal); such a region gets its empty block here.
    """
    if not region.blocks:
        region.add_block(Block())
    return region.block


def single_root(module: ModuleOp, cls: type[RootT]) -> RootT:
    """The one top-level `cls` op of `module` (a document), or a PlancError."""
    roots = [op for op in module.ops if isinstance(op, cls)]
    if len(roots) != 1:
        raise PlancError(f"expected one {cls.name} in the module, found {len(roots)}")
    return roots[0]
