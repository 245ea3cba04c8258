"""Translation validation against the input: the model a lowering carries computes what the
model that came in computes, decided symbolically.

`plan_check` proves that a plan's runtime order realises the value flow of the model the plan
carries; this module proves that carried model equal to the input model, so that a pass that
rewrote the graph wrongly (operands swapped, a split-K part dropped, an operator wired to the
wrong producer, an activation changed) cannot reach a file. Together they are a proof of the
plan against its input.

Both graphs are turned into canonical expressions in one hash-consing table (`Canon`), in
time linear in their operators (no element, tile or task is enumerated):

* a buffer's content is a *state*: `("fresh", buffer)` before anything writes it, or
  `("w", previous state, layout, value)` after an operator writes `value` through a tensor
  of that layout. A view (`ark.view`, or a virtual operator of the input model, which
  `ark-compress` turns into one) has the state of its source: it only reinterprets bytes.
  States are kept canonical: a write whose bytes cover an earlier one's replaces it
  (`Write(Write(S, L, x), L, y)` is `Write(S, L, y)`, which is how split-K's in-place sums
  read), and writes of disjoint bytes, which commute, stand in one order (a plan may run the
  heads of an attention block in another order than the model lists them).
* what an operator reads through a tensor of layout L from state S is a *value*: the value
  written through exactly L when nothing overlapping was written since; `("in", S, L)` when
  no write touches L's bytes; otherwise `("read", L, the writes that touch L's bytes, newest
  first, base)`, where writes of disjoint bytes are left out (they cannot be seen) and the
  base is the state below them, or none when they cover L's bytes together (a slice of a
  written tensor, a concatenation, a reshape of a result: whatever the buffer held before,
  memory reuse may change it, and it is never seen). A read looks at most `MAX_WALK` writes
  back.
* an operator's result i is `("op", type, arguments, i, (dtype, shape), values read)`:
  everything that changes the value (the type, its arguments, the result's element type and
  shape), nothing that does not (name, node, TaskInfo, Config, tensor and buffer ids: memory
  reuse moves tensors between buffers and never changes a layout). The two values of an
  operator that commutes exactly (`COMMUTATIVE`) stand in one order, so that `add(b, a)`
  is `add(a, b)`; messages show them as the operator that first computed the value wrote
  them.

Layouts are compared as (data type, shape, strides, offsets), never by buffer; a state's
buffer id matters only where the program reads bytes nothing wrote (the user's inputs, whose
buffers memory planning keeps).

The one rewrite of planc's planners that changes the expressions is normalised: split-K
(`sched-partition`) replaces `matmul(A, B)` by matmuls of K slices of A and B summed by a chain
of adds. An `add` of two matmuls of the same transposes and result, whose operands are
adjacent K slices of the same two values, aligned alike (the part's A slice and B slice start
at the same K), is the matmul of the joined slices; when the parts cover the whole K, the
joined slices are the operands themselves and the expression is the input's. A K range summed
twice, a part left out or parts misaligned stay an add of matmuls, and differ.

What the user gets is compared: each final output (a result nothing uses whose bytes still
hold it at the end, as `model_outputs.final_outputs` has it), keyed by its buffer and layout,
must be the same expression, and the communication operators (what other ranks see) the same
multiset. A difference is reported at the first place the two expressions part, naming the
operators on both sides.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from xdsl.ir import Operation

from dialects import ark
from dialects.utils import op_list, walk_ops
from targets.ark.byte_regions import ByteRegion, covered_by_union, covers, overlaps
from targets.ark.tensor_layouts import layout_of

MAX_WALK = 256
"""The most writes a read walks back over, and a write sinks below, to find or order the
writes of its bytes (a long concatenation into one buffer); beyond it the state stays as it
stands, the same on both sides when their writes come in the same order."""

MAX_FINDINGS = 5
"""Differences reported (each output that differs is one)."""

MAX_DESCRIBE = 3
"""Depth of an expression a message shows."""


COMMUTATIVE = frozenset({ark.AddOp, ark.MulOp})
"""The operators whose two operands may stand in either order: IEEE addition and
multiplication commute bit for bit (`a + b` and `b + a` round the same exact sum), ARK's
binary operators read both operands in one data type (`BinaryOp`'s verifier), and the output
shape is the output tensor's, the broadcast of both shapes whichever comes first. The one bit
pattern that may differ is which NaN's payload a sum or product of two NaNs carries, which
neither ARK's kernels nor planc's interpreter define (a NaN is a NaN). `sub`, `div` and
`rope` (whose complex product pairs its operands' halves in a fixed order, and whose kernel
may fuse a multiply into the add) do not commute; ARK has no elementwise `max` or `min`."""

_COMMUTATIVE_TYPES = frozenset(cls.TYPE for cls in COMMUTATIVE)

_CACHE = "_planc_equivalence"
"""Where a tensor type keeps its (buffer attribute, table, `Canon.tensor`)."""


class Canon:
    """The hash-consing table both sides share: equal keys get equal ids, so two expressions
    are equal exactly when their ids are. Keys are tuples of ids, strings and layouts' ids."""

    def __init__(self) -> None:
        self.ids: dict[tuple, int] = {}
        self.keys: list[tuple] = []
        self.layout_ids: dict[tuple, int] = {}
        self.layouts: list[tuple] = []
        """(data type, shape, strides, offsets) per layout id."""
        self._regions: dict[int, ByteRegion] = {}
        self._by_layout: dict[int, tuple[Any, int]] = {}
        self._arguments: dict[tuple, tuple[tuple, tuple]] = {}
        self.written: dict[int, tuple[int, ...]] = {}
        """The operands of a commutative operator's value, in the order the operator that
        first computed it wrote them, where that is not the key's (for messages)."""

    def node(self, key: tuple) -> int:
        found = self.ids.get(key)
        if found is None:
            found = self.ids[key] = len(self.keys)
            self.keys.append(key)
        return found

    def layout_id(self, tensor: ark.TensorType) -> int:
        """The id of `tensor`'s layout (its data type, shape, strides and offsets)."""
        layout = tensor.__dict__.get("_planc_pass_layout") or layout_of(tensor)
        found = self._by_layout.get(id(layout))
        if found is not None and found[0] is layout:
            return found[1]
        lid = self.intern_layout((layout.data_type, layout.shape, layout.strides,
                                  layout.offsets))
        self._by_layout[id(layout)] = (layout, lid)     # (kept alive: ids stay unique)
        return lid

    def arguments(self, op: ark.ArkOp, properties: dict, names: tuple[str, ...]) -> tuple:
        """The arguments of `op` as a key (`arg_attrs`, by value), interned by the identity
        of its argument attributes `names` (operators of a model share them when equal)."""
        held = tuple(properties.get(name) for name in names)
        ids = tuple(map(id, held))
        found = self._arguments.get(ids)
        if found is not None and found[0] == held:
            return found[1]
        key = tuple((k, _arg(v)) for k, v in op.arg_attrs().items())
        self._arguments[ids] = (held, key)     # (kept alive: ids stay unique)
        return key

    def tensor(self, tensor: ark.TensorType) -> tuple[int, int, tuple]:
        """(buffer id, layout id, (data type, shape)) of a tensor, kept with the tensor type
        (as its other caches) while its buffer is the one it was computed for."""
        fields = tensor.__dict__
        found = fields.get(_CACHE)
        if found is not None and found[0] is fields["buffer"] and found[1] is self:
            return found[2]
        lid = self.layout_id(tensor)
        info = (tensor.buffer.id.data, lid, self.layouts[lid][:2])
        fields[_CACHE] = (fields["buffer"], self, info)
        return info

    def intern_layout(self, key: tuple) -> int:
        found = self.layout_ids.get(key)
        if found is None:
            found = self.layout_ids[key] = len(self.layouts)
            self.layouts.append(key)
        return found

    def region(self, lid: int) -> ByteRegion:
        """The bytes of a layout, on a buffer of its own (a state is one buffer's)."""
        found = self._regions.get(lid)
        if found is None:
            dtype, shape, strides, offsets = self.layouts[lid]
            found = self._regions[lid] = ByteRegion.make(
                0, ark.DATA_TYPE_BYTES[dtype], strides, offsets, shape)
        return found


@dataclass
class Evaluation:
    """One side's expressions: final outputs by (buffer, layout id) with their tensor ids,
    communication operators, and the operator that made each value (for messages)."""

    outputs: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    """(buffer, layout id) -> (value node, tensor id)."""
    effects: Counter = field(default_factory=Counter)
    made_by: dict[int, Any] = field(default_factory=dict)
    """Value -> the first operator that computed it."""


_KINDS: dict[type, tuple[str, tuple[str, ...], bool, str | None, bool]] = {}
"""Per operator class: (type name, the properties of its typed arguments, result i is
written through write tensor i, what `operator` treats specially, its operands commute)."""


def _kind(cls: type[ark.ArkOp]) -> tuple[str, tuple[str, ...], bool, str | None, bool]:
    special = ("add" if cls is ark.AddOp else "matmul" if cls is ark.MatmulOp
               else "comm" if issubclass(cls, ark.CommOp) else None)
    names = tuple(spec.prop for spec in cls.ARGS)
    return (cls.TYPE, (*names, "extra_args") if names else (), cls.RESULT_ALIASES == "write",
            special, cls in COMMUTATIVE)


class _Evaluator:
    """Runs one graph (a model, schedule or plan block) symbolically, in its order, over
    buffers: what each operator reads is the current state of its tensors' buffers, as the
    interpreter and the runtime have it (a model may read a tensor's bytes after an in-place
    update through another of its values)."""

    def __init__(self, canon: Canon):
        self.canon = canon
        self.buffers: dict[int, int] = {}
        """Buffer id -> its current state."""
        self.matmuls: dict[int, tuple] = {}
        """Matmul value -> (arguments, result key, transposes, (state, layout) of A, of B):
        what joining split-K parts needs."""
        self.made_by: dict[int, Any] = {}
        self.effects: list[int] = []
        self.unused: list[tuple[Any, int]] = []
        """Results nothing uses, with their values: the candidates for final outputs."""

    # -- states ------------------------------------------------------------------------------

    def state(self, buffer: int) -> int:
        found = self.buffers.get(buffer)
        if found is None:
            found = self.buffers[buffer] = self.canon.node(("fresh", buffer))
        return found

    def write(self, previous: int, lid: int, value: int) -> int:
        """The state after writing `value` through layout `lid` over `previous`, canonical:
        writes it covers are dropped, and it sinks below disjoint writes of later-interned
        layouts (writes of disjoint bytes commute: a plan may run the heads of an attention
        block in another order than the model lists them), at most `MAX_WALK` deep."""
        canon = self.canon
        keys, region_of = canon.keys, canon.region
        region = region_of(lid)
        above: list[tuple[int, int]] = []
        for _ in range(MAX_WALK):
            key = keys[previous]
            if key[0] != "w":
                break
            there = key[2]
            if there == lid or covers(region, region_of(there)):
                previous = key[1]
            elif there > lid and not overlaps(region, region_of(there)):
                above.append((there, key[3]))
                previous = key[1]
            else:
                break
        state = canon.node(("w", previous, lid, value))
        for there, written in reversed(above):
            state = canon.node(("w", state, there, written))
        return state

    def read(self, state: int, lid: int) -> int:
        """The value read through layout `lid` from `state` (see the module docstring)."""
        canon = self.canon
        keys, region_of = canon.keys, canon.region
        region = region_of(lid)
        writes: list[tuple[int, int]] = []
        base: int | None = state
        for _ in range(MAX_WALK):
            key = keys[base]
            if key[0] != "w":
                break
            there = key[2]
            if there == lid and not writes:
                return key[3]
            written = region_of(there)
            if overlaps(written, region):
                writes.append((there, key[3]))
                if covers(written, region):
                    base = None     # what lies below is never seen
                    break
            base = key[1]
        if not writes:
            return canon.node(("in", base, lid))
        if base is not None:
            regions = [region_of(w) for w, _ in writes]
            if covered_by_union(region, regions) or _hulls_cover(region, regions):
                base = None
        return canon.node(("read", lid, tuple(writes), base))

    # -- operators ---------------------------------------------------------------------------

    def run(self, ops: Iterable[Operation]) -> None:
        """Run the operators (other ops are skipped: views only name bytes)."""
        arkop = ark.ArkOp
        operator = self.operator
        for op in ops:
            cls = type(op)
            if (cls is not ark.ViewOp and isinstance(op, arkop)
                    and not ((cls.IS_VIRTUAL or "virtual" in op.properties) and op.is_virtual)):
                operator(op)

    def operator(self, op: ark.ArkOp) -> None:
        # (The hot loop of the proof: one pass over every operator of both models. The
        # table's and the tensors' caches are read inline: calls are most of its cost.)
        canon, buffers, matmuls = self.canon, self.buffers, self.matmuls
        ids, keys, tensor = canon.ids, canon.keys, canon.tensor
        reads, writes = op.operand_groups()
        operands = []
        values = []
        for v in reads:
            t = v._type     # noqa: SLF001 -- `SSAValue.type` is this field, read as a property
            fields = t.__dict__
            cached = fields.get(_CACHE)
            buffer, lid, _ = (cached[2] if cached is not None and cached[1] is canon
                              and cached[0] is fields["buffer"] else tensor(t))
            state = buffers.get(buffer)
            if state is None:
                state = self.state(buffer)
            operands.append((state, lid))
            key = keys[state]     # (the commonest read: the whole tensor last written)
            values.append(key[3] if key[0] == "w" and key[2] == lid else self.read(state, lid))
        values = tuple(values)
        cls = type(op)
        kind = _KINDS.get(cls)
        if kind is None:
            kind = _KINDS[cls] = _kind(cls)
        type_name, names, written, special, commutes = kind
        # (One order for two operands that commute: the smaller id first.)
        ordered = (values[1], values[0]) if (commutes and len(values) == 2
                                             and values[0] > values[1]) else values
        properties = op.properties
        args = (canon.arguments(op, properties, names)
                if names or "extra_args" in properties else ())
        made_by = self.made_by
        for i, value in enumerate(op.results):
            t = value._type     # noqa: SLF001
            fields = t.__dict__
            cached = fields.get(_CACHE)
            out = (cached[2] if cached is not None and cached[1] is canon
                   and cached[0] is fields["buffer"] else tensor(t))[2]
            node = None
            if (special == "add" and len(values) == 2 and values[0] in matmuls
                    and values[1] in matmuls):
                node = self.joined_split_k(values, out, operands)
            if node is None:
                key = ("op", type_name, args, i, out, ordered)
                node = ids.get(key)
                if node is None:
                    node = canon.node(key)
                    made_by[node] = op
                    if ordered is not values:
                        canon.written[node] = values
                if special == "matmul" and len(operands) == 2 and i == 0:
                    matmuls[node] = (args, out, (op.trans_input, op.trans_other), *operands)
            elif node not in made_by:
                made_by[node] = op
            if value.first_use is None:
                self.unused.append((value, node))
            if written and i < len(writes):
                t = writes[i]._type     # noqa: SLF001
                fields = t.__dict__
                cached = fields.get(_CACHE)
                buffer, lid, _ = (cached[2] if cached is not None and cached[1] is canon
                                  and cached[0] is fields["buffer"] else tensor(t))
                previous = buffers.get(buffer)
                if previous is None:
                    previous = self.state(buffer)
                top = keys[previous]
                if top[0] != "w" or top[2] == lid:
                    key = ("w", top[1] if top[0] == "w" else previous, lid, node)
                    state = ids.get(key)
                    buffers[buffer] = state if state is not None else canon.node(key)
                else:
                    buffers[buffer] = self.write(previous, lid, node)
        if special == "comm":
            self.effects.append(canon.node(("op", type_name, args, -1, (), values)))

    # -- split-K -----------------------------------------------------------------------------

    def joined_split_k(self, values: tuple[int, ...], out: tuple,
                       operands: Sequence[tuple[int, int]]) -> int | None:
        """The matmul that an add of two split-K parts computes, or None (see module)."""
        first, second = self.matmuls.get(values[0]), self.matmuls.get(values[1])
        if first is None or second is None or first[:3] != second[:3] or first[1] != out:
            return None
        layouts = self.canon.layouts
        if any(layouts[layout][1] != out[1] for _, layout in operands):
            return None     # (a broadcasting add is not a sum of parts)
        joined = self._join(first, second) or self._join(second, first)
        if joined is None:
            return None
        node = self.canon.node(("op", ark.MatmulOp.TYPE, first[0], 0, out,
                                tuple(value for value, _ in joined)))
        self.matmuls.setdefault(node, (*first[:3], *(operand for _, operand in joined)))
        return node

    def _join(self, low: tuple, high: tuple) -> list[tuple[int, tuple[int, int]]] | None:
        """The operands of the matmul over `low`'s K slice then `high`'s (each: the value
        read, and (state, layout)), when they are adjacent K slices of the same bytes with
        the same alignment of A's K to B's; else None. The parts may read their slices from
        different states of the buffers (other tensors placed beside them in between, or over
        the low part's slice once it was read, or the high part's slice written after the low
        part ran): the joined slice is read from one part's state where the other part's slice
        reads there what that part read."""
        canon = self.canon
        ta, tb = low[2]
        (sa1, la1), (sb1, lb1) = low[3:]
        (sa2, la2), (sb2, lb2) = high[3:]
        a1, a2, b1, b2 = (canon.layouts[lid] for lid in (la1, la2, lb1, lb2))
        if len(a1[1]) < 2 or len(b1[1]) < 2:
            return None
        ka = len(a1[1]) - (2 if ta else 1)
        kb = len(b1[1]) - (1 if tb else 2)
        if a1[3][ka] - b1[3][kb] != a2[3][ka] - b2[3][kb]:
            return None     # the parts pair A's K with B's K differently
        found = []
        for s1, l1, lid1, s2, l2, lid2, axis in ((sa1, a1, la1, sa2, a2, la2, ka),
                                                 (sb1, b1, lb1, sb2, b2, lb2, kb)):
            joined = _adjacent(l1, l2, axis)
            if joined is None:
                return None
            state = s1
            if s2 != s1 and self.read(s1, lid2) != self.read(s2, lid2):
                # The high slice was written after the low part read its own (a concat's
                # second half): read both from the high part's state, if the low slice is
                # the same there.
                if self.read(s2, lid1) != self.read(s1, lid1):
                    return None     # each slice changed between the parts' reads
                state = s2
            layout = canon.intern_layout(joined)
            found.append((self.read(state, layout), (state, layout)))
        return found


def _hulls_cover(region: ByteRegion, writes: Sequence[ByteRegion]) -> bool:
    """Do dense writes hold every byte of `region` (its hull, whatever its shape)? What
    `covered_by_union` cannot decide for writes and a read of different grids (slices of a
    tensor read through a reshape)."""
    if not all(w.dense for w in writes):
        return False
    lo, hi = region.hull
    for start, end in sorted(w.hull for w in writes):
        if start > lo:
            return False
        lo = max(lo, end)
        if lo >= hi:
            return True
    return lo >= hi


def _adjacent(low: tuple, high: tuple, axis: int) -> tuple | None:
    """The layout of `low` then `high` along `axis`, when they are adjacent there and equal
    elsewhere; else None."""
    dtype, shape1, strides, offsets1 = low
    dtype2, shape2, strides2, offsets2 = high
    if dtype != dtype2 or strides != strides2 or len(shape1) != len(shape2):
        return None
    for d in range(len(shape1)):
        if d != axis and (shape1[d] != shape2[d] or offsets1[d] != offsets2[d]):
            return None
    if offsets1[axis] + shape1[axis] != offsets2[axis]:
        return None
    shape = list(shape1)
    shape[axis] += shape2[axis]
    return (dtype, tuple(shape), strides, offsets1)


# ---------------------------------------------------------------------------------------------
# The two sides
# ---------------------------------------------------------------------------------------------


def graph_ops(root: Operation) -> list[Operation]:
    """The operators of a model, schedule or plan, in the order they run: a model's (or a
    schedule's before it has phases) in block order; a plan's by the first task group of
    their TaskInfo (processor groups in order, their resource groups, their task groups:
    what runs concurrently is independent, `plan_check` proves), a partitioned schedule's by
    its phases' launches, in block order within a TaskInfo or kernel; a Tenstorrent plans
    document's (`tt.plans`: a copy of each operator in its kernel, on views of the model's
    buffers) in kernel order, the order they run. Operators of a TaskInfo no task group runs
    do not run."""
    from dialects import plan, sched

    if not hasattr(root, "graph"):  # a Tenstorrent plans document: its kernels' operators
        return [op for op in root.walk() if isinstance(op, ark.ArkOp)]
    ops = op_list(root.graph)
    if not isinstance(root, (plan.PlanOp, sched.ScheduleOp)):
        return ops
    # Each TaskInfo's (or kernel's) operators in block order; then the TaskInfos by their
    # first launch: the operators sorted by (that launch, block position), without sorting.
    by_task: dict[int, list[Operation]] = {}
    tasks: list[int] = []
    arkop, group = ark.ArkOp, plan.ProcessorGroupOp
    is_ark: dict[type, bool] = {}
    for op in ops:
        task = op.properties.get("task")
        cls = type(op)
        if task is None:
            if cls is group:    # (its task groups, in order: those of its resource groups)
                tasks += [tg.task for tg in walk_ops(op) if type(tg) is plan.TaskGroupOp]
            continue
        found = is_ark.get(cls)
        if found is None:   # (one isinstance per class: ArkOp's is an ABC check)
            found = is_ark[cls] = issubclass(cls, arkop)
        if found:
            listed = by_task.get(task.value.data)
            if listed is None:
                listed = by_task[task.value.data] = []
            listed.append(op)
    if isinstance(root, sched.ScheduleOp):
        tasks = [launch.kernel_id for phase in root.phases() for launch in phase.launches()]
        if not tasks:
            return ops
    return [op for task in dict.fromkeys(tasks) for op in by_task.get(task, ())]


def evaluate(ops: Sequence[Operation], canon: Canon,
             read_at: Iterable[tuple[int, int]] = ()) -> Evaluation:
    """The canonical expressions of a graph's final outputs and communication. The final
    outputs are `model_outputs.final_outputs` decided on the buffers' final states: the
    results nothing uses whose value their buffer still holds at the end. `read_at` adds
    what the bytes of these (buffer, layout id) hold at the end, where anything wrote them
    (a plan file read back links its tensors by id, so a result the model leaves unused may
    have a use there: what counts is what the user finds in the output's bytes)."""
    evaluator = _Evaluator(canon)
    evaluator.run(ops)
    found = Evaluation(effects=Counter(evaluator.effects), made_by=evaluator.made_by)
    tensor = canon.tensor
    for value, node in evaluator.unused:
        buffer, lid, _ = tensor(value.type)
        if evaluator.read(evaluator.state(buffer), lid) == node:
            found.outputs[(buffer, lid)] = (node, value.type.tensor_id)
    for buffer, lid in read_at:
        if (buffer, lid) not in found.outputs:
            node = evaluator.read(evaluator.state(buffer), lid)
            if canon.keys[node][0] != "in":     # (nothing wrote those bytes)
                found.outputs[(buffer, lid)] = (node, -1)
    return found


@dataclass
class Snapshot:
    """What the pass pipeline started from: the input's expressions, per model in module
    order, in the table the product's will join."""

    canon: Canon
    models: list[Evaluation]
    seconds: float = 0.0
    """CPU seconds the snapshot took (for `planc -v` and the benchmarks)."""


def snapshot(roots: Sequence[Operation]) -> Snapshot:
    start = time.process_time()
    canon = Canon()
    taken = Snapshot(canon, [evaluate(graph_ops(root), canon) for root in roots])
    taken.seconds = time.process_time() - start
    return taken


def compare(before: Snapshot, roots: Sequence[Operation]) -> list[str]:
    """The differences between the snapshot's models and `roots` (the product, one per
    model), as messages; [] when every output and communication is the same expression."""
    return [d.message for d in differences(before, roots)]


@dataclass(frozen=True)
class Difference:
    """One way the product differs from the input: the message, and the product's operator
    at the place the expressions part (None where the product computes no such value)."""

    message: str
    op: Operation | None = None
    tensor_id: int | None = None
    """The input's output tensor that differs (None for communication)."""


SIDES = ("the input", "the product")
"""What messages call the two sides: translation validation's words."""


def differences(before: Snapshot, roots: Sequence[Operation],
                sides: tuple[str, str] = SIDES, *, apart: bool = False,
                names: dict[int, str] | None = None) -> list[Difference]:
    """`compare`'s differences with the product's operator where each is (`planc check
    --model` reports it at that operator's JSON path); `sides` names the two in messages.

    `apart`: the product was not made from the input but given with it (a plan file checked
    against a model): its outputs are what the input's outputs' bytes hold at the end, and
    messages name the input's outputs (by `names`, tensor id -> the user's name, where it
    has one), say what the product computes where it computes none of an output's bytes and
    where a sum of split-K parts breaks. Translation validation's products are the input's
    own IR, whose unused results are the input's, and its messages (the pass at fault is
    their place) stay as they were."""
    if len(roots) != len(before.models):
        return [Difference(f"{sides[0]} had {len(before.models)} model(s), {sides[1]} has "
                           f"{len(roots)}")]
    problems: list[Difference] = []
    for model, root in zip(before.models, roots, strict=True):
        product = evaluate(graph_ops(root), before.canon, model.outputs if apart else ())
        problems += _differences(before.canon, model, product, sides,
                                 (names or {}) if apart else None)
    return problems


def _differences(canon: Canon, model: Evaluation, product: Evaluation,
                 sides: tuple[str, str], names: dict[int, str] | None) -> list[Difference]:
    """`names` is None for translation validation, else the input's output names."""
    problems = []
    # (The product's values the input computed too were first made by the input's operators.)
    both = Evaluation(made_by={**model.made_by, **product.made_by})
    extra = [key for key in product.outputs if key not in model.outputs]
    missing = [key for key in model.outputs if key not in product.outputs]
    if names is not None and missing and len(missing) == len(model.outputs):
        # (None of them: one line says so, not one per output.)
        return [_not_computed(canon, missing, extra, model, product, sides, names)]
    for key, (node, tensor_id) in model.outputs.items():
        dtype, shape = canon.layouts[key[1]][:2]
        where = f"output tensor {tensor_id} ({dtype} {list(shape)} on buffer {key[0]})"
        if names is not None and tensor_id in names:
            where = f"{sides[0]}'s output '{names[tensor_id]}': {where}"
        made = product.outputs.get(key)
        if made is None:
            problems.append(
                Difference(f"{where}: {sides[1]} computes no such output",
                           _output_op(key, extra, product), tensor_id) if names is None
                else _not_computed(canon, [key], extra, model, product, sides, names))
        elif made[0] != node:
            message, right = _first_difference(canon, node, made[0], model, both, sides,
                                               names is not None)
            problems.append(Difference(f"{where}: {message}",
                                       _maker(canon, product, right)
                                       or _maker(canon, product, made[0]), tensor_id))
        if len(problems) >= MAX_FINDINGS:
            return problems
    if model.effects != product.effects:
        lost = list((model.effects - product.effects).elements())
        added = list((product.effects - model.effects).elements())
        # (two levels: the communicating operator and what it sends or receives into)
        parts = ([f"{sides[0]}'s {_describe(canon, n, model, 2)} is missing{_more(lost)}"
                  for n in lost[:1]]
                 + [f"{_describe(canon, n, product, 2)} is not {sides[0]}'s{_more(added)}"
                    for n in added[:1]])
        problems.append(Difference(f"communication differs: {'; '.join(parts)}",
                                   product.made_by.get(added[0]) if added else None))
    return problems


def _more(listed: list) -> str:
    return f" (and {len(listed) - 1} more)" if len(listed) > 1 else ""


def _maker(canon: Canon, side: Evaluation, node: int) -> Operation | None:
    """The operator of `side` that computed `node`, or for a read of several writes (a
    slice or reshape of what operators wrote) the newest writer's."""
    found = side.made_by.get(node)
    key = canon.keys[node]
    if found is None and key[0] == "read":
        found = next((side.made_by[v] for _, v in key[2] if v in side.made_by), None)
    return found


def _not_computed(canon: Canon, missing: list[tuple[int, int]], extra: list[tuple[int, int]],
                  model: Evaluation, product: Evaluation, sides: tuple[str, str],
                  names: dict[int, str]) -> Difference:
    """The product computes none of the bytes of the input's outputs `missing` (nothing it
    runs writes them: a read of any would be an output): what it computes instead, its
    outputs on the same buffer (a shape changed) or else all it has (a renamed buffer, or
    a plan of another model)."""
    named = sorted(missing, key=lambda k: model.outputs[k][1] not in names)  # (names first)
    shown = [_output(canon, key, model, names) for key in named[:3]]
    more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
    if len(missing) == 1:
        head = f"{sides[1]} does not compute {sides[0]}'s output {shown[0]}: it writes none " \
               "of its bytes"
    else:
        head = (f"{sides[1]} computes none of {sides[0]}'s {len(missing)} outputs "
                f"({', '.join(shown)}{more}): it writes none of their bytes")
    same = [k for k in extra if len(missing) == 1 and k[0] == missing[0][0]]
    instead = [_output(canon, k, product, {}) for k in (same or extra)[:3]]
    if instead:
        more = f" and {len(extra) - 3} more" if not same and len(extra) > 3 else ""
        head += (f", and computes {', '.join(instead)}{more}"
                 f"{' on that buffer' if same else ''} instead")
    return Difference(head, _output_op(missing[0], extra, product),
                      model.outputs[missing[0]][1])


def _output(canon: Canon, key: tuple[int, int], side: Evaluation,
            names: dict[int, str]) -> str:
    """An output of `side`, as the user finds it: its name or tensor id, its layout and
    buffer, and the operator that computes it."""
    node, tensor_id = side.outputs[key]
    maker = _maker(canon, side, node)
    by = f", the result of {type(maker).TYPE} '{maker.label.data}'" if maker is not None else ""
    what = f"'{names[tensor_id]}' (tensor {tensor_id}, " if tensor_id in names \
        else f"tensor {tensor_id} ("
    return f"{what}{_layout(canon, key[1])} on buffer {key[0]}{by})"


def _output_op(key: tuple[int, int], extra: list[tuple[int, int]],
               product: Evaluation) -> Operation | None:
    """The product's operator that computes what stands in place of output `key`."""
    same = [k for k in extra if k[0] == key[0]] or extra
    return product.made_by.get(product.outputs[same[0]][0]) if same else None


def _first_difference(canon: Canon, left: int, right: int, model: Evaluation,
                      product: Evaluation, sides: tuple[str, str] = SIDES,
                      apart: bool = False) -> tuple[str, int]:
    """Where two expressions part: descend while both are the same operator applied to
    different values; `apart` (see `differences`), where the input's is a matmul and the
    product's an unjoined sum of split-K parts, on down the sum to the operator that breaks
    it. Returns the message and the product's node there."""
    keys = canon.keys
    while True:
        a, b = keys[left], keys[right]
        through = _read_apart(a, b) if apart else None
        if through is not None:
            left, right = through
            continue
        if a[0] != "op" or b[0] != "op" or a[:5] != b[:5] or len(a[5]) != len(b[5]):
            break
        x, y = _operands(canon, left), _operands(canon, right)
        differing = [(v, w) for v, w in zip(x, y, strict=True) if v != w]
        if len(differing) == 2 and a[1] in _COMMUTATIVE_TYPES:   # (written in either order)
            differing = [(v, w) for v, w in zip(x, y[::-1], strict=True) if v != w]
        below = differing[0] if len(differing) == 1 else \
            _alike(keys, x, y, differing) if apart else None
        if below is None:
            break
        left, right = below
    broken = _broken_part_sum(canon, left, right) if apart else None
    if broken is None:
        return (f"{sides[0]} computes {_describe(canon, left, model, MAX_DESCRIBE)}, "
                f"{sides[1]} {_describe(canon, right, product, MAX_DESCRIBE)}"), right
    kind = keys[broken][1]
    what = (f"a {kind} where its parts are added" if kind != ark.AddOp.TYPE else
            "an add of parts whose K slices do not join (overlapping, apart or misaligned)")
    return (f"{sides[0]} computes {_describe(canon, left, model, MAX_DESCRIBE)}, {sides[1]} "
            f"a sum of split-K parts that breaks at {what}: "
            f"{_describe(canon, broken, product, MAX_DESCRIBE)}"), broken


def _alike(keys: list[tuple], x: tuple[int, ...], y: tuple[int, ...],
           differing: list[tuple[int, int]]) -> tuple[int, int] | None:
    """Where several differing operands lead, when each is an operator (or a read of the
    same bytes) on both sides, not rearranged: one change below shows in several (the
    softmax's div reads an exp and its sum), and the first pair whose own operators differ
    (their type, arguments or result), else the first pair, leads to it. None where they
    part here (operands in another order: a swapped `sub`; other inputs)."""
    if sorted(x) == sorted(y):
        return None
    for v, w in differing:
        a, b = keys[v], keys[w]
        if not (a[0] == b[0] == "op" or _read_apart(a, b) is not None):
            return None
    return next(((v, w) for v, w in differing if keys[v][:5] != keys[w][:5]), differing[0])


def _read_apart(a: tuple, b: tuple) -> tuple[int, int] | None:
    """The first pair of written values where two reads of the same bytes differ (a slice
    or reshape of a result: the same layout over writes of the same layouts and the same
    base), else None: the place they part is below them, at an operator that wrote such a
    value (a `ScalarMul` whose factor differs, read back through a reshape)."""
    if a[0] != "read" or b[0] != "read" or a[1] != b[1] or a[3] != b[3] \
            or [w for w, _ in a[2]] != [w for w, _ in b[2]]:
        return None
    differing = [(v, w) for (_, v), (_, w) in zip(a[2], b[2], strict=True) if v != w]
    return differing[0] if differing else None


def _broken_part_sum(canon: Canon, left: int, right: int) -> int | None:
    """Where the product's sum of split-K parts stops being the input's matmul: descend its
    chain of adds through the operand that is not a (joined) matmul to the first operator
    that is not an add, or to an add of two matmuls that did not join; None where `left` is
    no matmul or `right` no add. At most `MAX_WALK` steps (one per part)."""
    keys = canon.keys
    if keys[left][:2] != ("op", ark.MatmulOp.TYPE) or keys[right][:2] != ("op", ark.AddOp.TYPE):
        return None
    for _ in range(MAX_WALK):
        key = keys[right]
        if key[0] != "op" or key[1] != ark.AddOp.TYPE:
            return right if key[0] == "op" else None
        other = [v for v in key[5] if keys[v][:2] != ("op", ark.MatmulOp.TYPE)]
        if len(other) != 1:
            return right
        right = other[0]
    return None


def _operands(canon: Canon, node: int) -> tuple[int, ...]:
    """The values an operator's `node` reads, in the order its first maker wrote them."""
    return canon.written.get(node) or canon.keys[node][5]


def _describe(canon: Canon, node: int, side: Evaluation, depth: int) -> str:
    key = canon.keys[node]
    kind = key[0]
    if kind == "op":
        op = side.made_by.get(node)
        name = f"{key[1]} '{op.label.data}'" if op is not None else key[1]
        args = "".join(f" {k}={v}" for k, v in key[2])
        inner = ", ".join(_describe(canon, v, side, depth - 1)
                          for v in _operands(canon, node)) \
            if depth > 1 else "..."
        return f"{name}{args} ({inner})" if key[5] else f"{name}{args}"
    if kind == "in":
        state = canon.keys[key[1]] if key[1] is not None else ("",)
        of = (f"input buffer {state[1]}" if state[0] == "fresh" and type(state[1]) is int
              else "bytes nothing wrote")
        return f"{of} {_layout(canon, key[2])}"
    if kind == "read":
        parts = ", ".join(_describe(canon, v, side, depth - 1) if depth > 1 else "..."
                          for _, v in key[2])
        return f"{_layout(canon, key[1])} of the writes of ({parts})"
    return kind


def _layout(canon: Canon, lid: int) -> str:
    dtype, shape, _, offsets = canon.layouts[lid]
    return f"{dtype} [{', '.join(map(str, shape))}] at {list(offsets)}"


def _arg(value: Any) -> str:
    try:
        return str(ark.arg_value(value))
    except Exception:  # noqa: BLE001 -- an extra argument of any form: as xDSL prints it
        return str(value)
