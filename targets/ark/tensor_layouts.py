"""Plain figures of a tensor type's layout, made once per layout and shared by the passes.

The `sched` passes ask every operand of every operator about its layout: its shape as a tuple
and padded to four dims, the bytes it spans, the keys that compare layouts (tiling signatures,
memory reuse), the fields of its byte region. A tensor type's layout is four attributes (data
type, shape, strides, offsets) that tensors of one layout share (`ark.TensorType.get` keeps
one dense array per list of integers), so the figures are computed once per distinct set of
those attributes (`Layout`) and each tensor keeps its `Layout` (in its `__dict__`, like the
other caches of immutable attributes: equality and hashing ignore it). A tensor's buffer is
not part of its layout: a tensor moved to another buffer keeps the same `Layout`.
"""

from __future__ import annotations

import math

from dialects import ark

MAX_LAYOUTS = 4096
"""The most attribute sets `_LAYOUTS` remembers (it starts over beyond)."""


def pad4(values: tuple[int, ...], fill: int) -> tuple[int, ...]:
    """`values` with leading `fill`s up to four dims."""
    return (fill,) * (4 - len(values)) + values if len(values) < 4 else values


class Layout:
    """The figures of one layout (see the module docstring)."""

    __slots__ = ("attributes", "data_type", "element_bytes", "shape", "strides", "offsets",
                 "shape4", "extents4", "offsets4", "span_bytes", "size_bytes", "tile_key",
                 "alloc_key")

    def __init__(self, tensor: ark.TensorType):
        self.attributes = (tensor.dtype, tensor.shape, tensor.strides, tensor.offsets)
        """Kept, so that no other attribute takes their `id`s while this is remembered."""
        values = ark.int_values
        self.data_type = tensor.dtype.data
        self.element_bytes = ark.DATA_TYPE_BYTES[self.data_type]
        self.shape = values(tensor.shape)
        self.strides = values(tensor.strides)
        self.offsets = values(tensor.offsets)
        self.shape4 = pad4(self.shape, 1)
        """The shape with leading ones up to four dims (`sched_graph.shape4`)."""
        self.extents4 = pad4(self.strides, 1)
        self.offsets4 = pad4(self.offsets, 0)
        self.span_bytes = math.prod(self.strides) * self.element_bytes
        """Bytes of buffer the layout covers (`TensorType.span_bytes`)."""
        self.size_bytes = math.prod(self.shape) * self.element_bytes
        """Bytes of the tensor's own elements."""
        self.tile_key = (self.shape, self.strides, self.data_type)
        """What tiling signatures compare (`sched_tile._layout`)."""
        self.alloc_key = (self.shape, self.strides, self.offsets, self.element_bytes)
        """What memory reuse compares (`sched_allocate._layout`)."""


_LAYOUTS: dict[tuple[int, int, int, int], Layout] = {}
"""Layouts by the `id`s of their attributes. An entry keeps its attributes alive, so while it
is here no other object has those `id`s."""


def layout_of(tensor: ark.TensorType) -> Layout:
    """The `Layout` of `tensor`, kept with it. Hot loops read
    `tensor.__dict__.get("_planc_pass_layout") or layout_of(tensor)`."""
    found = tensor.__dict__.get("_planc_pass_layout")
    if found is not None:
        return found
    key = (id(tensor.dtype), id(tensor.shape), id(tensor.strides), id(tensor.offsets))
    found = _LAYOUTS.get(key)
    if found is None:
        if len(_LAYOUTS) >= MAX_LAYOUTS:
            _LAYOUTS.clear()
        found = _LAYOUTS[key] = Layout(tensor)
    tensor.__dict__["_planc_pass_layout"] = found
    return found
