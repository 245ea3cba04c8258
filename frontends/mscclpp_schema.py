"""The two spellings of an MSCCL++ plan, and how planc remembers a file's own layout.

MSCCL++ plans come in two schemas:

* **executor**: the snake_case schema the current C++ executor parses (`input_chunks`,
  `channel_type`/`connected_to`, `remote_buffer_refs`, ops `rlxsignal`/`pipeline`, a top-level
  `buffer_alignment`). Plans written before the 2025-08 renames, and the drafts of the DSL
  branch, use a few legacy spellings of it (a GPU channel keyed `type`, a switch channel's
  `buff`, op names such as `tpkt`); they are accepted as aliases and remembered per object.
* **seed**: the draft of the seed specification (camelCase GPU keys `inputChunks`,
  `connectedTo`, `rankGroups`, `remoteBuffers` with `infoLocation`, thread-block channels
  `{ctype, cids}`, a flat `remoteBuffersIds`, references `{type|buff_id, offset, size}`, ops
  `rsignal`/`rwait`/`pipeline_loop` with `iter_context.unit`, semaphore ops with one `id`, and
  `bufferAlignment` per GPU). planc's seed schema renames exactly what the seed names
  differently; fields the seed does not mention keep their executor spelling.

Everything is stored under the executor's (canonical) key names. Each object op remembers, only
when they differ from what an exporter writes by default, the order of its keys (`key_order`,
canonical names) and the legacy spelling of a key or op name (`spellings`, canonical name ->
spelling). Exporting to the executor schema applies both. The seed schema has no room for
executor legacy spellings, so a seed export carries them in a `planc_spelling` member of the
object, which a seed import reads back: executor -> seed -> executor gives the original.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, StringAttr

from ground.json_reader import JsonNode

EXECUTOR = "executor"
SEED = "seed"
SCHEMAS = (SEED, EXECUTOR)

OP_NAME_SPELLING = "@name"
"""Entry of `spellings` holding a legacy op name (the spelling of a value, not of a key)."""

SPELLING_KEY = "planc_spelling"
"""Member of a seed-schema object holding the executor legacy spellings of its keys."""

# Canonical key -> seed key, per object kind (kinds are the JSON objects of a plan).
SEED_KEYS: dict[str, dict[str, str]] = {
    "algorithm": {},
    "gpu": {"input_chunks": "inputChunks", "output_chunks": "outputChunks",
            "scratch_chunks": "scratchChunks", "remote_buffers": "remoteBuffers",
            "buffer_alignment": "bufferAlignment"},
    "channel": {"channel_type": "type", "connected_to": "connectedTo", "buffer_type": "buff",
                "rank_groups": "rankGroups"},
    "rank_group": {},
    "remote_buffer": {"info_location": "infoLocation"},
    "semaphore": {},
    "threadblock": {"remote_buffer_refs": "remoteBuffersIds"},
    "tb_channel": {"channel_type": "ctype", "channel_ids": "cids"},
    "tb_remote": {},
    "op": {"channel_type": "ctype", "channel_ids": "cids", "semaphore_ids": "id"},
    "ref": {"index": "offset", "buffer_id": "buff_id"},
    "tbg": {},
    "iter": {"unit_size": "unit"},
}

LEGACY_KEYS: dict[str, dict[str, str]] = {
    "channel": {"type": "channel_type", "buff": "buffer_type"},
}
"""Executor-schema aliases (legacy spelling -> canonical key) accepted on import."""

KEYS: dict[str, tuple[str, ...]] = {
    "algorithm": ("name", "collective", "protocol", "inplace", "reuse_resources", "gpus",
                  "num_threads_per_block", "use_double_scratch_buffer", "buffer_alignment",
                  "min_message_size", "max_message_size"),
    "gpu": ("id", "input_chunks", "output_chunks", "scratch_chunks", "threadblocks", "channels",
            "remote_buffers", "semaphores", "buffer_alignment"),
    "channel": ("channel_type", "buffer_type", "connected_to", "rank_groups"),
    "rank_group": ("size", "ranks"),
    "remote_buffer": ("rank", "type", "access_channel_types", "info_location"),
    "semaphore": ("init_value",),
    "threadblock": ("id", "ops", "channels", "remote_buffer_refs"),
    "tb_channel": ("channel_type", "channel_ids"),
    "tb_remote": ("access_channel_type", "remote_buffer_ids"),
    "op": ("name", "src_buff", "dst_buff", "channel_ids", "channel_type", "reduce_op",
           "tbg_info", "barrier_id", "num_threadblocks", "semaphore_ids", "iter_context", "ops"),
    "ref": ("type", "buffer_id", "switch_channel_id", "index", "size"),
    "tbg": ("tb_id", "tbg_size"),
    "iter": ("unit_size", "num_chunks"),
}
"""Every key each object kind may have, canonical names, in the order exporters write them
(the order of the MSCCL++ DSL's `to_dict`)."""


def schema_key(kind: str, canonical: str, schema: str) -> str:
    return SEED_KEYS[kind].get(canonical, canonical) if schema == SEED else canonical


# ---------------------------------------------------------------------------------------------
# Reading one object
# ---------------------------------------------------------------------------------------------


class ObjectReader:
    """Reads one JSON object of a plan by canonical key names, in either schema.

    It records which spelling each key had and in which order the keys came, and hands back
    the members it did not read (`extra`), so that the importer can store all three.
    """

    def __init__(self, node: JsonNode, kind: str, schema: str):
        self.node = node
        self.kind = kind
        self.schema = schema
        self.members = node.as_dict()
        self._used: dict[str, str] = {}
        self._consumed: set[str] = set()

    def _spelled(self, canonical: str) -> str | None:
        candidates = [schema_key(self.kind, canonical, self.schema)]
        if self.schema == EXECUTOR:
            candidates += [alias for alias, target in LEGACY_KEYS.get(self.kind, {}).items()
                           if target == canonical]
        present = [key for key in candidates if key in self.members]
        if len(present) > 1:
            raise self.node.error(f"both '{present[0]}' and '{present[1]}' are given; they are "
                                  "two spellings of one field")
        return present[0] if present else None

    def get(self, canonical: str) -> JsonNode | None:
        key = self._spelled(canonical)
        if key is None:
            return None
        self._used[canonical] = key
        self._consumed.add(key)
        return self.node[key]

    def __getitem__(self, canonical: str) -> JsonNode:
        found = self.get(canonical)
        if found is None:
            raise self.node.error(
                f"missing required key '{schema_key(self.kind, canonical, self.schema)}'")
        return found

    def consume(self, key: str) -> JsonNode | None:
        """A member read under its literal key (not a canonical field)."""
        if key not in self.members:
            return None
        self._consumed.add(key)
        return self.node[key]

    def extra(self) -> dict[str, Any]:
        return {k: v for k, v in self.members.items() if k not in self._consumed}

    def spellings(self, imported: dict[str, str] | None = None) -> dict[str, str]:
        """Canonical key -> legacy spelling, for keys not spelled the schema's way."""
        found = {canonical: key for canonical, key in self._used.items()
                 if key != schema_key(self.kind, canonical, self.schema)}
        found.update(imported or {})
        return found

    def key_order(self) -> list[str] | None:
        """The file's key order in canonical names, or None if exporters would write it."""
        canonical_of = {key: canonical for canonical, key in self._used.items()}
        listed = [canonical_of.get(key, key) for key in self.members if key != SPELLING_KEY]
        return None if listed == default_order(self.kind, listed) else listed


def default_order(kind: str, keys: Iterable[str]) -> list[str]:
    """`keys` in the order an exporter writes them: known keys by rank, then the others."""
    keys = list(keys)
    rank = {k: i for i, k in enumerate(KEYS[kind])}
    known = sorted((k for k in keys if k in rank), key=rank.__getitem__)
    return known + [k for k in keys if k not in rank]


def arrange(kind: str, members: dict[str, Any], recorded: list[str] | None) -> list[str]:
    """The order to write `members` (canonical keys): the recorded order where it has them,
    other keys slotted in after the last recorded key that an exporter writes before them."""
    default = default_order(kind, members)
    if not recorded:
        return default
    rank = {k: i for i, k in enumerate(KEYS[kind])}
    result = [k for k in recorded if k in members]
    for key in default:
        if key in result:
            continue
        if key not in rank:
            result.append(key)
            continue
        position = 0
        for i, placed in enumerate(result):
            if rank.get(placed, len(rank)) < rank[key]:
                position = i + 1
        result.insert(position, key)
    return result


def write_object(kind: str, members: dict[str, Any], schema: str,
                 recorded_order: list[str] | None = None,
                 spellings: dict[str, str] | None = None) -> dict[str, Any]:
    """A JSON object from canonical members: ordered, then spelled for `schema`.

    Executor exports apply the recorded legacy spellings; seed exports keep them in a
    `planc_spelling` member so that a later executor export can restore them."""
    spellings = spellings or {}
    result: dict[str, Any] = {}
    for key in arrange(kind, members, recorded_order):
        if schema == EXECUTOR:
            name = spellings.get(key, key)
        else:
            name = schema_key(kind, key, schema)
        result[name] = members[key]
    if schema == SEED and spellings:
        result[SPELLING_KEY] = dict(spellings)
    return result


# -- storing layouts as attributes --------------------------------------------------------------


def order_attr(order: list[str] | None) -> ArrayAttr[StringAttr] | None:
    return None if order is None else ArrayAttr([StringAttr(k) for k in order])


def order_value(attr: ArrayAttr[StringAttr] | None) -> list[str] | None:
    return None if attr is None else [k.data for k in attr.data]


def spellings_attr(spellings: dict[str, str]) -> DictionaryAttr | None:
    return DictionaryAttr({k: StringAttr(v) for k, v in spellings.items()}) if spellings \
        else None


def spellings_value(attr: DictionaryAttr | None) -> dict[str, str]:
    return {} if attr is None else {k: v.data for k, v in attr.data.items()}


def read_spelling_member(reader: ObjectReader) -> dict[str, str]:
    """The `planc_spelling` member of a seed object (legacy executor spellings)."""
    node = reader.consume(SPELLING_KEY) if reader.schema == SEED else None
    if node is None:
        return {}
    return {key: value.as_str() for key, value in node.items()}
