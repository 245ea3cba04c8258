"""The `mscclpp` dialect: MSCCL++ collective algorithms (execution-plan JSON) as IR.

An MSCCL++ plan describes one collective for every GPU (rank) of a group: per GPU the number of
chunks its input, output and scratch buffers are cut into, the channels it holds to its peers,
the remote buffers it reads or writes, and a list of thread blocks, each running an ordered list
of operations. The IR mirrors that nesting one to one:

    mscclpp.algorithm                 the plan (collective, protocol, in-place, limits)
      mscclpp.gpu                     one rank: chunk counts
        mscclpp.channel               memory/port channels to peers, switch channels to groups
        mscclpp.remote_buffer         a peer's buffer this rank accesses
        mscclpp.semaphore             an intra-GPU counting semaphore
        mscclpp.threadblock           channels and remote buffers it uses, then its ops
          mscclpp.put, mscclpp.wait, mscclpp.pipeline { ... }, ...

Positions are identities, as in the file: the k-th `mscclpp.gpu` is rank k, channels of one
type are numbered in order of appearance, remote buffers by position, and a thread block's own
channel and remote-buffer lists give the small tb-local indices its ops use.

Every op the executor accepts has a class here (30 names); each class states the operand forms
the executor expects (local, remote or switch buffer references, packets or plain data) and its
verifier checks them, together with every index the executor would follow: tb-local channel and
remote-buffer indices, chunk ranges against the buffer they address (on this GPU, the peer, or
every member of a switch group), semaphore and barrier ids, and the executor's fixed limits.

Fields the dialect does not model are kept in `extra`; `key_order` and `spellings` remember how
the file wrote the fields it does model (key order, legacy key names or op names), so export
reproduces the document.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    BoolAttr,
    DenseArrayBase,
    DictionaryAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Operation, ParametrizedAttribute, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove, NoTerminator
from xdsl.utils.exceptions import VerifyException

from dialects.utils import VerifyAt, parse_int, warn

# ---------------------------------------------------------------------------------------------
# Vocabulary and the executor's fixed limits
# ---------------------------------------------------------------------------------------------

BUFFER_TYPES = ("i", "o", "s")
BUFFER_NAMES = {"i": "input", "o": "output", "s": "scratch"}
CHANNEL_TYPES = ("memory", "port", "switch", "none")
PROTOCOLS = ("Simple", "LL")
COLLECTIVES = ("allreduce", "allgather", "reducescatter", "broadcast", "alltoall")
"""The collectives whose post-condition planc checks (others are free text to the executor)."""

MAX_OPERATIONS_PER_TB = 64
MAX_CHANNELS_PER_TYPE = 16
MAX_CHANNELS_PER_OP = 8
MAX_BUFFER_REFS = 10
MAX_BARRIERS = 16
MAX_SEMAPHORES_PER_OP = 16
UINT64_MAX = 2**64 - 1
MAX_THREADBLOCKS = 2048
"""The most thread blocks (over all GPUs) of a plan planc checks. The replay keeps a vector
clock per thread block, so its work grows with their square (10,000 empty thread blocks on
each of 2 GPUs ran for minutes); real plans have tens (the largest upstream file, 16)."""


def _ints(values: Sequence[int]) -> DenseArrayBase:
    return DenseArrayBase.from_list(i64, list(values))


def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


def _bool(value: bool) -> IntegerAttr:
    return IntegerAttr(int(value), i1)


def _parse_int_list(parser: AttrParser) -> list[int]:
    return parser.parse_comma_separated_list(parser.Delimiter.SQUARE, lambda: parse_int(parser))


def _print_int_list(printer: Printer, values: Sequence[int]) -> None:
    printer.print_string("[" + ", ".join(str(v) for v in values) + "]")


def _parse_optional_extra(parser: AttrParser) -> DictionaryAttr:
    if parser.parse_optional_keyword("extra") is None:
        return DictionaryAttr({})
    extra = parser.parse_attribute()
    if not isinstance(extra, DictionaryAttr):
        parser.raise_error("expected a dictionary after 'extra'")
    return extra


def _print_extra(printer: Printer, extra: DictionaryAttr) -> None:
    if extra.data:
        printer.print_string(" extra ")
        printer.print_attribute(extra)


def block_ops(region: Region) -> list[Operation]:
    """The ops of a region that may be empty (an empty `{}` parses to no block at all)."""
    return list(region.block.ops) if region.blocks else []


# ---------------------------------------------------------------------------------------------
# Attributes
# ---------------------------------------------------------------------------------------------


@irdl_attr_definition
class BufferRefAttr(ParametrizedAttribute):
    """A chunk range `[index, index + size)` of a buffer, as an op's source or destination.

    Three kinds, as in the file: a *local* buffer of this GPU (`type` i/o/s), a *remote* buffer
    (`buffer_id`: the thread block's index into its remote buffers of the op's channel type) or
    the buffer bound to a *switch* channel (`switch_channel_id`: tb-local switch channel).
    Syntax: `i[0:2]`, `remote 1[0:2]`, `switch 0[2:3]`, each optionally `extra {...}`.
    """

    name = "mscclpp.ref"

    kind: StringAttr
    buffer: StringAttr
    ref_id: IntAttr
    index: IntAttr
    size: IntAttr
    extra: DictionaryAttr

    KINDS: ClassVar[tuple[str, ...]] = ("local", "remote", "switch")

    @staticmethod
    def local(buffer: str, index: int, size: int, extra: DictionaryAttr | None = None
              ) -> BufferRefAttr:
        return BufferRefAttr(StringAttr("local"), StringAttr(buffer), IntAttr(-1), IntAttr(index),
                             IntAttr(size), extra or DictionaryAttr({}))

    @staticmethod
    def remote(buffer_id: int, index: int, size: int, extra: DictionaryAttr | None = None
               ) -> BufferRefAttr:
        return BufferRefAttr(StringAttr("remote"), StringAttr(""), IntAttr(buffer_id),
                             IntAttr(index), IntAttr(size), extra or DictionaryAttr({}))

    @staticmethod
    def switch(channel: int, index: int, size: int, extra: DictionaryAttr | None = None
               ) -> BufferRefAttr:
        return BufferRefAttr(StringAttr("switch"), StringAttr(""), IntAttr(channel),
                             IntAttr(index), IntAttr(size), extra or DictionaryAttr({}))

    @property
    def is_local(self) -> bool:
        return self.kind.data == "local"

    @property
    def is_remote(self) -> bool:
        return self.kind.data == "remote"

    @property
    def is_switch(self) -> bool:
        return self.kind.data == "switch"

    @property
    def start(self) -> int:
        return self.index.data

    @property
    def count(self) -> int:
        return self.size.data

    @property
    def end(self) -> int:
        return self.index.data + self.size.data

    def describe(self) -> str:
        rng = f"[{self.start}:{self.end}]"
        if self.is_local:
            return f"{self.buffer.data}{rng}"
        return f"{self.kind.data} {self.ref_id.data}{rng}"

    def verify(self) -> None:
        if self.kind.data not in self.KINDS:
            raise VerifyException(f"unknown buffer reference kind '{self.kind.data}'")
        if self.is_local and self.buffer.data not in BUFFER_TYPES:
            raise VerifyException(f"unknown buffer type '{self.buffer.data}' "
                                  "(expected i, o or s)")
        if not self.is_local and self.ref_id.data < 0:
            raise VerifyException(f"{self.kind.data} buffer id must be >= 0")
        if self.index.data < 0 or self.size.data < 0:
            raise VerifyException("chunk index and size must be >= 0")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return _parse_ref_body(parser)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<")
        _print_ref_body(printer, self)
        printer.print_string(">")


def _parse_ref_body(parser: AttrParser) -> tuple[Attribute, ...]:
    word = parser.parse_identifier()
    if word in ("remote", "switch"):
        ref_id = parse_int(parser)
        kind, buffer = word, ""
    elif word in BUFFER_TYPES:
        kind, buffer, ref_id = "local", word, -1
    else:
        parser.raise_error(f"expected i, o, s, remote or switch, got '{word}'")
    parser.parse_punctuation("[")
    start = parse_int(parser)
    parser.parse_punctuation(":")
    end = parse_int(parser)
    parser.parse_punctuation("]")
    extra = _parse_optional_extra(parser)
    return (StringAttr(kind), StringAttr(buffer), IntAttr(ref_id), IntAttr(start),
            IntAttr(end - start), extra)


def _print_ref_body(printer: Printer, ref: BufferRefAttr) -> None:
    printer.print_string(ref.describe())
    _print_extra(printer, ref.extra)


@irdl_attr_definition
class TbgAttr(ParametrizedAttribute):
    """`tbg_info`: this thread block does part `tb_id` of `tbg_size` equal, aligned parts of
    every buffer range of its op. Syntax: `#mscclpp.tbg<1 of 4>`."""

    name = "mscclpp.tbg"

    tb_id: IntAttr
    tbg_size: IntAttr
    extra: DictionaryAttr

    @staticmethod
    def get(tb_id: int, tbg_size: int, extra: DictionaryAttr | None = None) -> TbgAttr:
        return TbgAttr(IntAttr(tb_id), IntAttr(tbg_size), extra or DictionaryAttr({}))

    def verify(self) -> None:
        if self.tbg_size.data < 1:
            raise VerifyException(f"tbg_size must be >= 1, got {self.tbg_size.data}")
        if not 0 <= self.tb_id.data < self.tbg_size.data:
            raise VerifyException(f"tb_id {self.tb_id.data} is not in [0, tbg_size "
                                  f"{self.tbg_size.data})")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            tb_id = parse_int(parser)
            parser.parse_keyword("of")
            size = parse_int(parser)
            extra = _parse_optional_extra(parser)
        return IntAttr(tb_id), IntAttr(size), extra

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.tb_id.data} of {self.tbg_size.data}")
        _print_extra(printer, self.extra)
        printer.print_string(">")


@irdl_attr_definition
class IterContextAttr(ParametrizedAttribute):
    """A pipeline's `iter_context`: iterate over windows of `unit_size` bytes covering
    `num_chunks` chunks. Syntax: `#mscclpp.iter<unit 1048576, chunks 1>`."""

    name = "mscclpp.iter"

    unit_size: IntAttr
    num_chunks: IntAttr
    extra: DictionaryAttr

    @staticmethod
    def get(unit_size: int, num_chunks: int, extra: DictionaryAttr | None = None
            ) -> IterContextAttr:
        return IterContextAttr(IntAttr(unit_size), IntAttr(num_chunks),
                               extra or DictionaryAttr({}))

    def verify(self) -> None:
        if self.unit_size.data < 1:
            raise VerifyException(f"unit_size must be >= 1 byte, got {self.unit_size.data}")
        if self.num_chunks.data < 1:
            raise VerifyException(f"num_chunks must be >= 1, got {self.num_chunks.data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            parser.parse_keyword("unit")
            unit = parse_int(parser)
            parser.parse_punctuation(",")
            parser.parse_keyword("chunks")
            chunks = parse_int(parser)
            extra = _parse_optional_extra(parser)
        return IntAttr(unit), IntAttr(chunks), extra

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<unit {self.unit_size.data}, chunks {self.num_chunks.data}")
        _print_extra(printer, self.extra)
        printer.print_string(">")


@irdl_attr_definition
class TbChannelsAttr(ParametrizedAttribute):
    """One entry of a thread block's `channels`: GPU-level channel ids of one type, whose
    positions here are the tb-local indices its ops use. `#mscclpp.tb_channels<memory [0, 3]>`.
    """

    name = "mscclpp.tb_channels"

    channel_type: StringAttr
    ids: DenseArrayBase
    extra: DictionaryAttr

    @staticmethod
    def get(channel_type: str, ids: Sequence[int], extra: DictionaryAttr | None = None
            ) -> TbChannelsAttr:
        return TbChannelsAttr(StringAttr(channel_type), _ints(ids), extra or DictionaryAttr({}))

    @property
    def id_list(self) -> list[int]:
        return list(self.ids.get_values())

    def verify(self) -> None:
        if self.channel_type.data not in CHANNEL_TYPES:
            raise VerifyException(f"unknown channel type '{self.channel_type.data}'")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            kind = parser.parse_identifier()
            ids = _parse_int_list(parser)
            extra = _parse_optional_extra(parser)
        return StringAttr(kind), _ints(ids), extra

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.channel_type.data} ")
        _print_int_list(printer, self.id_list)
        _print_extra(printer, self.extra)
        printer.print_string(">")


@irdl_attr_definition
class TbRemoteBuffersAttr(ParametrizedAttribute):
    """One entry of a thread block's `remote_buffer_refs`: GPU-level remote buffer ids reached
    through channels of one type; positions are the `buffer_id`s of its ops' remote references.
    `#mscclpp.tb_remote<memory [0, 2]>`."""

    name = "mscclpp.tb_remote"

    access_channel_type: StringAttr
    ids: DenseArrayBase
    extra: DictionaryAttr

    @staticmethod
    def get(channel_type: str, ids: Sequence[int], extra: DictionaryAttr | None = None
            ) -> TbRemoteBuffersAttr:
        return TbRemoteBuffersAttr(StringAttr(channel_type), _ints(ids),
                                   extra or DictionaryAttr({}))

    @property
    def id_list(self) -> list[int]:
        return list(self.ids.get_values())

    def verify(self) -> None:
        if self.access_channel_type.data not in CHANNEL_TYPES:
            raise VerifyException(f"unknown channel type '{self.access_channel_type.data}'")

    parse_parameters = TbChannelsAttr.parse_parameters

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.access_channel_type.data} ")
        _print_int_list(printer, self.id_list)
        _print_extra(printer, self.extra)
        printer.print_string(">")


@irdl_attr_definition
class RankGroupAttr(ParametrizedAttribute):
    """A switch channel's rank group: the ranks one NVLS multicast binding connects.
    `#mscclpp.rank_group<size 4, [0, 1, 2, 3]>`."""

    name = "mscclpp.rank_group"

    size: IntAttr
    ranks: DenseArrayBase
    extra: DictionaryAttr

    @staticmethod
    def get(ranks: Sequence[int], size: int | None = None, extra: DictionaryAttr | None = None
            ) -> RankGroupAttr:
        return RankGroupAttr(IntAttr(len(ranks) if size is None else size), _ints(ranks),
                             extra or DictionaryAttr({}))

    @property
    def rank_list(self) -> list[int]:
        return list(self.ranks.get_values())

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            parser.parse_keyword("size")
            size = parse_int(parser)
            parser.parse_punctuation(",")
            ranks = _parse_int_list(parser)
            extra = _parse_optional_extra(parser)
        return IntAttr(size), _ints(ranks), extra

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<size {self.size.data}, ")
        _print_int_list(printer, self.rank_list)
        _print_extra(printer, self.extra)
        printer.print_string(">")


# ---------------------------------------------------------------------------------------------
# Shared pieces of the structural ops
# ---------------------------------------------------------------------------------------------


class PlanObjectOp(IRDLOperation):
    """An op that stands for one JSON object of the plan. `key_order` and `spellings` record
    how the file wrote the keys the dialect models (only when it differs from the exporter's
    default, see `frontends.mscclpp_schema`); `extra` keeps the keys it does not model."""

    key_order = opt_prop_def(ArrayAttr[StringAttr])
    spellings = opt_prop_def(DictionaryAttr)
    extra = opt_prop_def(DictionaryAttr)
    irdl_options = (ParsePropInAttrDict(),)

    def ancestor(self, kind: type[IRDLOperation]) -> IRDLOperation | None:
        """The closest enclosing op of `kind` (verifiers look at their GPU and plan)."""
        op = self.parent_op()
        while op is not None and not isinstance(op, kind):
            op = op.parent_op()
        return op


def _opt_int(attr: IntegerAttr | None) -> int | None:
    return None if attr is None else attr.value.data


# ---------------------------------------------------------------------------------------------
# The plan
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class AlgorithmOp(PlanObjectOp):
    """An MSCCL++ execution plan: one collective algorithm over all the GPUs in its body.

    `plan_name` is the file's `name` (the executor's algorithm id; absent when the file has
    null). `collective` is free text to the executor but planc checks the post-condition of
    allreduce, allgather, reducescatter, broadcast (root 0, or a top-level `root`), alltoall
    and sendrecv. `buffer_alignment`, the thread count, scratch options and the message-size
    range are stored only when the file gives them (the executor has defaults).
    """

    name = "mscclpp.algorithm"

    plan_name = opt_prop_def(StringAttr)
    collective = prop_def(StringAttr)
    protocol = prop_def(StringAttr)
    inplace = prop_def(BoolAttr)
    num_threads_per_block = opt_prop_def(IntegerAttr[I64])
    reuse_resources = opt_prop_def(BoolAttr)
    use_double_scratch_buffer = opt_prop_def(BoolAttr)
    buffer_alignment = opt_prop_def(IntegerAttr[I64])
    min_message_size = opt_prop_def(IntAttr)
    max_message_size = opt_prop_def(IntAttr)
    body = region_def()
    traits = traits_def(NoTerminator(), IsolatedFromAbove())
    assembly_format = "$collective $protocol attr-dict-with-keyword $body"

    DEFAULT_ALIGNMENT: ClassVar[int] = 16
    DEFAULT_THREADS: ClassVar[int] = 1024

    def __init__(self, name: str | None, collective: str, protocol: str, inplace: bool,
                 gpus: Sequence[GpuOp] = (), **optional: Attribute | None):
        properties: dict[str, Attribute] = {
            "collective": StringAttr(collective), "protocol": StringAttr(protocol),
            "inplace": _bool(inplace)}
        if name is not None:
            properties["plan_name"] = StringAttr(name)
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties, regions=[Region(Block(list(gpus)))])

    # -- views --------------------------------------------------------------------------------

    @property
    def name_value(self) -> str | None:
        return None if self.plan_name is None else self.plan_name.data

    @property
    def collective_name(self) -> str:
        return self.collective.data

    @property
    def protocol_name(self) -> str:
        return self.protocol.data

    @property
    def is_inplace(self) -> bool:
        return bool(self.inplace.value.data)

    @property
    def alignment(self) -> int:
        return _opt_int(self.buffer_alignment) or self.DEFAULT_ALIGNMENT

    @property
    def threads_per_block(self) -> int:
        return _opt_int(self.num_threads_per_block) or self.DEFAULT_THREADS

    @property
    def message_range(self) -> tuple[int, int]:
        low = 0 if self.min_message_size is None else self.min_message_size.data
        high = UINT64_MAX if self.max_message_size is None else self.max_message_size.data
        return low, high

    @property
    def uses_double_scratch(self) -> bool:
        attr = self.use_double_scratch_buffer
        return attr is not None and bool(attr.value.data)

    @property
    def reuses_resources(self) -> bool:
        return self.reuse_resources is not None and bool(self.reuse_resources.value.data)

    def gpus(self) -> list[GpuOp]:
        return [op for op in block_ops(self.body) if isinstance(op, GpuOp)]

    @property
    def num_ranks(self) -> int:
        return len(self.gpus())

    def verify_(self) -> None:
        if self.protocol_name not in PROTOCOLS:
            raise VerifyException(f"protocol must be \"Simple\" or \"LL\", got "
                                  f"\"{self.protocol_name}\"")
        if self.buffer_alignment is not None and self.alignment < 1:
            raise VerifyException(f"buffer_alignment must be >= 1, got {self.alignment}")
        low, high = self.message_range
        if not 0 <= low <= high <= UINT64_MAX:
            raise VerifyException(f"message size range [{low}, {high}] is not a range of "
                                  "unsigned 64-bit sizes")
        if any(not isinstance(op, GpuOp) for op in block_ops(self.body)):
            raise VerifyException("an algorithm holds only mscclpp.gpu ops")
        if not self.gpus():
            raise VerifyException("an algorithm needs at least one GPU")
        blocks = sum(len(gpu.threadblocks()) for gpu in self.gpus())
        if blocks > MAX_THREADBLOCKS:
            raise VerifyException(f"the plan has {blocks} thread blocks, more than the "
                                  f"{MAX_THREADBLOCKS} planc checks")


# ---------------------------------------------------------------------------------------------
# GPUs and their declarations
# ---------------------------------------------------------------------------------------------


@irdl_op_definition
class GpuOp(PlanObjectOp):
    """One rank of the plan: its buffers' chunk counts, and (in its body, in this order) its
    channels, remote buffers, semaphores and thread blocks. The chunk size is the input size
    over `input_chunks` (or the output size over `output_chunks` when that is 0) and applies to
    all three buffers. `semaphores_listed` is false when the file has no `semaphores` key."""

    name = "mscclpp.gpu"

    rank = prop_def(IntegerAttr[I64])
    input_chunks = prop_def(IntegerAttr[I64])
    output_chunks = prop_def(IntegerAttr[I64])
    scratch_chunks = prop_def(IntegerAttr[I64])
    semaphores_listed = prop_def(BoolAttr)
    body = region_def()
    traits = traits_def(NoTerminator())
    assembly_format = "$rank attr-dict-with-keyword $body"

    def __init__(self, rank: int, input_chunks: int, output_chunks: int, scratch_chunks: int,
                 body: Sequence[Operation] = (), *, semaphores_listed: bool = True,
                 **optional: Attribute | None):
        properties: dict[str, Attribute] = {
            "rank": _int(rank), "input_chunks": _int(input_chunks),
            "output_chunks": _int(output_chunks), "scratch_chunks": _int(scratch_chunks),
            "semaphores_listed": _bool(semaphores_listed)}
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties, regions=[Region(Block(list(body)))])

    @property
    def rank_id(self) -> int:
        return self.rank.value.data

    def chunks(self, buffer: str) -> int:
        """The chunk count of buffer `buffer` (i, o or s)."""
        attr = {"i": self.input_chunks, "o": self.output_chunks, "s": self.scratch_chunks}
        return attr[buffer].value.data

    def declarations(self) -> list[Operation]:
        """The channels, remote buffers and semaphores: the ops before the first thread
        block, where the GPU's rules put them. Every thread block's rules look these up, so
        scanning the thread blocks too made verification quadratic in them."""
        found: list[Operation] = []
        for op in (self.body.block.ops if self.body.blocks else ()):
            if isinstance(op, ThreadblockOp):
                break
            found.append(op)
        return found

    def channels(self) -> list[ChannelOp]:
        return [op for op in self.declarations() if isinstance(op, ChannelOp)]

    def channel_ends(self, channel_type: str) -> list[int]:
        """The peer of each GPU-level channel of a memory/port type, by channel id."""
        peers: list[int] = []
        for channel in self.channels():
            if channel.kind == channel_type:
                peers.extend(channel.peers)
        return peers

    def switch_groups(self) -> list[tuple[str, list[int]]]:
        """(bound buffer type, ranks) of each switch channel id (one per rank group)."""
        groups: list[tuple[str, list[int]]] = []
        for channel in self.channels():
            if channel.kind == "switch":
                groups.extend((channel.bound_buffer, g.rank_list) for g in channel.groups)
        return groups

    def remote_buffers(self) -> list[RemoteBufferOp]:
        return [op for op in self.declarations() if isinstance(op, RemoteBufferOp)]

    def semaphores(self) -> list[SemaphoreOp]:
        return [op for op in self.declarations() if isinstance(op, SemaphoreOp)]

    def threadblocks(self) -> list[ThreadblockOp]:
        return [op for op in block_ops(self.body) if isinstance(op, ThreadblockOp)]

    def algorithm(self) -> AlgorithmOp | None:
        return self.ancestor(AlgorithmOp)  # type: ignore[return-value]

    def verify_(self) -> None:
        for buffer in BUFFER_TYPES:
            if not 0 <= self.chunks(buffer) < 1 << 31:
                # The executor counts chunks in a C++ int; the JSON reader has the same bound.
                raise VerifyException(f"{BUFFER_NAMES[buffer]}_chunks must be in [0, 2^31), "
                                      f"got {self.chunks(buffer)}")
        if self.chunks("i") == 0 and self.chunks("o") == 0:
            _verify_zero_chunks(self)
        order = [_DECLARATION_ORDER.index(type(op)) for op in block_ops(self.body)
                 if type(op) in _DECLARATION_ORDER]
        if order != sorted(order) or len(order) != len(block_ops(self.body)):
            raise VerifyException("a GPU holds channels, then remote buffers, then semaphores, "
                                  "then thread blocks")
        algorithm = self.algorithm()
        if algorithm is not None:
            position = algorithm.gpus().index(self)
            if self.rank_id != position:
                raise VerifyException(f"gpu id {self.rank_id} must equal its position "
                                      f"{position} in gpus")
        for expected, tb in enumerate(self.threadblocks()):
            if tb.tb_id != expected:
                raise VerifyException(f"thread block id {tb.tb_id} must equal its position "
                                      f"{expected} in threadblocks")



def _verify_zero_chunks(gpu: GpuOp) -> None:
    """The executor derives the chunk size from `input_chunks` (or `output_chunks`): with
    both 0 an op that touches the input or output buffer has no chunk size (its offsets
    divide by zero). `planc check` also reports every zero count as the executor's
    message-size check sees it (`mscclpp.zero-chunks`, targets.mscclpp.simulator)."""
    for tb in gpu.threadblocks():
        for op in tb.ops():
            refs = [*op.sources, *op.destinations]
            if any(r.is_local and r.buffer.data in ("i", "o") for r in refs):
                raise VerifyAt("input_chunks and output_chunks are both 0, so the executor "
                               "has no chunk size for this op's input or output buffer",
                               op, rule="mscclpp.zero-chunks")

@irdl_op_definition
class ChannelOp(PlanObjectOp):
    """A GPU-level channel declaration. Memory and port channels list their peers (one
    channel per element of `connected_to`; the k-th channel from A to B pairs with the k-th
    from B to A). A switch channel binds a buffer type (`buffer_type`) of every rank of each of
    its `rank_groups` into one NVLS multicast object per group."""

    name = "mscclpp.channel"

    channel_type = prop_def(StringAttr)
    connected_to = opt_prop_def(DenseArrayBase)
    buffer_type = opt_prop_def(StringAttr)
    rank_groups = opt_prop_def(ArrayAttr[RankGroupAttr])
    assembly_format = "$channel_type attr-dict"

    def __init__(self, channel_type: str, *, peers: Sequence[int] | None = None,
                 buffer_type: str | None = None, groups: Sequence[RankGroupAttr] | None = None,
                 **optional: Attribute | None):
        properties: dict[str, Attribute] = {"channel_type": StringAttr(channel_type)}
        if peers is not None:
            properties["connected_to"] = _ints(peers)
        if buffer_type is not None:
            properties["buffer_type"] = StringAttr(buffer_type)
        if groups is not None:
            properties["rank_groups"] = ArrayAttr(list(groups))
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties)

    @property
    def kind(self) -> str:
        return self.channel_type.data

    @property
    def peers(self) -> list[int]:
        return [] if self.connected_to is None else list(self.connected_to.get_values())

    @property
    def bound_buffer(self) -> str:
        return "" if self.buffer_type is None else self.buffer_type.data

    @property
    def groups(self) -> list[RankGroupAttr]:
        return [] if self.rank_groups is None else list(self.rank_groups.data)

    def verify_(self) -> None:
        if self.kind not in CHANNEL_TYPES or self.kind == "none":
            raise VerifyException(f"channel type must be memory, port or switch, got "
                                  f"'{self.kind}'")
        gpu = self.ancestor(GpuOp)
        algorithm = gpu.algorithm() if gpu is not None else None
        ranks = algorithm.num_ranks if algorithm is not None else None
        me = gpu.rank_id if gpu is not None else None
        if self.kind == "switch":
            self._verify_switch(ranks, me)
            return
        if self.connected_to is None:
            raise VerifyException(f"a {self.kind} channel needs connected_to")
        for peer in self.peers:
            if ranks is not None and not 0 <= peer < ranks:
                raise VerifyException(f"connected_to names rank {peer}, but the plan has "
                                      f"{ranks} GPUs")
            if peer == me:
                raise VerifyException(f"gpu {me} has a {self.kind} channel to itself")

    def _verify_switch(self, ranks: int | None, me: int | None) -> None:
        if self.buffer_type is None or self.bound_buffer not in BUFFER_TYPES:
            raise VerifyException("a switch channel needs buffer_type i, o or s")
        if not self.groups:
            raise VerifyException("a switch channel needs at least one rank group")
        for group in self.groups:
            members = group.rank_list
            if group.size.data != len(members):
                raise VerifyException(f"rank group size {group.size.data} differs from the "
                                      f"{len(members)} ranks it lists")
            if len(set(members)) != len(members):
                raise VerifyException(f"rank group {members} lists a rank twice")
            if ranks is not None and any(not 0 <= r < ranks for r in members):
                raise VerifyException(f"rank group {members} names a rank outside the plan's "
                                      f"{ranks} GPUs")
            if me is not None and me not in members:
                raise VerifyException(f"gpu {me} binds a switch channel to group {members} "
                                      "it is not a member of")


@irdl_op_definition
class RemoteBufferOp(PlanObjectOp):
    """A peer's buffer this GPU accesses (`rank`, buffer `type`), and the channel types
    through which it does (memory: a peer pointer; port: a registered memory id). Its position
    is its GPU-level id. `info_location` is the seed schema's `infoLocation`, kept as given."""

    name = "mscclpp.remote_buffer"

    remote_rank = prop_def(IntegerAttr[I64])
    buffer_type = prop_def(StringAttr)
    access_channel_types = opt_prop_def(ArrayAttr[StringAttr])
    info_location = opt_prop_def(StringAttr)
    assembly_format = "$remote_rank $buffer_type attr-dict"

    def __init__(self, rank: int, buffer_type: str, access: Sequence[str] | None = ("memory",),
                 **optional: Attribute | None):
        properties: dict[str, Attribute] = {"remote_rank": _int(rank),
                                            "buffer_type": StringAttr(buffer_type)}
        if access is not None:
            properties["access_channel_types"] = ArrayAttr([StringAttr(a) for a in access])
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties)

    @property
    def rank_id(self) -> int:
        return self.remote_rank.value.data

    @property
    def buffer(self) -> str:
        return self.buffer_type.data

    @property
    def access_types(self) -> list[str]:
        """The channel types this buffer is reached through (derived from `info_location`
        when the file gives only that: gpu = memory, cpu = port)."""
        if self.access_channel_types is not None:
            return [a.data for a in self.access_channel_types.data]
        if self.info_location is not None:
            return list(INFO_LOCATION_ACCESS.get(self.info_location.data, ()))
        return []

    def verify_(self) -> None:
        if self.buffer not in BUFFER_TYPES:
            raise VerifyException(f"remote buffer type must be i, o or s, got '{self.buffer}'")
        for access in self.access_types:
            if access not in ("memory", "port"):
                raise VerifyException(f"remote buffers are accessed through memory or port "
                                      f"channels, not '{access}'")
        gpu = self.ancestor(GpuOp)
        algorithm = gpu.algorithm() if gpu is not None else None
        if algorithm is not None and not 0 <= self.rank_id < algorithm.num_ranks:
            raise VerifyException(f"remote buffer of rank {self.rank_id}, but the plan has "
                                  f"{algorithm.num_ranks} GPUs")


INFO_LOCATION_ACCESS = {"gpu": ("memory",), "cpu": ("port",)}
"""How the seed schema's `infoLocation` maps to the executor's access channel types."""


@irdl_op_definition
class SemaphoreOp(PlanObjectOp):
    """An intra-GPU counting semaphore for `sem_acquire`/`sem_release`, by position."""

    name = "mscclpp.semaphore"

    init_value = prop_def(IntegerAttr[I64])
    assembly_format = "$init_value attr-dict"

    def __init__(self, init_value: int, **optional: Attribute | None):
        properties: dict[str, Attribute] = {"init_value": _int(init_value)}
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties)

    @property
    def initial(self) -> int:
        return self.init_value.value.data

    def verify_(self) -> None:
        if self.initial < 0:
            raise VerifyException(f"semaphore init_value must be >= 0, got {self.initial}")


@irdl_op_definition
class ThreadblockOp(PlanObjectOp):
    """A thread block: the GPU-level channels (`channels`) and remote buffers
    (`remote_buffer_refs`, absent when the file has none) it uses, and its ops in order."""

    name = "mscclpp.threadblock"

    tb = prop_def(IntegerAttr[I64])
    channels = prop_def(ArrayAttr[TbChannelsAttr])
    remote_buffer_refs = opt_prop_def(ArrayAttr[TbRemoteBuffersAttr])
    body = region_def()
    traits = traits_def(NoTerminator())
    assembly_format = "$tb attr-dict-with-keyword $body"

    def __init__(self, tb_id: int, channels: Sequence[TbChannelsAttr],
                 remote: Sequence[TbRemoteBuffersAttr] | None, ops: Sequence[Operation] = (),
                 **optional: Attribute | None):
        properties: dict[str, Attribute] = {"tb": _int(tb_id), "channels": ArrayAttr(channels)}
        if remote is not None:
            properties["remote_buffer_refs"] = ArrayAttr(remote)
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties, regions=[Region(Block(list(ops)))])

    @property
    def tb_id(self) -> int:
        return self.tb.value.data

    def ops(self) -> list[InstructionOp]:
        return [op for op in block_ops(self.body) if isinstance(op, InstructionOp)]

    def gpu(self) -> GpuOp | None:
        return self.ancestor(GpuOp)  # type: ignore[return-value]

    def channel_ids(self, channel_type: str) -> list[int]:
        """GPU-level ids of this block's channels of a type, by tb-local index."""
        ids: list[int] = []
        for entry in self.channels.data:
            if entry.channel_type.data == channel_type:
                ids.extend(entry.id_list)
        return ids

    def remote_buffer_ids(self, channel_type: str) -> list[int]:
        """GPU-level remote buffer ids reachable through a channel type, by tb-local id."""
        ids: list[int] = []
        for entry in (self.remote_buffer_refs.data if self.remote_buffer_refs else ()):
            if entry.access_channel_type.data == channel_type:
                ids.extend(entry.id_list)
        return ids

    def verify_(self) -> None:
        if any(not isinstance(op, InstructionOp) for op in block_ops(self.body)):
            raise VerifyException("a thread block holds only mscclpp operations")
        steps = sum(op.device_steps() for op in self.ops())
        if steps > MAX_OPERATIONS_PER_TB:
            raise VerifyException(f"thread block {self.tb_id} has {steps} device operations; "
                                  f"the executor allows {MAX_OPERATIONS_PER_TB} (a pipeline "
                                  "counts 1 plus its inner ops)")
        gpu = self.gpu()
        if gpu is None:
            return
        for kind in ("memory", "port"):
            ids = self.channel_ids(kind)
            if len(ids) > MAX_CHANNELS_PER_TYPE:
                raise VerifyException(f"thread block {self.tb_id} uses {len(ids)} {kind} "
                                      f"channels; the executor allows {MAX_CHANNELS_PER_TYPE}")
            ends = gpu.channel_ends(kind)
            for channel in ids:
                if not 0 <= channel < len(ends):
                    raise VerifyException(f"thread block {self.tb_id} uses {kind} channel "
                                          f"{channel}, but gpu {gpu.rank_id} declares "
                                          f"{len(ends)} {kind} channels")
        switches = len(gpu.switch_groups())
        for channel in self.channel_ids("switch"):
            if not 0 <= channel < switches:
                raise VerifyException(f"thread block {self.tb_id} uses switch channel "
                                      f"{channel}, but gpu {gpu.rank_id} declares {switches}")
        remote = gpu.remote_buffers()
        for entry in (self.remote_buffer_refs.data if self.remote_buffer_refs else ()):
            kind = entry.access_channel_type.data
            for buffer_id in entry.id_list:
                if not 0 <= buffer_id < len(remote):
                    raise VerifyException(f"thread block {self.tb_id} refers to remote buffer "
                                          f"{buffer_id}, but gpu {gpu.rank_id} declares "
                                          f"{len(remote)}")
                if kind not in remote[buffer_id].access_types:
                    raise VerifyException(f"thread block {self.tb_id} reaches remote buffer "
                                          f"{buffer_id} through {kind} channels, which it does "
                                          "not list in access_channel_types")


_DECLARATION_ORDER = (ChannelOp, RemoteBufferOp, SemaphoreOp, ThreadblockOp)


# ---------------------------------------------------------------------------------------------
# Operations
# ---------------------------------------------------------------------------------------------


class Form:
    """The buffer reference forms an operand list may take (see `OperandSpec`)."""

    LOCAL = "L"
    REMOTE = "R"
    SWITCH = "W"


@dataclass(frozen=True)
class OperandSpec:
    """What an op's `src_buff` or `dst_buff` looks like, in the executor's own terms.

    `head` lists the forms of the leading references; `tail` the form every further reference
    takes (None: no further references). `head_packets`/`tail_packets` say which references
    address scratch as packets (the executor reads or writes them at twice the offset).
    """

    head: tuple[str, ...] = ()
    tail: str | None = None
    min_tail: int = 0
    head_packets: tuple[bool, ...] = ()
    tail_packets: bool = False

    def forms(self, n: int) -> list[str]:
        return [*self.head, *([self.tail] * (n - len(self.head)))] if self.tail else \
            list(self.head)

    def packets(self, n: int) -> list[bool]:
        head = list(self.head_packets) + [False] * (len(self.head) - len(self.head_packets))
        return (head + [self.tail_packets] * (n - len(self.head)))[:n]

    def accepts(self, n: int) -> bool:
        if self.tail is None:
            return n == len(self.head)
        return n >= len(self.head) + self.min_tail

    def phrase(self) -> str:
        names = {Form.LOCAL: "local", Form.REMOTE: "remote", Form.SWITCH: "switch"}
        parts = [names[f] for f in self.head]
        if self.tail:
            parts.append(f"{'one or more' if self.min_tail else 'any number of'} "
                         f"{names[self.tail]}")
        return ", ".join(parts) if parts else "none"


NONE = OperandSpec()


class InstructionOp(PlanObjectOp):
    """An operation of a thread block (an entry of its `ops`).

    Subclasses set NAME (the executor's name), SEED_NAME when the seed schema spells it
    differently, SRC/DST (the operand forms) and CHANNELS (the channel types it may use).
    Every field of the file's op object is a property; absent fields stay absent.
    """

    channel_type = opt_prop_def(StringAttr)
    channel_ids = opt_prop_def(DenseArrayBase)
    src_buff = opt_prop_def(ArrayAttr[BufferRefAttr])
    dst_buff = opt_prop_def(ArrayAttr[BufferRefAttr])
    tbg_info = opt_prop_def(TbgAttr)
    reduce_op = opt_prop_def(StringAttr)
    barrier_id = opt_prop_def(IntegerAttr[I64])
    num_threadblocks = opt_prop_def(IntegerAttr[I64])
    semaphore_ids = opt_prop_def(DenseArrayBase)

    NAME: ClassVar[str]
    SEED_NAME: ClassVar[str | None] = None
    SRC: ClassVar[OperandSpec] = NONE
    DST: ClassVar[OperandSpec] = NONE
    CHANNELS: ClassVar[tuple[str, ...]] = ()
    """Channel types the op accepts; empty: it takes none."""
    NEEDS_CHANNEL_IDS: ClassVar[bool] = False
    PACKET_OP: ClassVar[bool] = False
    REDUCES: ClassVar[bool] = False
    SYNC: ClassVar[bool] = False
    """Executed by the first threads only (signals, waits, semaphores, flush)."""
    PAIRED: ClassVar[bool] = False
    BROADCASTS: ClassVar[bool] = False
    """A paired op that may also forward one source to several destinations (the DSL fuses
    rppkt ops of one source into one op with many destinations, and the executor forwards the
    source to each)."""
    """src_buff[k] goes to dst_buff[k]: both lists have one entry per destination."""

    def __init__(self, *, channel_type: str | None = None, channel_ids: Sequence[int] | None = None,
                 src: Sequence[BufferRefAttr] | None = None,
                 dst: Sequence[BufferRefAttr] | None = None, **optional: Attribute | None):
        properties: dict[str, Attribute] = {}
        if channel_type is not None:
            properties["channel_type"] = StringAttr(channel_type)
        if channel_ids is not None:
            properties["channel_ids"] = _ints(channel_ids)
        if src is not None:
            properties["src_buff"] = ArrayAttr(list(src))
        if dst is not None:
            properties["dst_buff"] = ArrayAttr(list(dst))
        properties.update({k: v for k, v in optional.items() if v is not None})
        super().__init__(properties=properties, regions=self._initial_regions())

    def _initial_regions(self) -> list[Region]:
        return []

    # -- views --------------------------------------------------------------------------------

    @property
    def kind(self) -> str | None:
        return None if self.channel_type is None else self.channel_type.data

    @property
    def channel_list(self) -> list[int]:
        return [] if self.channel_ids is None else list(self.channel_ids.get_values())

    @property
    def sources(self) -> list[BufferRefAttr]:
        return [] if self.src_buff is None else list(self.src_buff.data)

    @property
    def destinations(self) -> list[BufferRefAttr]:
        return [] if self.dst_buff is None else list(self.dst_buff.data)

    @property
    def semaphore_list(self) -> list[int]:
        return [] if self.semaphore_ids is None else list(self.semaphore_ids.get_values())

    @property
    def tbg(self) -> tuple[int, int]:
        """(part, parts) of the thread-block group this op is split over."""
        if self.tbg_info is None:
            return 0, 1
        return self.tbg_info.tb_id.data, self.tbg_info.tbg_size.data

    def source_packets(self) -> list[bool]:
        return self.SRC.packets(len(self.sources))

    def destination_packets(self) -> list[bool]:
        return self.DST.packets(len(self.destinations))

    @property
    def is_legacy(self) -> bool:
        """Is this op spelled with a name from before the 2025-08 renames (a draft plan)?"""
        return self.spellings is not None and "@name" in self.spellings.data

    def device_steps(self) -> int:
        return 1

    def threadblock(self) -> ThreadblockOp | None:
        return self.ancestor(ThreadblockOp)  # type: ignore[return-value]

    def label(self) -> str:
        """`gpu 0 tb 1 op 6 (rres)`: where this op is, for reports."""
        tb = self.threadblock()
        gpu = tb.gpu() if tb is not None else None
        path = _op_path(self)
        where = (f"gpu {gpu.rank_id} " if gpu else "") + (f"tb {tb.tb_id} " if tb else "")
        return f"{where}op {path} ({self.display_name})"

    @property
    def display_name(self) -> str:
        """The op's name as the file spells it (legacy names included)."""
        spelled = self.spellings.data.get("@name") if self.spellings is not None else None
        return spelled.data if spelled is not None else self.NAME

    # -- verification -------------------------------------------------------------------------

    def verify_(self) -> None:
        self._verify_fields()
        tb = self.threadblock()
        gpu = tb.gpu() if tb is not None else None
        if tb is None or gpu is None:
            return
        self._verify_channels(tb, gpu)
        self._verify_refs(tb, gpu, "src_buff", self.sources, self.SRC)
        self._verify_refs(tb, gpu, "dst_buff", self.destinations, self.DST)
        self._verify_sync_ids(tb, gpu)

    def _verify_fields(self) -> None:
        kind = self.kind
        # Ops spelled with a pre-2025-08 name follow the draft executor, whose remote packet
        # ops named their channels differently (`output_channel_ids`); today's needs the type.
        if self.CHANNELS and kind is None and not self.is_legacy and \
                (self.NEEDS_CHANNEL_IDS or self._remote_refs()):
            raise VerifyException(f"{self.NAME} needs a channel_type "
                                  f"({' or '.join(self.CHANNELS)})")
        if kind is not None and kind not in CHANNEL_TYPES:
            raise VerifyException(f"unknown channel_type '{kind}'")
        if kind is not None and kind != "none" and kind not in self.CHANNELS:
            allowed = " or ".join(self.CHANNELS) if self.CHANNELS else "no channel"
            raise VerifyException(f"{self.NAME} takes {allowed}, not a {kind} channel")
        if self.NEEDS_CHANNEL_IDS and not self.channel_list:
            raise VerifyException(f"{self.NAME} needs channel_ids")
        if len(self.channel_list) > MAX_CHANNELS_PER_OP:
            raise VerifyException(f"{len(self.channel_list)} channels in one op; the executor "
                                  f"allows {MAX_CHANNELS_PER_OP}")
        for key, refs, spec in (("src_buff", self.sources, self.SRC),
                                ("dst_buff", self.destinations, self.DST)):
            if spec is NONE:
                if refs:
                    raise VerifyException(f"{self.NAME} takes no {key}")
                continue
            if not spec.accepts(len(refs)):
                raise VerifyException(f"{self.NAME} {key} takes {spec.phrase()} references, "
                                      f"got {len(refs)}")
            if len(refs) > MAX_BUFFER_REFS:
                raise VerifyException(f"{len(refs)} references in {key}; the executor allows "
                                      f"{MAX_BUFFER_REFS}")
            for i, (ref, form) in enumerate(zip(refs, spec.forms(len(refs)), strict=True)):
                expected = {Form.LOCAL: ref.is_local, Form.REMOTE: ref.is_remote,
                            Form.SWITCH: ref.is_switch}[form]
                if not expected:
                    names = {Form.LOCAL: "a local buffer (type)",
                             Form.REMOTE: "a remote buffer (buffer_id)",
                             Form.SWITCH: "a switch channel buffer (switch_channel_id)"}
                    raise VerifyException(f"{self.NAME} {key}[{i}] must be {names[form]}, "
                                          f"got {ref.describe()}")
        if self.PAIRED and len(self.sources) != len(self.destinations) and not (
                self.BROADCASTS and len(self.sources) == 1):
            raise VerifyException(f"{self.NAME} pairs src_buff[k] with dst_buff[k], but has "
                                  f"{len(self.sources)} sources and {len(self.destinations)} "
                                  "destinations")
        self._verify_sizes()

    def _remote_refs(self) -> bool:
        return any(r.is_remote for r in self.sources + self.destinations)

    def _verify_sizes(self) -> None:
        sizes = {r.count for r in self.sources + self.destinations}
        if len(sizes) > 1:
            raise VerifyException(f"{self.NAME} moves chunk ranges of different sizes "
                                  f"({', '.join(r.describe() for r in self.sources)} -> "
                                  f"{', '.join(r.describe() for r in self.destinations)})")

    def _verify_channels(self, tb: ThreadblockOp, gpu: GpuOp) -> None:
        kind = self.kind
        if not self.channel_list or kind is None:
            return
        available = len(tb.channel_ids(kind))
        for channel in self.channel_list:
            if not 0 <= channel < available:
                raise VerifyException(f"channel_ids names {kind} channel {channel}, but thread "
                                      f"block {tb.tb_id} lists {available}")
        if len(set(self.channel_list)) != len(self.channel_list) and self.SYNC:
            # Data ops may name a channel twice (the DSL fuses two gets over one channel into
            # one op, thread k using channel_ids[k]); a signal or wait twice on one channel
            # is counted as two by the simulator's pairing, so it is allowed too but noted.
            warn("mscclpp.repeated-channel", f"channel_ids {self.channel_list} names a "
                 "channel twice: the op signals or waits on it twice", self, "channel_ids")

    def _verify_refs(self, tb: ThreadblockOp, gpu: GpuOp, key: str,
                     refs: list[BufferRefAttr], spec: OperandSpec) -> None:
        algorithm = gpu.algorithm()
        gpus = algorithm.gpus() if algorithm is not None else []
        for i, ref in enumerate(refs):
            for rank, buffer, what in self._targets(tb, gpu, gpus, ref):
                owner = gpus[rank] if rank < len(gpus) else gpu
                limit = chunk_limit(algorithm, owner, buffer)
                if ref.end > limit:
                    raise VerifyException(
                        f"{key}[{i}] {ref.describe()}: chunks [{ref.start}, {ref.end}) exceed "
                        f"the {limit} chunks of {what}")

    def _targets(self, tb: ThreadblockOp, gpu: GpuOp, gpus: list[GpuOp], ref: BufferRefAttr
                 ) -> Iterator[tuple[int, str, str]]:
        """(rank, buffer type, description) of every buffer `ref` addresses."""
        if ref.is_local:
            yield gpu.rank_id, ref.buffer.data, \
                f"the {BUFFER_NAMES[ref.buffer.data]} of gpu {gpu.rank_id}"
            return
        if ref.is_remote:
            kind = self.kind or "memory"
            ids = tb.remote_buffer_ids(kind)
            if ref.ref_id.data >= len(ids):
                raise VerifyException(f"{ref.describe()}: thread block {tb.tb_id} lists "
                                      f"{len(ids)} remote buffers reached through {kind} "
                                      "channels")
            # The thread block's own check of its ids may not have run yet (xDSL verifies
            # the ops inside a block before the block's op), so the id is checked here too.
            remotes = gpu.remote_buffers()
            if not 0 <= ids[ref.ref_id.data] < len(remotes):
                raise VerifyException(f"{ref.describe()}: thread block {tb.tb_id} maps it to "
                                      f"remote buffer {ids[ref.ref_id.data]}, but gpu "
                                      f"{gpu.rank_id} declares {len(remotes)}")
            remote = remotes[ids[ref.ref_id.data]]
            if remote.rank_id < len(gpus):
                yield remote.rank_id, remote.buffer, \
                    f"the {BUFFER_NAMES[remote.buffer]} of gpu {remote.rank_id}"
            return
        switches = tb.channel_ids("switch")
        if ref.ref_id.data >= len(switches):
            raise VerifyException(f"{ref.describe()}: thread block {tb.tb_id} lists "
                                  f"{len(switches)} switch channels")
        groups = gpu.switch_groups()
        if not 0 <= switches[ref.ref_id.data] < len(groups):
            raise VerifyException(f"{ref.describe()}: thread block {tb.tb_id} maps it to switch "
                                  f"channel {switches[ref.ref_id.data]}, but gpu {gpu.rank_id} "
                                  f"declares {len(groups)}")
        buffer, members = groups[switches[ref.ref_id.data]]
        for member in members:
            if member < len(gpus):
                yield member, buffer, f"the {BUFFER_NAMES[buffer]} of group member gpu {member}"

    def _verify_sync_ids(self, tb: ThreadblockOp, gpu: GpuOp) -> None:
        pass


def chunk_limit(algorithm: AlgorithmOp | None, gpu: GpuOp, buffer: str) -> int:
    """How many chunks of `buffer` on `gpu` a reference may address.

    For in-place collectives whose output is the input (all but allgather and reducescatter),
    the executor addresses both through one allocation, so either letter reaches the larger
    of the two counts (plans often give output_chunks 0 then)."""
    count = gpu.chunks(buffer)
    if (buffer in ("i", "o") and algorithm is not None and algorithm.is_inplace
            and algorithm.collective_name not in ("allgather", "reducescatter")):
        return max(gpu.chunks("i"), gpu.chunks("o"))
    return count


def _op_path(op: Operation) -> str:
    """`6`, or `3.1` for the second op inside the pipeline at position 3."""
    steps: list[str] = []
    current: Operation | None = op
    while current is not None and not isinstance(current, ThreadblockOp):
        parent = current.parent_op()
        if parent is None:
            break
        siblings = list(current.parent_block().ops) if current.parent_block() else []
        steps.append(str(siblings.index(current)))
        current = parent
    return ".".join(reversed(steps))


# -- concrete operations ----------------------------------------------------------------------

_L, _R, _W = Form.LOCAL, Form.REMOTE, Form.SWITCH


class _InstructionSyntax:
    """`mscclpp.put memory [0] src(i[0:1]) dst(remote 0[0:1]) {reduce_op = "sum"}`: the
    channel type and ids, the buffer references, then the other properties."""

    @classmethod
    def parse(cls, parser: Parser) -> InstructionOp:
        properties: dict[str, Attribute] = {}
        kind = next((k for k in CHANNEL_TYPES if parser.parse_optional_keyword(k)), None)
        if kind is not None:
            properties["channel_type"] = StringAttr(kind)
        ids = parser.parse_optional_comma_separated_list(parser.Delimiter.SQUARE,
                                                         lambda: parse_int(parser))
        if ids is not None:
            properties["channel_ids"] = _ints(ids)
        for keyword, key in (("src", "src_buff"), ("dst", "dst_buff")):
            if parser.parse_optional_keyword(keyword) is not None:
                refs = parser.parse_comma_separated_list(
                    parser.Delimiter.PAREN, lambda: BufferRefAttr(*_parse_ref_body(parser)))
                properties[key] = ArrayAttr(refs)
        attrs = parser.parse_optional_attr_dict()
        properties.update(attrs)
        regions = cls._parse_regions(parser)  # type: ignore[attr-defined]
        return cls.create(properties=properties, regions=regions)  # type: ignore[attr-defined]

    def print(self, printer: Printer) -> None:
        op: InstructionOp = self  # type: ignore[assignment]
        if op.channel_type is not None:
            printer.print_string(f" {op.channel_type.data}")
        if op.channel_ids is not None:
            printer.print_string(" ")
            _print_int_list(printer, op.channel_list)
        for keyword, refs in (("src", op.src_buff), ("dst", op.dst_buff)):
            if refs is None:
                continue
            printer.print_string(f" {keyword}(")
            for i, ref in enumerate(refs.data):
                if i:
                    printer.print_string(", ")
                _print_ref_body(printer, ref)
            printer.print_string(")")
        rest = {k: v for k, v in op.properties.items()
                if k not in ("channel_type", "channel_ids", "src_buff", "dst_buff")}
        if rest:
            printer.print_string(" ")
            printer.print_attr_dict(rest)
        op._print_regions(printer)

    @classmethod
    def _parse_regions(cls, parser: Parser) -> list[Region]:
        return []

    def _print_regions(self, printer: Printer) -> None:
        pass


def _define(name: str, executor_name: str, doc: str, **classvars) -> type[InstructionOp]:
    constants = {"NAME": executor_name, **{k: v for k, v in classvars.items() if k.isupper()}}
    annotations = {k: ClassVar for k in constants}
    namespace = {"name": f"mscclpp.{executor_name}", "__doc__": doc,
                 "__annotations__": annotations, "__module__": __name__, **constants}
    cls = type(name, (_InstructionSyntax, InstructionOp), namespace)
    return irdl_op_definition(cls)


NopOp = _define("NopOp", "nop", "`__syncthreads()`: every thread of the block has finished the "
                "ops before it (the DSL inserts it between dependent ops and around sync ops).")


@irdl_op_definition
class BarrierOp(_InstructionSyntax, InstructionOp):
    """A barrier among `num_threadblocks` thread blocks of this GPU (`barrier_id` names one of
    the executor's 16 device-wide syncers)."""

    name = "mscclpp.barrier"
    NAME: ClassVar[str] = "barrier"

    def _verify_sync_ids(self, tb: ThreadblockOp, gpu: GpuOp) -> None:
        if self.barrier_id is None or self.num_threadblocks is None:
            raise VerifyException("barrier needs barrier_id and num_threadblocks")
        barrier, count = self.barrier_id.value.data, self.num_threadblocks.value.data
        if not 0 <= barrier < MAX_BARRIERS:
            raise VerifyException(f"barrier_id {barrier} is not in [0, {MAX_BARRIERS})")
        blocks = len(gpu.threadblocks())
        if not 1 <= count <= blocks:
            raise VerifyException(f"barrier over {count} thread blocks, but gpu {gpu.rank_id} "
                                  f"has {blocks}")


_SIGNAL = dict(CHANNELS=("memory", "port"), NEEDS_CHANNEL_IDS=True, SYNC=True)
SignalOp = _define("SignalOp", "signal", "Thread k signals the peer of tb-local channel "
                   "channel_ids[k] (releasing everything the block did before).", **_SIGNAL)
WaitOp = _define("WaitOp", "wait", "Thread k waits for the next signal on channel "
                 "channel_ids[k].", **_SIGNAL)
RelaxedSignalOp = _define(
    "RelaxedSignalOp", "rlxsignal", "A signal without a memory fence (memory channels; a normal "
    "signal on port channels); it orders nothing but itself.", SEED_NAME="rsignal", **_SIGNAL)
RelaxedWaitOp = _define("RelaxedWaitOp", "rlxwait", "The wait matching rlxsignal.",
                        SEED_NAME="rwait", **_SIGNAL)
FlushOp = _define("FlushOp", "flush", "Waits until the port channel's earlier puts have "
                  "completed, so their sources may be reused.", CHANNELS=("port",),
                  NEEDS_CHANNEL_IDS=True, SYNC=True)

_PUT = dict(SRC=OperandSpec(tail=_L, min_tail=1), DST=OperandSpec(tail=_R, min_tail=1),
            CHANNELS=("memory", "port"), PAIRED=True)
PutOp = _define("PutOp", "put", "Copies each src_buff[k] (local) into dst_buff[k] (remote): by "
                "the block's threads on memory channels, by the proxy on port channels.", **_PUT)
PutWithSignalOp = _define("PutWithSignalOp", "pws", "A port-channel put followed by a signal "
                          "on the same channel.", NEEDS_CHANNEL_IDS=True, **_PUT)
PutWithSignalAndFlushOp = _define("PutWithSignalAndFlushOp", "pwsf", "A port-channel put, "
                                  "signal and flush.", NEEDS_CHANNEL_IDS=True, **_PUT)
GetOp = _define("GetOp", "get", "Copies each remote src_buff[k] into the local dst_buff[k] "
                "(memory channels).", SRC=OperandSpec(tail=_R, min_tail=1),
                DST=OperandSpec(tail=_L, min_tail=1), CHANNELS=("memory",), PAIRED=True)
CopyOp = _define("CopyOp", "copy", "Copies a local range into another local range.",
                 SRC=OperandSpec((_L,)), DST=OperandSpec((_L,)))
ReduceOp = _define("ReduceOp", "re", "dst[0] = src[0] + src[1] + ..., all local.",
                   SRC=OperandSpec((_L,), _L), DST=OperandSpec((_L,)), REDUCES=True)
ReduceSendOp = _define("ReduceSendOp", "res", "re, then writes the result to every remote "
                       "dst_buff[1:].", SRC=OperandSpec((_L,), _L),
                       DST=OperandSpec((_L,), _R), CHANNELS=("memory",), REDUCES=True)
ReadReduceOp = _define("ReadReduceOp", "rre", "dst[0] = src[0] (local) + the remote "
                       "src_buff[1:].", SRC=OperandSpec((_L,), _R), DST=OperandSpec((_L,)),
                       CHANNELS=("memory",), REDUCES=True)
ReadReduceSendOp = _define("ReadReduceSendOp", "rres", "rre, then writes the result to every "
                           "remote dst_buff[1:] (the old rrcs).", SRC=OperandSpec((_L,), _R),
                           DST=OperandSpec((_L,), _R), CHANNELS=("memory",), REDUCES=True)

_PKT = dict(PACKET_OP=True)
PutPacketsOp = _define("PutPacketsOp", "ppkt", "Writes local data as LL packets into remote "
                       "scratch dst_buff[k] (threads on memory channels, the proxy on port).",
                       SRC=OperandSpec(tail=_L, min_tail=1),
                       DST=OperandSpec(tail=_R, min_tail=1, tail_packets=True),
                       CHANNELS=("memory", "port"), PAIRED=True, **_PKT)
ReadPutPacketsOp = _define("ReadPutPacketsOp", "rppkt", "Waits for local scratch packets and "
                           "forwards them, still as packets, to remote scratch.",
                           SRC=OperandSpec(tail=_L, min_tail=1, tail_packets=True),
                           DST=OperandSpec(tail=_R, min_tail=1, tail_packets=True),
                           CHANNELS=("memory", "port"), PAIRED=True, BROADCASTS=True, **_PKT)
CopyPacketsOp = _define("CopyPacketsOp", "cpkt", "Writes local data as packets into local "
                        "scratch.", SRC=OperandSpec((_L,)),
                        DST=OperandSpec((_L,), head_packets=(True,)), **_PKT)
UnpackPacketsOp = _define("UnpackPacketsOp", "upkt", "Waits for local scratch packets and "
                          "writes their data into a local range.",
                          SRC=OperandSpec((_L,), head_packets=(True,)), DST=OperandSpec((_L,)),
                          **_PKT)
ReducePacketsOp = _define("ReducePacketsOp", "repkt", "dst[0] = src[0] (data) + the local "
                          "scratch packets src_buff[1:].",
                          SRC=OperandSpec((_L,), _L, tail_packets=True), DST=OperandSpec((_L,)),
                          REDUCES=True, **_PKT)
ReduceSendPacketsOp = _define("ReduceSendPacketsOp", "respkt", "repkt, then sends the result "
                              "as packets to the remote scratch dst_buff[1:].",
                              SRC=OperandSpec((_L,), _L, tail_packets=True),
                              DST=OperandSpec((_L,), _R, tail_packets=True),
                              CHANNELS=("memory",), REDUCES=True, **_PKT)
ReduceCopyPacketsOp = _define("ReduceCopyPacketsOp", "recpkt", "repkt, and also writes the "
                              "result as packets to local scratch dst_buff[1].",
                              SRC=OperandSpec((_L,), _L, tail_packets=True),
                              DST=OperandSpec((_L, _L), head_packets=(False, True)),
                              REDUCES=True, **_PKT)
ReduceCopySendPacketsOp = _define("ReduceCopySendPacketsOp", "recspkt", "recpkt, then sends "
                                  "the result as packets to the remote scratch dst_buff[2:].",
                                  SRC=OperandSpec((_L,), _L, tail_packets=True),
                                  DST=OperandSpec((_L, _L), _R, head_packets=(False, True),
                                                  tail_packets=True),
                                  CHANNELS=("memory",), REDUCES=True, **_PKT)
MultiLoadReduceStoreOp = _define(
    "MultiLoadReduceStoreOp", "glres", "NVLS: loads the range from every member of the switch "
    "group, reduces in the switch, and stores the sum into every member (sm >= 90).",
    SRC=OperandSpec((_W,)), DST=OperandSpec((_W,)), CHANNELS=("switch",), REDUCES=True)
MultiStoreOp = _define("MultiStoreOp", "gstore", "NVLS: stores a local range into the bound "
                       "buffer of every member of the switch group.",
                       SRC=OperandSpec((_L,)), DST=OperandSpec(tail=_W, min_tail=1),
                       CHANNELS=("switch",))
MultiStorePacketsOp = _define("MultiStorePacketsOp", "gstorepkt", "gstore of local scratch "
                              "packets as packets.",
                              SRC=OperandSpec((_L,), head_packets=(True,)),
                              DST=OperandSpec(tail=_W, min_tail=1, tail_packets=True),
                              CHANNELS=("switch",), **_PKT)


class _SemaphoreOp(_InstructionSyntax, InstructionOp):
    SYNC: ClassVar[bool] = True

    def _verify_sync_ids(self, tb: ThreadblockOp, gpu: GpuOp) -> None:
        ids = self.semaphore_list
        if not ids:
            raise VerifyException(f"{self.NAME} needs semaphore_ids")
        if len(ids) > MAX_SEMAPHORES_PER_OP:
            raise VerifyException(f"{len(ids)} semaphores in one op; the executor allows "
                                  f"{MAX_SEMAPHORES_PER_OP}")
        declared = len(gpu.semaphores())
        for sem in ids:
            if not 0 <= sem < declared:
                raise VerifyException(f"semaphore {sem} is not declared (gpu {gpu.rank_id} has "
                                      f"{declared} semaphores)")


@irdl_op_definition
class SemAcquireOp(_SemaphoreOp):
    """Thread k acquires semaphore semaphore_ids[k] (blocks while it is 0)."""

    name = "mscclpp.sem_acquire"
    NAME: ClassVar[str] = "sem_acquire"


@irdl_op_definition
class SemReleaseOp(_SemaphoreOp):
    """Thread k releases semaphore semaphore_ids[k]."""

    name = "mscclpp.sem_release"
    NAME: ClassVar[str] = "sem_release"


@irdl_op_definition
class PipelineOp(_InstructionSyntax, InstructionOp):
    """Runs its ops `ceil(num_chunks * chunk size / unit_size)` times; iteration j applies
    every op to the window `[j * unit, (j + 1) * unit)` of each of its buffer ranges (packet
    ops ignore the window and run whole each time)."""

    name = "mscclpp.pipeline"
    NAME: ClassVar[str] = "pipeline"
    SEED_NAME: ClassVar[str | None] = "pipeline_loop"

    iter_context = prop_def(IterContextAttr)
    body = region_def()
    traits = traits_def(NoTerminator())

    def __init__(self, context: IterContextAttr, ops: Sequence[InstructionOp] = (),
                 **optional: Attribute | None):
        self._ops = list(ops)
        super().__init__(iter_context=context, **optional)

    def _initial_regions(self) -> list[Region]:
        return [Region(Block(getattr(self, "_ops", [])))]

    @classmethod
    def _parse_regions(cls, parser: Parser) -> list[Region]:
        return [parser.parse_region()]

    def _print_regions(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_region(self.body, print_entry_block_args=False)

    @property
    def unit(self) -> int:
        return self.iter_context.unit_size.data

    @property
    def num_chunks(self) -> int:
        return self.iter_context.num_chunks.data

    def ops(self) -> list[InstructionOp]:
        return [op for op in block_ops(self.body) if isinstance(op, InstructionOp)]

    def device_steps(self) -> int:
        return 1 + len(self.ops())

    def verify_(self) -> None:
        super().verify_()
        for op in block_ops(self.body):
            if isinstance(op, PipelineOp):
                raise VerifyException("pipelines cannot be nested")
            if not isinstance(op, InstructionOp):
                raise VerifyException("a pipeline holds only mscclpp operations")


INSTRUCTIONS: tuple[type[InstructionOp], ...] = (
    NopOp, BarrierOp, PutOp, PutWithSignalOp, PutWithSignalAndFlushOp, GetOp, CopyOp, SignalOp,
    WaitOp, FlushOp, ReduceOp, ReduceSendOp, ReadReduceOp, ReadReduceSendOp, PutPacketsOp,
    ReadPutPacketsOp, ReduceSendPacketsOp, CopyPacketsOp, UnpackPacketsOp, ReducePacketsOp,
    ReduceCopyPacketsOp, ReduceCopySendPacketsOp, MultiLoadReduceStoreOp, MultiStoreOp,
    MultiStorePacketsOp, RelaxedSignalOp, RelaxedWaitOp, PipelineOp, SemAcquireOp, SemReleaseOp,
)
"""The executor's 30 operations, in the order of its `getOpType`."""

INSTRUCTION_BY_NAME: dict[str, type[InstructionOp]] = {cls.NAME: cls for cls in INSTRUCTIONS}

LEGACY_INSTRUCTION_NAMES: dict[str, str] = {
    "rs": "res", "rrc": "rre", "rrcs": "rres", "rspkt": "respkt", "rpkt": "repkt",
    "tpkt": "cpkt",
}
"""Op names of plans written before the 2025-08 renames (#579), by their current name; in such
plans `cpkt` is the old name of `upkt` (see `legacy_names_in_use`)."""
LEGACY_ONLY_NAMES = frozenset(LEGACY_INSTRUCTION_NAMES)


Mscclpp = Dialect(
    "mscclpp",
    [AlgorithmOp, GpuOp, ChannelOp, RemoteBufferOp, SemaphoreOp, ThreadblockOp, *INSTRUCTIONS],
    [BufferRefAttr, TbgAttr, IterContextAttr, TbChannelsAttr, TbRemoteBuffersAttr,
     RankGroupAttr],
)
