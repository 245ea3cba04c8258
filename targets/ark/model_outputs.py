"""What a model computes for its user: its final outputs, decided on byte regions.

Apart from the numpy interpreter (`targets.ark.model_interpreter`, which re-exports it) so that
the backends that name a plan's outputs (`backends.plan_cxx`) do not import numpy.
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.ir import SSAValue

from dialects import ark
from targets.ark.byte_regions import ByteRegion, overlaps


def final_outputs(ops: Iterable[ark.ArkOp]) -> list[SSAValue]:
    """Results no operator uses and no later operator overwrites (through any view of the
    same bytes): what a model computes for its user, in operator order. A result that a later
    write may overlap (decided on byte regions, `targets.ark.byte_regions`) is no longer in memory
    at the end, so it is not an output."""
    ops = list(ops)
    later: dict[int, set[ByteRegion]] = {}
    found: list[SSAValue] = []
    of = ByteRegion.of
    # (`results` is `result_tensors`, `operand_groups()[1]` `outputs`, and `first_use`
    # `uses`, read without building lists and use iterators: validation asks this of the
    # whole plan.)
    for op in reversed(ops):
        for value in reversed(op.results):
            if value.first_use is None:
                region = of(value.type)
                if not any(overlaps(w, region) for w in later.get(region.buffer, ())):
                    found.append(value)
        for tensor in op.operand_groups()[1]:
            region = of(tensor.type)
            written = later.get(region.buffer)
            if written is None:
                later[region.buffer] = {region}
            else:
                written.add(region)
    return found[::-1]
