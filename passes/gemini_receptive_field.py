"""gemini-receptive-field: give every workload its ifmaps, weights and output transfers.

For each workload and each activation input the pass computes the receptive field of the
workload's box (stride-aware, with the padding the layer applies at the borders, recorded as
`tile_padding_tblr`). Inputs are gathered per core into L2 tensors: one per (source feature
map, consumer core, batch group), covering the union of what the core's consumers need. An
input read through views is looked up in the feature maps that hold it; a concatenation is no
copy: as in Gemini, its consumer reads each concatenated input at its channel offset, one
ifmap per input its receptive field meets (then `gemini.operand` on its ifmaps says which
activation each belongs to).

* A source produced in the same segment travels core to core: each producer workload whose box
  meets the tensor sends the intersection as one block (an `ofmap` entry with a transfer id);
  a block several consumers need is sent once to all of them (multicast destinations).
* Any other source (a network input or constant, or a layer of an earlier segment) is read from
  DRAM: one fmap load per tensor, with the consumers as destinations (a layer that runs in
  several tiles on one core, because its data does not fit L2 at once, loads one tile's box at
  a time instead: `_dram_tensors`); the producing layer's
  workloads store their outputs (DRAM "in"), and loads and stores name each other in
  related_ifmap / related_ofmap. Network outputs are stored too.
* PE layers read their weights (their K range) from DRAM: one weight load per (layer, K range)
  for all workloads that use it.

An ifmap lists the blocks that form it, in coordinates relative to its L2 tensor. Transfer ids
are provisional (creation order) until gemini-transfer-ids renumbers them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr, i64
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from dialects import dnn, gemini
from targets.gemini import model
from targets.gemini.model import Box
from targets.gemini.plan import (
    OPERAND,
    SEGMENT,
    consumers,
    error_at,
    get_int,
    graph_of,
    group_size,
    is_network_output,
    layer_table,
    pieces,
    schedule_of,
    workloads_in_order,
)

SOURCE_NAME = "gemini.from"
"""On fmap DRAM loads: the name of the layer or network input whose data they read."""


def value_name(value: SSAValue) -> str:
    owner = value.owner
    return owner.input_name.data if isinstance(owner, dnn.InputOp) else owner.layer_name.data


@dataclass
class Need:
    consumer: gemini.WorkloadOp
    index: tuple[int, int]
    """(activation, piece of it): a concatenated activation comes in pieces."""
    box: Box


class Destinations:
    """The destinations each transfer collects while the pass wires the schedule, written to
    the ops once at the end (rebuilding an op's array for every new consumer is quadratic in
    the consumers of a multicast block). The ops are the pass's own, made without
    destinations; a destination is known by a plain key (core, workload, layer name), cheaper
    to hash than the attribute, which hashes all its parameters."""

    def __init__(self) -> None:
        self._found: dict[gemini.RecordOp, dict[tuple, gemini.DestinationAttr]] = {}

    def add(self, op: gemini.RecordOp, key: tuple, dest: gemini.DestinationAttr) -> None:
        found = self._found.get(op)
        if found is None:
            found = self._found[op] = {}
        found.setdefault(key, dest)

    def write(self) -> None:
        for op, found in self._found.items():
            op.destination = ArrayAttr(list(found.values()))


NO_DESTINATIONS = ArrayAttr([])
"""What a new transfer lists until `Destinations.write` (one attribute: they are immutable)."""

DRAM_KEY = (-1, None, None)
"""The key of the DRAM destination in `Destinations` (no core has id -1)."""


@dataclass
class Wiring:
    """The transfers being built for one schedule."""

    schedule: gemini.ScheduleOp
    layers: dict[str, dnn.LayerOp]
    next_id: int = 0
    blocks: dict[tuple, tuple[gemini.OfmapOp, int]] = field(default_factory=dict)
    weight_loads: dict[tuple, tuple[gemini.DramLoadOp, int]] = field(default_factory=dict)
    fmap_loads: list[tuple[gemini.DramLoadOp, SSAValue, Box]] = field(default_factory=list)
    stores: dict[str, list[gemini.DramStoreOp]] = field(default_factory=lambda: defaultdict(list))
    destinations: Destinations = field(default_factory=Destinations)
    boxes: dict[gemini.WorkloadOp, Box] = field(default_factory=dict)
    dests: dict[tuple, tuple[tuple, gemini.DestinationAttr]] = field(default_factory=dict)
    facts: dict[str, tuple[tuple, list[SSAValue], int]] = field(default_factory=dict)
    producers: dict[tuple, list] = field(default_factory=dict)

    def box_of(self, wl: gemini.WorkloadOp) -> Box:
        """`wl.box`, unpacked once per workload: this pass never changes a workload's box, and
        the callers only read the lists (each source workload is met once per tensor read)."""
        box = self.boxes.get(wl)
        if box is None:
            box = self.boxes[wl] = wl.box
        return box

    def core_dest(self, wl: gemini.WorkloadOp, with_layer: bool = False,
                  ) -> tuple[tuple, gemini.DestinationAttr]:
        """`wl` as a destination (its key for `Destinations`, the attribute), made once per
        workload: a workload reads blocks of several producers and several blocks of each."""
        found = self.dests.get((wl, with_layer))
        if found is None:
            key = (wl.core.id, wl.id, wl.layer if with_layer else None)
            found = self.dests[(wl, with_layer)] = (key, gemini.DestinationAttr.core(*key))
        return found

    def sources(self, by_layer_group: dict, key: tuple[str, int],
                ) -> list[tuple[gemini.WorkloadOp, Box]]:
        """The workloads of (layer, batch group) `key` with their boxes, listed once per key:
        each is met once per tensor its layer's readers gather on a core."""
        found = self.producers.get(key)
        if found is None:
            found = self.producers[key] = [(wl, self.box_of(wl)) for wl in by_layer_group[key]]
        return found

    def layer_facts(self, layer: dnn.LayerOp) -> tuple[tuple, list[SSAValue], int]:
        """`model.input_facts(layer)`, its activations and its segment, read once per layer
        (the layers do not change here)."""
        found = self.facts.get(layer.name_)
        if found is None:
            found = self.facts[layer.name_] = (model.input_facts(layer), layer.activations,
                                               get_int(layer, SEGMENT, 0))
        return found

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    @property
    def dram(self) -> gemini.DramOp:
        return self.schedule.dram

    def block(self, producer: gemini.WorkloadOp, box: Box) -> tuple[gemini.OfmapOp, int]:
        """The ofmap entry that sends `box` (absolute) of `producer`'s output, and its
        transfer id."""
        key = (producer, tuple(box[0]), tuple(box[1]))
        found = self.blocks.get(key)
        if found is None:
            layer = self.layers[producer.layer]
            lower, upper = model.relative(box, self.box_of(producer))
            tid = self.new_id()
            op = gemini.OfmapOp.build(
                lower=gemini.ints_attr(lower), upper=gemini.ints_attr(upper),
                size=gemini.int_attr(model.fmap_bytes(box, layer.out_type.bits)),
                transfer_id=gemini.int_attr(tid), destination=NO_DESTINATIONS)
            producer.append(op)
            found = self.blocks[key] = (op, tid)
        return found


@dataclass(frozen=True)
class GeminiReceptiveFieldPass(ModulePass):
    """Ifmap boxes with padding, core-to-core blocks, DRAM loads/stores and weight loads."""

    name = "gemini-receptive-field"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        graph = graph_of(op, self.name)
        schedule = schedule_of(op, self.name)
        wiring = Wiring(schedule, layer_table(graph))
        workloads = workloads_in_order(schedule)
        if any(wl.ifmaps or wl.ofmaps for wl in workloads):
            raise error_at(schedule, "the schedule already has transfers")
        by_layer_group: dict[tuple[str, int], list[gemini.WorkloadOp]] = defaultdict(list)
        groups: dict[gemini.WorkloadOp, int] = {}
        sizes: dict[str, int] = {}    # `group_size` per layer, read once
        for wl in workloads:
            name = wl.layer
            size = sizes.get(name)
            if size is None:
                size = sizes[name] = group_size(wiring.layers[name])
            # `group_of(layer, box)`
            group = groups[wl] = wiring.box_of(wl)[0][0] // size
            by_layer_group[(name, group)].append(wl)
        needs: dict[tuple, list[Need]] = defaultdict(list)
        for wl in workloads:
            layer = wiring.layers[wl.layer]
            wl.tile_padding_tblr = gemini.ints_attr(self._needs(wiring, wl, layer, groups[wl],
                                                                needs))
        ifmaps: dict[gemini.WorkloadOp, dict[int, gemini.IfmapOp]] = defaultdict(dict)
        for (value, _core, _segment, group), wanted in needs.items():
            self._wire_tensor(wiring, value, group, wanted, by_layer_group, ifmaps)
        for wl in workloads:
            ordered = [ifmaps[wl][i] for i in sorted(ifmaps[wl])]
            if any(piece for _, piece in ifmaps[wl]):   # a concatenated input, in pieces
                for (index, _), ifmap in sorted(ifmaps[wl].items()):
                    ifmap.attributes[OPERAND] = IntegerAttr(index, i64)
            for ifmap in reversed(ordered):
                wl.body.block.insert_op_before(ifmap, wl.body.block.first_op) \
                    if wl.body.block.first_op else wl.append(ifmap)
            self._weights(wiring, wl)
        self._stores(wiring, graph, by_layer_group)
        wiring.destinations.write()
        self._relate(wiring)

    # -- inputs -------------------------------------------------------------------------------

    def _needs(self, wiring: Wiring, wl: gemini.WorkloadOp, layer: dnn.LayerOp, group: int,
               needs: dict) -> list[int]:
        padding = [0, 0, 0, 0]
        facts, activations, segment = wiring.layer_facts(layer)
        out = wiring.box_of(wl)
        core = wl.core.id
        for index, value in enumerate(activations):
            box, pad = model.input_box(layer, index, out, facts)
            # Through views, the boxes of the sources that hold it: several through a
            # concatenation (one ifmap per input the box meets, at its channel offset).
            found = pieces(value, box)
            if index == 0:
                padding = pad if all(exact for _, _, exact in found) else [0, 0, 0, 0]
            for piece, (src, src_box, _) in enumerate(found):
                needs[(src, core, segment, group)].append(Need(wl, (index, piece), src_box))
        return padding

    def _wire_tensor(self, wiring: Wiring, value: SSAValue, group: int, wanted: list[Need],
                     by_layer_group: dict, ifmaps: dict) -> None:
        tensor = wanted[0].box
        for need in wanted[1:]:
            tensor = model.union(tensor, need.box)
        ftype = dnn.fmap(value)
        producer = value.owner
        consumer_layer = wiring.layers[wanted[0].consumer.layer]
        on_chip = isinstance(producer, dnn.LayerOp) and \
            get_int(producer, SEGMENT) == get_int(consumer_layer, SEGMENT)
        if on_chip:
            # Per block, the readers it meets (found once: each reader lists them in turn).
            blocks = []
            for source_wl, box in wiring.sources(by_layer_group, (producer.name_, group)):
                piece = model.intersect(tensor, box)
                if piece is None:
                    continue
                # The tensor bounds what the core's readers need; a corner of it that no
                # reader needs (readers of different channels of a concatenated map and
                # different rows) is not sent.
                readers = {i for i, need in enumerate(wanted) if model.meets(piece, need.box)}
                if readers:
                    blocks.append((readers, wiring.block(source_wl, piece)))
            for i, need in enumerate(wanted):
                key, dest = wiring.core_dest(need.consumer)
                ids = []
                for readers, (block, tid) in blocks:
                    if i in readers:
                        wiring.destinations.add(block, key, dest)
                        ids.append(tid)
                ifmaps[need.consumer][need.index] = _ifmap(need, tensor, ids, ftype)
            return
        pieces = _dram_tensors(tensor, wanted)
        if len(pieces) > 1:     # each piece is one box, loaded as such by the call below
            for _, readers in pieces:
                self._wire_tensor(wiring, value, group, readers, by_layer_group, ifmaps)
            return
        tid = wiring.new_id()
        load = gemini.DramLoadOp.build(
            kind=StringAttr("fmap"), transfer_id=gemini.int_attr(tid),
            lower=gemini.ints_attr(tensor[0]), upper=gemini.ints_attr(tensor[1]),
            size=gemini.int_attr(model.fmap_bytes(tensor, ftype.bits)),
            related_ifmap=gemini.ints_attr([]), destination=ArrayAttr([]))
        load.attributes[SOURCE_NAME] = StringAttr(value_name(value))
        wiring.dram.body.block.add_op(load)
        wiring.fmap_loads.append((load, value, tensor))
        for need in wanted:
            wiring.destinations.add(load, *wiring.core_dest(need.consumer, with_layer=True))
            ifmaps[need.consumer][need.index] = _ifmap(need, tensor, [tid], ftype)

    # -- weights, stores ----------------------------------------------------------------------

    def _weights(self, wiring: Wiring, wl: gemini.WorkloadOp) -> None:
        layer = wiring.layers[wl.layer]
        geometry = model.weight_geometry(layer)
        if geometry is None:
            return
        _, c, rs = geometry
        box = wiring.box_of(wl)
        k0, k1 = box[0][1], box[1][1]
        key = (layer.name_, k0, k1)
        found = wiring.weight_loads.get(key)
        lower, upper = [0, k0, 0, 0], [0, k1, c - 1, rs - 1]
        size = model.weight_bytes(layer, k1 - k0 + 1)
        if found is None:
            tid = wiring.new_id()
            load = gemini.DramLoadOp.build(
                kind=StringAttr("weight"), transfer_id=gemini.int_attr(tid),
                lower=gemini.ints_attr(lower), upper=gemini.ints_attr(upper),
                size=gemini.int_attr(size), related_ifmap=gemini.ints_attr([]),
                destination=ArrayAttr([]))
            wiring.dram.body.block.add_op(load)
            found = wiring.weight_loads[key] = (load, tid)
        load, tid = found
        wiring.destinations.add(load, *wiring.core_dest(wl, with_layer=True))
        wl.append(gemini.WeightOp.build(
            lower=gemini.ints_attr(lower), upper=gemini.ints_attr(upper),
            size=gemini.int_attr(size), transfer_id=gemini.ints_attr([tid])))

    def _stores(self, wiring: Wiring, graph: dnn.GraphOp, by_layer_group: dict) -> None:
        """Layers read by a later segment, and network outputs, store every part to DRAM."""
        # Each layer's workloads by batch group (stable: a group's in listing order), sorted
        # once: sorting every layer's groups per storing layer was quadratic in the layers.
        by_name: dict[str, list[gemini.WorkloadOp]] = defaultdict(list)
        for (name, _), wls in sorted(by_layer_group.items(), key=lambda kv: kv[0][1]):
            by_name[name].extend(wls)
        for layer in wiring.layers.values():
            if isinstance(layer, dnn.VIEW_CLASSES) or layer.LAYER_TYPE is None:
                continue
            segment = get_int(layer, SEGMENT)
            later = any(get_int(c, SEGMENT) != segment for c, _ in consumers(layer))
            if not (later or is_network_output(layer)):
                continue
            for wl in by_name.get(layer.name_, ()):
                box = wiring.box_of(wl)
                block, tid = wiring.block(wl, box)
                wiring.destinations.add(block, DRAM_KEY, gemini.DestinationAttr.dram())
                store = gemini.DramStoreOp.build(
                    core_id=gemini.int_attr(wl.core.id), layer_name=StringAttr(layer.name_),
                    workload_id=gemini.int_attr(wl.id), transfer_id=gemini.int_attr(tid),
                    lower=gemini.ints_attr(box[0]), upper=gemini.ints_attr(box[1]),
                    related_ofmap=gemini.ints_attr([]))
                wiring.dram.body.block.add_op(store)
                wiring.stores[layer.name_].append(store)

    def _relate(self, wiring: Wiring) -> None:
        related_loads: dict[int, list[int]] = defaultdict(list)
        for load, value, box in wiring.fmap_loads:
            producer = value.owner
            if not isinstance(producer, dnn.LayerOp):
                continue
            stores = [s for s in wiring.stores.get(producer.name_, [])
                      if model.intersect((s.ints_of("lower"), s.ints_of("upper")), box)]
            if not stores:
                raise error_at(producer, f"layer '{producer.name_}' feeds a later segment but "
                                         f"stores nothing")
            ids = [s.value("transfer_id") for s in stores]
            load.related_ifmap = gemini.ints_attr(ids)
            for tid in ids:
                related_loads[tid].append(load.value("transfer_id"))
        for stores in wiring.stores.values():
            for store in stores:
                store.related_ofmap = gemini.ints_attr(
                    related_loads.get(store.value("transfer_id"), []))


def _dram_tensors(union: Box, wanted: list[Need]) -> list[tuple[Box, list[Need]]]:
    """How a core's reads of one DRAM feature map are loaded: as one tensor covering them
    all, unless a layer reads it in tiles one after another on this core (gemini-partition
    cut the layer finer than the cores because its data does not fit L2 at once). Then, as
    Gemini reloads a map in spatial tiles, each distinct box is loaded on its own, for the
    workloads that read exactly it, and lives only while they run."""
    boxes: dict[str, set[tuple]] = defaultdict(set)
    for need in wanted:
        boxes[need.consumer.layer].add((tuple(need.box[0]), tuple(need.box[1])))
    if all(len(found) == 1 for found in boxes.values()):
        return [(union, wanted)]
    by_box: dict[tuple, list[Need]] = defaultdict(list)
    for need in wanted:
        by_box[(tuple(need.box[0]), tuple(need.box[1]))].append(need)
    return [((list(lower), list(upper)), readers) for (lower, upper), readers in by_box.items()]


def _ifmap(need: Need, tensor: Box, ids: list[int], ftype: dnn.FmapType) -> gemini.IfmapOp:
    lower, upper = model.relative(need.box, tensor)
    return gemini.IfmapOp.build(
        align=gemini.int_attr(model.channel_align(ftype.bits)),
        bitwidth=gemini.int_attr(ftype.bits), lower=gemini.ints_attr(lower),
        upper=gemini.ints_attr(upper), size=gemini.int_attr(model.fmap_bytes(need.box,
                                                                             ftype.bits)),
        transfer_id=gemini.ints_attr(ids))
