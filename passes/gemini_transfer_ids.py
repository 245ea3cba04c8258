"""gemini-transfer-ids: number the transfers densely, in the order Gemini's IR generator uses.

Observed in every public scheduler IR: ids run 0..M-1 with all weight loads first (in the order
their first consumer executes), then the network-input loads, then the feature-map transfers
layer by layer in execution order (for each workload: the DRAM reloads it is the first to read,
then the blocks it produces). The DRAM lists are sorted by id. Every reference is rewritten:
DRAM entries, ofmaps, ifmaps, weights, related lists and L2 tensors with their sources.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, IntegerAttr, ModuleOp
from xdsl.ir import Block, Operation
from xdsl.passes import ModulePass

from dialects import gemini
from dialects.utils import walk_ops
from targets.gemini.plan import schedule_of, workloads_in_order


def canonical_order(schedule: gemini.ScheduleOp) -> list[int]:
    """The current transfer ids in their canonical order."""
    workloads = workloads_in_order(schedule)
    position = {(wl.core.id, wl.id): i for i, wl in enumerate(workloads)}
    loads = schedule.dram.loads if schedule.dram else []

    def first_use(load: gemini.DramLoadOp) -> int:
        return min((position.get(d.target, len(position)) for d in load.destinations
                    if not d.to_dram), default=len(position))

    weights = sorted((ld for ld in loads if ld.value("kind") == "weight"),
                     key=lambda ld: (first_use(ld), ld.value("transfer_id")))
    inputs = sorted((ld for ld in loads if ld.value("kind") == "fmap"
                     and not ld.ints_of("related_ifmap")),
                    key=lambda ld: (first_use(ld), ld.value("transfer_id")))
    order = [ld.value("transfer_id") for ld in weights + inputs]
    reloads: dict[int, list[int]] = {}
    for load in loads:
        if load.value("kind") == "fmap" and load.ints_of("related_ifmap"):
            reloads.setdefault(first_use(load), []).append(load.value("transfer_id"))
    for i, wl in enumerate(workloads):
        order += sorted(reloads.get(i, []))
        order += [ofmap.value("transfer_id") for ofmap in wl.ofmaps]
    return order


def _renumber(attr, mapping: dict[int, int]):
    if isinstance(attr, IntegerAttr):
        return gemini.int_attr(mapping.get(attr.value.data, attr.value.data))
    if isinstance(attr, DenseArrayBase):
        return gemini.ints_attr(mapping.get(v, v) for v in gemini.ints(attr))
    return attr


def renumber(schedule: gemini.ScheduleOp, mapping: dict[int, int]) -> None:
    id_fields = ("transfer_id", "related_ifmap", "related_ofmap")
    # One new attribute per distinct old one: many ops share an attribute (a block's id with
    # its store, a weight load's list with all its readers). Keyed by identity, the old
    # attribute kept alive with its new one so that no other attribute takes its id.
    renumbered: dict[int, tuple] = {}

    def new(attr):
        found = renumbered.get(id(attr))
        if found is None:
            found = renumbered[id(attr)] = (attr, _renumber(attr, mapping))
        return found[1]

    for op in walk_ops(schedule):
        if not isinstance(op, gemini.RecordOp):
            continue
        properties = op.properties
        for name in id_fields:
            if name in properties:
                properties[name] = new(properties[name])
        if isinstance(op, gemini.L2TensorOp) and op.sources:
            op.source = ArrayAttr([
                gemini.SourceAttr(*[_renumber(p, mapping) if i == 4 else p
                                    for i, p in enumerate(s.parameters)])
                for s in op.sources])
    dram = schedule.dram
    if dram is not None:
        wanted = [o for kind in (gemini.DramStoreOp, gemini.DramLoadOp)
                  for o in sorted((o for o in dram.body.ops if isinstance(o, kind)),
                                  key=lambda o: o.value("transfer_id"))]
        if not _ends_with(dram.body.block, wanted):
            for o in wanted:
                o.detach()
                dram.body.block.add_op(o)
    for wl in schedule.workloads():
        kids = wl.grouped()
        ofmaps = sorted(kids.get(gemini.OfmapOp, []), key=lambda o: o.value("transfer_id"))
        ifmaps = kids.get(gemini.IfmapOp)
        anchor = ifmaps[-1] if ifmaps else None
        if _follow(wl.body.block, anchor, ofmaps):
            continue    # already in place: the moves below would leave every op where it is
        for o in ofmaps:
            o.detach()
            if anchor is None:
                wl.body.block.insert_op_before(o, wl.body.block.first_op) \
                    if wl.body.block.first_op else wl.append(o)
            else:
                wl.body.block.insert_op_after(o, anchor)
            anchor = o


def _ends_with(block: Block, ops: list[Operation]) -> bool:
    """Whether `ops` are the last ops of `block`, in this order."""
    op = block.last_op
    for wanted in reversed(ops):
        if op is not wanted:
            return False
        op = op.prev_op
    return True


def _follow(block: Block, anchor: Operation | None, ops: list[Operation]) -> bool:
    """Whether `ops` come right after `anchor` (at the start of `block` if None), in order."""
    op = anchor.next_op if anchor is not None else block.first_op
    for wanted in ops:
        if op is not wanted:
            return False
        op = op.next_op
    return True


@dataclass(frozen=True)
class GeminiTransferIdsPass(ModulePass):
    """Renumber transfer ids densely: weights, network inputs, then fmaps in execution order."""

    name = "gemini-transfer-ids"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        schedule = schedule_of(op, self.name)
        order = canonical_order(schedule)
        mapping = {old: new for new, old in enumerate(dict.fromkeys(order))}
        renumber(schedule, mapping)
