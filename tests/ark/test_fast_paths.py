"""The import's fast paths agree with its checked paths.

`_plain_tensor` / `_plain_buffer` build well-formed tensor objects without path bookkeeping and
`dialects.utils.built` skips xDSL's generic parameter check; on generated objects, valid and
broken, each fast result must be None (the checked path decides) or equal to what the checked
path builds, and the checked path must accept it.
"""

from __future__ import annotations

import random

import pytest
from xdsl.dialects.builtin import NameLoc, NoneAttr, StringAttr
from xdsl.irdl import IRDLOperation

from dialects import ark
from dialects.locations import json_location
from frontends import ark_model
from ground.diagnostics import PlancError
from ground.json_reader import JsonNode


def random_tensor(rng: random.Random) -> dict:
    rank = rng.randint(1, 4)

    def ints(lo: int, hi: int, n: int = rank) -> list:
        return [rng.randint(lo, hi) for _ in range(n)]

    shape = ints(1, 64)
    doc = {"Id": rng.randint(0, 50), "DataType": rng.choice(["FP16", "FP32", "INT8"]),
           "Shape": shape, "Strides": [s + rng.randint(0, 3) for s in shape],
           "Offsets": ints(0, 2), "PaddedShape": list(shape),
           "Buffer": {"Id": rng.randint(0, 9), "Rank": rng.choice([-1, 0, 1]),
                      "SendTags": [ints(0, 3, 2)] * rng.randint(0, 1), "RecvTags": []}}
    if rng.random() < 0.3:
        doc["Buffer"]["IsExternal"] = rng.choice([True, False])
    return doc


BREAKAGES = [
    lambda d, r: d["Shape"].__setitem__(0, 0),
    lambda d, r: d["Strides"].__setitem__(0, -1),
    lambda d, r: d["Offsets"].__setitem__(0, -2),
    lambda d, r: d["Offsets"].__setitem__(0, 2 ** 63),
    lambda d, r: d.__setitem__("Shape", d["Shape"] + [1]),
    lambda d, r: d.__setitem__("DataType", "FP64"),
    lambda d, r: d.__setitem__("Id", True),
    lambda d, r: d["Buffer"].__setitem__("Id", "3"),
    lambda d, r: d["Buffer"].__setitem__("IsExternal", None),
    lambda d, r: d["Buffer"].__setitem__("SendTags", [[1, 2, 3]]),
    lambda d, r: d["Buffer"].__setitem__("SendTags", [[1, True]]),
    lambda d, r: d["Buffer"].__setitem__("RecvTags", {"a": "bc"}),
    lambda d, r: d["Buffer"].__setitem__("Extra", 1),
    lambda d, r: d["Buffer"].pop("Rank"),
    lambda d, r: d.pop("PaddedShape"),
    lambda d, r: d.__setitem__("Pads", [0] * len(d["Shape"])),
    lambda d, r: d.__setitem__("Pads", [-1] * len(d["Shape"])),
    # Values equal to well-formed ones but of other JSON types: the layout and buffer caches
    # must not take them for the integers they equal.
    lambda d, r: d["Shape"].__setitem__(0, d["Shape"][0] == 1 or float(d["Shape"][0])),
    lambda d, r: d["Strides"].__setitem__(-1, float(d["Strides"][-1])),
    lambda d, r: d["Offsets"].__setitem__(0, bool(d["Offsets"][0])),
    lambda d, r: d["Buffer"].__setitem__("IsExternal", 1),
    lambda d, r: d["Buffer"].__setitem__("Rank", float(d["Buffer"].get("Rank", 0))),
    lambda d, r: d.__setitem__("PaddedShape", None),
]


def checked(doc: dict) -> ark.TensorType | None:
    try:
        return ark_model._read_tensor(JsonNode(doc))
    except (PlancError, ValueError):
        return None


@pytest.mark.parametrize("seed", range(40))
def test_plain_tensors_agree_with_the_checked_path(seed):
    rng = random.Random(seed)
    for _ in range(20):
        doc = random_tensor(rng)
        for breakage in rng.sample(BREAKAGES, rng.randint(0, 2)):
            breakage(doc, rng)
        ark_model._BUFFERS.clear()
        fast = ark_model._plain_tensor(doc)
        ark_model._BUFFERS.clear()
        slow = checked(doc)
        if fast is not None:
            assert slow is not None and fast == slow, doc


def test_some_generated_tensors_take_each_path():
    # The property above would hold vacuously if the fast path refused everything.
    rng = random.Random(0)
    outcomes = set()
    for _ in range(200):
        doc = random_tensor(rng)
        if rng.random() < 0.5:
            rng.choice(BREAKAGES)(doc, rng)
        ark_model._BUFFERS.clear()
        outcomes.add(ark_model._plain_tensor(doc) is None)
    assert outcomes == {True, False}


def test_built_attributes_equal_constructed_ones():
    buffer = ark.BufferAttr.get(3, 1, [(0, 5)], [], True)
    assert buffer == ark.BufferAttr(*buffer.parameters)
    tensor = ark.TensorType.get(2, "FP16", [4, 8], buffer, strides=[4, 16], offsets=[0, 2])
    assert tensor == ark.TensorType(*tensor.parameters)
    assert json_location("$.Nodes[0]") == NameLoc(StringAttr("$.Nodes[0]"), NoneAttr())


def test_built_attributes_still_run_their_own_rules():
    buffer = ark.BufferAttr.get(3)
    with pytest.raises(Exception, match="stride"):
        ark.TensorType.get(2, "FP16", [4, 8], buffer, strides=[4, 4])
    with pytest.raises(Exception, match="expected a buffer"):
        ark.TensorType.get(2, "FP16", [4, 8], StringAttr("not a buffer"))


def generic_twin(op):
    """`op` rebuilt by xDSL's generic IRDL builder from the same parts."""
    twin = type(op).__new__(type(op))
    reads, writes = op.operand_groups() if isinstance(op, ark.ArkOp) else (
        [op.source] if op.source is not None else [], list(op.after))
    results = [r.type for r in op.results]
    props = {k: v for k, v in op.properties.items() if k != "operandSegmentSizes"}
    single = isinstance(op, ark.ViewOp)
    IRDLOperation.__init__(twin, operands=[list(reads), list(writes)], properties=props,
                           result_types=results if single else [results])
    return twin


@pytest.mark.parametrize("name", ["ffn.json", "attention.json", "allreduce_rank0.json"])
def test_fast_built_ops_equal_generic_built_ones(name):
    from compiler.pipeline import import_file
    from tests.conftest import EXAMPLES

    _, module = import_file(str(EXAMPLES / name))
    count = 0
    for op in module.walk():
        if isinstance(op, ark.ArkOp | ark.ViewOp):
            twin = generic_twin(op)
            assert list(twin.properties.items()) == list(op.properties.items())
            assert list(twin.operands) == list(op.operands)
            assert [r.type for r in twin.results] == [r.type for r in op.results]
            count += 1
    assert count > 10


def test_fast_builder_keeps_the_generic_builders_errors():
    tensor = ark.TensorType.get(0, "FP16", [4], ark.BufferAttr.get(0))
    source = ark.ViewOp(tensor).result
    # Two values for the optional source: xDSL's generic builder refuses, as before.
    with pytest.raises(ValueError, match="source"):
        ark.build_fast(ark.ViewOp.__new__(ark.ViewOp), [[source, source], []], [tensor], {})


def test_json_values_from_attributes_match_the_pattern_path():
    from xdsl.dialects.builtin import (
        FloatAttr,
        IndexType,
        IntAttr,
        IntegerAttr,
        IntegerType,
        f64,
        i1,
        i64,
    )

    from dialects.json_value import _from_attr_matched, from_attr, to_attr

    values = [IntegerAttr(1, i1), IntegerAttr(0, i1), IntegerAttr(5, i64),
              IntegerAttr(3, IntegerType(32)), IntegerAttr(7, IndexType()), IntAttr(4),
              NoneAttr(), FloatAttr(1.5, f64), StringAttr("x"),
              to_attr({"a": [1, True, "s", None, 2.5, {"b": []}]})]
    for attr in values:
        fast, matched = from_attr(attr), _from_attr_matched(attr)
        assert fast == matched and type(fast) is type(matched), attr
        assert repr(fast) == repr(matched)


def test_i64_attributes_equal_the_constructors():
    from xdsl.dialects.builtin import IntegerAttr, i64
    from xdsl.utils.exceptions import VerifyException

    from dialects.utils import i64_attr

    for value in (0, 5, -1, 2 ** 63 - 1, -(2 ** 63), 2 ** 63, 2 ** 64 - 1):
        assert i64_attr(value) == IntegerAttr(value, i64), value
    for value in (2 ** 64, -(2 ** 63) - 1):
        with pytest.raises(VerifyException):
            i64_attr(value)


def test_property_only_ops_equal_generic_built_ones():
    from dialects import plan, sched
    from dialects.plan import Range, range_attr

    r = Range(0, 4)
    built_ops = [sched.KernelOp(3, "matmul"), sched.LaunchOp(1, r, r, r, r, 2),
                 plan.TaskOp(2, 4, 1024), plan.TaskGroupOp(1, range_attr(0, 8), 1)]
    for op in built_ops:
        twin = type(op).__new__(type(op))
        IRDLOperation.__init__(twin, properties=dict(op.properties))
        assert list(twin.properties.items()) == list(op.properties.items())
        assert not op.operands and not op.results and not op.regions
        op.verify_()


def test_assembled_ops_equal_generic_built_ones_field_by_field():
    """`ark.assemble` sets what `Operation.__init__` sets: the same fields, uses and
    results (the comparison above looks at operands, results and properties only)."""
    from xdsl.ir import Operation

    tensor = ark.TensorType.get(0, "FP16", [4], ark.BufferAttr.get(0))
    a, b = ark.ViewOp(tensor).result, ark.ViewOp(tensor).result
    fast = ark.AddOp("add", [a, b], [a], [tensor], node=1)
    props = dict(fast.properties)
    slow = ark.AddOp.__new__(ark.AddOp)
    Operation.__init__(slow, operands=[a, b, a], result_types=[tensor], properties=props)
    assert fast.__dict__.keys() == slow.__dict__.keys()
    for name in ("properties", "attributes", "location", "regions", "_successors"):
        assert getattr(fast, name) == getattr(slow, name), name
    assert list(fast.operands) == list(slow.operands)
    assert [(u.operation, u.index) for u in a.uses] == \
        [(slow, 2), (slow, 0), (fast, 2), (fast, 0)]
    assert [(r.op, r.index, r.type) for r in fast.results] == [(fast, 0, tensor)]
    fast.verify()
    fast.operands = [b, b, b]  # xDSL's own setter undoes the assembled uses
    assert [u.operation for u in a.uses] == [slow, slow]


@pytest.mark.parametrize("seed", range(10))
def test_caches_do_not_vouch_for_a_broken_twin(seed):
    """With the layout and buffer caches warm from a well-formed tensor, its broken twin
    (one breakage: values equal to the good ones but of other types, nulls, bounds) still
    gets None or what the checked path builds."""
    import copy

    rng = random.Random(seed)
    for breakage in BREAKAGES * 8:
        doc = random_tensor(rng)
        if rng.random() < 0.5:
            doc["Buffer"].update(SendTags=[], IsExternal=True)
        assert ark_model._plain_tensor(doc) == checked(doc)
        twin = copy.deepcopy(doc)
        breakage(twin, rng)
        fast = ark_model._plain_tensor(twin)
        if fast is not None:
            assert fast == checked_cold(twin), twin


def checked_cold(doc: dict) -> ark.TensorType | None:
    """`checked` with the buffer cache empty (the checked path reads it too)."""
    warm = dict(ark_model._BUFFERS)
    ark_model._BUFFERS.clear()
    try:
        return checked(doc)
    finally:
        ark_model._BUFFERS.clear()
        ark_model._BUFFERS.update(warm)


def test_shared_dictionaries_keep_types_and_order_apart():
    """`dict_attr` shares one attribute between equal members only: 1, 1.0, true and "1"
    (equal or alike in Python) and the same members in another order each get their own,
    and each converts as `to_attr` converts it."""
    from xdsl.dialects.builtin import DictionaryAttr

    from dialects.json_value import dict_attr, to_attr

    cases = [{"a": 1}, {"a": 1.0}, {"a": True}, {"a": "1"}, {"a": [1]}, {"a": [True]},
             {"a": 1, "b": 2}, {"b": 2, "a": 1}, {"a": -0.0}, {"a": 0.0}, {"a": None}]
    attrs = [dict_attr(c) for c in cases]
    for members, attr in zip(cases, attrs, strict=True):
        assert attr == DictionaryAttr({k: to_attr(v) for k, v in members.items()})
        assert list(attr.data) == list(members)
        assert dict_attr(dict(members)) is attr        # shared when equal
    assert len({id(a) for a in attrs}) == len(cases)


def test_shared_i64_attributes_are_xdsls():
    """`i64_attr` builds its attributes bare: equal to, hashed as and printed like xDSL's
    own, and they pass xDSL's verification."""
    from xdsl.dialects.builtin import IntegerAttr, i64

    from dialects.utils import i64_attr

    for value in (0, 1, -1, 123456789, 2 ** 63 - 1, -2 ** 63):
        attr, reference = i64_attr(value), IntegerAttr(value, i64)
        attr.verify()
        assert attr == reference and hash(attr) == hash(reference)
        assert str(attr) == str(reference)
