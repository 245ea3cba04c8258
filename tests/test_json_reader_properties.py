"""Property-based tests of the JSON reader (hypothesis): on any text it either returns what
Python's own parser returns, or refuses with one PlancError for a stated reason; it never
raises anything else. The oracle is `json.loads` plus the reader's stated rules (no
duplicate keys, no NaN/Infinity, integers in [-2^63, 2^64), finite floats, nesting at most
MAX_DEPTH, no lone surrogates)."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from ground.diagnostics import PlancError
from ground.json_reader import MAX_DEPTH, parse_json

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(2 ** 70), max_value=2 ** 70),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8))
values = st.recursive(scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=4), inner, max_size=4)),
    max_leaves=30)


def allowed(value) -> bool:
    """Whether the reader's stated rules accept an (already parsed) value."""
    stack = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            return False
        if isinstance(node, bool) or node is None or isinstance(node, str):
            continue
        if isinstance(node, int) and not -(2 ** 63) <= node < 2 ** 64:
            return False
        if isinstance(node, float) and not math.isfinite(node):
            return False
        children = node.values() if isinstance(node, dict) else \
            node if isinstance(node, list) else ()
        stack.extend((c, depth + 1) for c in children)
    return True


FAST_EXAMPLES, FULL_EXAMPLES = 100, 300
"""Examples per property in `-m "not slow"` and in CI. CI runs both twins of a property: the
slow twin draws the other FULL - FAST examples (each twin draws its own)."""


def read_as_python_reads(value):
    text = json.dumps(value)
    try:
        read = parse_json(text).value
    except PlancError:
        assert not allowed(value)
        return
    assert allowed(value) and read == value


def damage_is_one_clean_error(value, cut, junk):
    text = json.dumps(value)
    damaged = text[:cut % (len(text) + 1)] + junk
    try:
        expected = json.loads(damaged)
    except (ValueError, RecursionError):
        expected = PlancError
    try:
        read = parse_json(damaged).value
    except PlancError as e:
        assert "\n" not in str(e)
        return
    assert expected is not PlancError and read == expected


def _property(body, examples: int, *strategies, **options):
    return settings(max_examples=examples, **options)(given(*strategies)(body))


DAMAGE = (values, st.integers(min_value=0, max_value=200), st.text(max_size=3))
test_documents_read_as_python_reads_them = _property(
    read_as_python_reads, FAST_EXAMPLES, values, suppress_health_check=[HealthCheck.too_slow])
test_documents_read_as_python_reads_them_300 = pytest.mark.slow(_property(
    read_as_python_reads, FULL_EXAMPLES - FAST_EXAMPLES, values,
    suppress_health_check=[HealthCheck.too_slow]))
test_any_damage_is_one_clean_error = _property(damage_is_one_clean_error, FAST_EXAMPLES, *DAMAGE)
test_any_damage_is_one_clean_error_300 = pytest.mark.slow(
    _property(damage_is_one_clean_error, FULL_EXAMPLES - FAST_EXAMPLES, *DAMAGE))


@settings(max_examples=30)      # each refusal takes 30 ms; the edges are the examples below
@example(MAX_DEPTH)
@example(MAX_DEPTH + 1)
@example(MAX_DEPTH + 2)
@example(3 * MAX_DEPTH)
@given(st.integers(min_value=1, max_value=3 * MAX_DEPTH))
def test_nesting_limit(depth):
    text = "[" * depth + "]" * depth
    try:
        parse_json(text)
    except PlancError as e:
        assert depth > MAX_DEPTH and "nested deeper" in str(e)
        return
    assert depth <= MAX_DEPTH + 1
