"""JSON Schemas (draft 2020-12) of every document format planc reads and writes.

The schemas are data files next to this module (`NAME.schema.json`), read only when first
used. They describe structure: which members an object has, their JSON types, array lengths,
enumerations and integer ranges. Rules that relate members to each other (a shape and its
strides of one rank, producer lists, coverage, ordering) stay in the dialects' verifiers.
Unknown members are allowed everywhere, as planc keeps them.

`validate(name, value)` checks a parsed document with the schema compiled by
`fastjsonschema` and turns the first violation into a `PlancError` at its JSON path, phrased
like the importers' own messages ("expected an integer, got a string ("x")"). Every input
passes it before its importer runs (`InputFormat.check_schema`), so importers read
well-formed documents. `validator(name)` is the reference: `jsonschema`'s validator, which
implements draft 2020-12 as specified; the tests check that both agree, and that a schema
refuses nothing the importers accept beyond the cases they list (integers beyond int64 and
two shapes the importers' fast paths let through).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Callable, Iterator
from importlib import resources
from types import CodeType
from typing import TYPE_CHECKING, Any

from ground import code_cache
from ground.diagnostics import PlancError, did_you_mean, extend_path, one_of

if TYPE_CHECKING:
    from jsonschema import ValidationError
    from jsonschema.protocols import Validator

BASE_URI = "https://planc.invalid/schemas/"
"""Where the schemas' `$id`s live (a reserved domain: the ids are names, not addresses)."""

SCHEMAS: dict[str, str] = {
    "ark-model": "ARK model file (op/tensor graph)",
    "ark-plan": "ARK plan file, any version (current, legacy or torch)",
    "ark-plan-current": "ARK plan file as ARK main writes it (with Architecture)",
    "ark-plan-legacy": "ARK plan file from before mid-2024 (no Architecture)",
    "ark-plan-torch": "ARK plan file of ARK's PyTorch branch (every buffer states IsExternal)",
    "tt": "Tenstorrent runtime plan (tt.plan.json), or an array of them",
    "mscclpp": "MSCCL++ execution plan, either schema (chosen by the first GPU's keys)",
    "mscclpp-executor": "MSCCL++ execution plan, the executor's snake_case schema",
    "mscclpp-seed": "MSCCL++ execution plan, the seed specification's camelCase schema",
    "gemini-ir": "Gemini scheduler IR (*_stschedule.json)",
    "gemini-layers": "Gemini frontend layer description (DNN layers)",
}
"""Every schema planc ships, by name (`planc schema NAME`)."""


def file_name(name: str) -> str:
    return f"{name}.schema.json"


@functools.cache
def load(name: str) -> dict[str, Any]:
    """The schema `name` as a JSON value."""
    if name not in SCHEMAS:
        raise KeyError(name)
    return json.loads(resources.files(__name__).joinpath(file_name(name)).read_text("utf-8"))


def text(name: str) -> str:
    """The schema file `name` exactly as shipped."""
    if name not in SCHEMAS:
        raise KeyError(name)
    return resources.files(__name__).joinpath(file_name(name)).read_text("utf-8")


@functools.cache
def compiled(name: str) -> Callable[[Any], Any]:
    """Schema `name` compiled to Python by `fastjsonschema` (made once, on first use): it
    checks a 10,000-operator model in about a second, where the interpreting validator of
    `jsonschema` takes a minute. It stops at the first violation.

    Generating and compiling that Python costs 0.03-0.2 CPU s a schema (MSCCL++'s the most),
    a third of a small command's run, so the code object is kept in a cache file beside this
    package's bytecode (`ground.code_cache`, one file a schema), stamped with fastjsonschema's
    version and the text of every shipped schema: a later command only loads it."""
    import fastjsonschema

    path = code_cache.cache_path(__file__, f"schema-{name}")
    digest = _digest(fastjsonschema.VERSION)
    cached = _cached(code_cache.read(path), digest)
    if cached is None:
        cached = _generate(name)
        if cached is not None:
            code_cache.write(path, (digest, *cached))
    if cached is None:      # a fastjsonschema whose internals differ: its public compile
        return fastjsonschema.compile(
            copy.deepcopy(inlined(name)), handlers=_HANDLERS, use_default=False,
            use_formats=False)
    code, function = cached
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    return namespace[function]


_HANDLERS = {"https": lambda uri: copy.deepcopy(inlined(_shipped(uri)))}
"""fastjsonschema resolves `$ref`s to the other shipped schemas with these (it rewrites the
`$ref`s of what it is given: give it copies)."""


def _generate(name: str) -> tuple[Any, str] | None:
    """The validator's code object and its function's name, as `fastjsonschema.compile`
    makes them (its `_factory`, then the global state's code and the functions' code run in
    one namespace); None if this fastjsonschema has no such internals."""
    try:
        from fastjsonschema import _factory

        resolver, generator = _factory(copy.deepcopy(inlined(name)), _HANDLERS, {}, False,
                                       False, True, True)
        text = f"{generator.global_state_code}\n{generator.func_code}"
        return compile(text, f"<schema {name}>", "exec"), resolver.get_scope_name()
    except (ImportError, TypeError, AttributeError):
        return None


@functools.cache
def _digest(version: str) -> str:
    """What the generated code depends on: fastjsonschema's version and every shipped
    schema's text."""
    import hashlib

    digest = hashlib.sha256(version.encode())
    for other in sorted(SCHEMAS):
        digest.update(text(other).encode())
    return digest.hexdigest()


def _cached(entry: Any, digest: str) -> tuple[CodeType, str] | None:
    """A cache file's (code object, function name), if it was made from these schemas by
    this fastjsonschema (`digest`)."""
    if type(entry) is tuple and len(entry) == 3 and entry[0] == digest \
            and type(entry[1]) is CodeType and type(entry[2]) is str:
        return entry[1], entry[2]
    return None


_ANNOTATIONS = frozenset({"$ref", "description", "title"})


@functools.cache
def inlined(name: str) -> dict[str, Any]:
    """Schema `name` with every reference to a leaf definition (one that holds no reference
    itself, such as `int64`) replaced by a copy of it. Same meaning; the compiled validator
    runs twice as fast without a function call per integer. (Inlining every non-recursive
    definition is slower again: the compiled code grows large.)"""
    schema = load(name)

    def leaf(ref: str) -> dict[str, Any] | None:
        document, _, pointer = ref.partition("#")
        target: Any = load(document.removesuffix(".schema.json")) if document in \
            {file_name(other) for other in SCHEMAS} else schema if not document else None
        for step in pointer.split("/")[1:]:
            target = target.get(step) if isinstance(target, dict) else None
        return target if isinstance(target, dict) and not _has_ref(target) else None

    def walk(value: Any) -> Any:
        if isinstance(value, list):
            return [walk(v) for v in value]
        if not isinstance(value, dict):
            return value
        target = leaf(value["$ref"]) if isinstance(value.get("$ref"), str) and \
            value.keys() <= _ANNOTATIONS else None
        if target is not None:
            return {**copy.deepcopy(target), **{k: v for k, v in value.items() if k != "$ref"}}
        return {k: walk(v) for k, v in value.items()}

    return walk(schema)


def _has_ref(value: Any) -> bool:
    if isinstance(value, dict):
        return "$ref" in value or any(_has_ref(v) for v in value.values())
    return isinstance(value, list) and any(_has_ref(v) for v in value)


def _shipped(uri: str) -> str:
    """The name of the shipped schema a `$ref` names (only planc's own are ever resolved)."""
    other = uri.removeprefix(BASE_URI).removesuffix(file_name(""))
    if not uri.startswith(BASE_URI) or other not in SCHEMAS:
        raise KeyError(f"no shipped schema at {uri}")
    return other


def _retrieve(uri: str) -> dict[str, Any]:
    return load(_shipped(uri))


def validate(name: str, value: Any) -> None:
    """Raise a `PlancError` at the JSON path of the first violation of schema `name`.
    Documents that `quick.ACCEPTS` certainly finds well-formed skip the compiled validator,
    whose verdict they would get (see `frontends.schemas.quick`)."""
    from frontends.schemas.quick import ACCEPTS

    accepts = ACCEPTS.get(name)
    if accepts is not None and accepts(value):
        return
    from fastjsonschema import JsonSchemaValueException

    try:
        compiled(name)(value)
    except JsonSchemaValueException as e:
        raise PlancError(_message(e.rule, e.rule_definition, e.definition, e.value),
                         path=_path_of_name(e.name)) from None


_STEP = re.compile(r"\.([^.\[]+)|\[(\d+)\]")


def _path_of_name(name: str) -> str:
    """The JSONPath of fastjsonschema's name of a value (`data.Nodes[3].Op`: array indices
    in brackets, object keys after dots, whatever they look like)."""
    steps = [int(index) if index else key
             for key, index in _STEP.findall(name.removeprefix("data"))]
    return extend_path("$", *steps)


# -- the reference validator (the specification's semantics, for tests and tools) -------------


@functools.cache
def validator(name: str) -> Validator:
    """A `jsonschema` validator of schema `name` (draft 2020-12 as specified) that resolves
    references to the other shipped schemas. As the specification says, and as the compiled
    validator does, 1.0 is an integer; the importers then refuse it ("expected an integer")."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    # Every shipped schema registered and crawled once: retrieved on demand, a schema was
    # fetched and crawled again at each reference into it (a third of the validation time).
    registry = Registry(retrieve=lambda uri: Resource.from_contents(_retrieve(uri)))
    registry = registry.with_resources(
        (BASE_URI + file_name(other), Resource.from_contents(load(other))) for other in SCHEMAS)
    return Draft202012Validator(load(name), registry=registry.crawl())


def errors(name: str, value: Any) -> Iterator[ValidationError]:
    """Every violation of schema `name` by `value`, in the validator's order."""
    return validator(name).iter_errors(value)


def first_error(name: str, value: Any) -> ValidationError | None:
    """The reference validator's first violation, narrowed to the most specific cause when
    it comes from a choice between alternatives (anyOf, oneOf)."""
    from jsonschema.exceptions import best_match

    error = next(errors(name, value), None)
    while error is not None and error.context:
        error = best_match(error.context)
    return error


def json_path(error: ValidationError) -> str:
    return extend_path("$", *error.absolute_path)


def message(error: ValidationError) -> str:
    """A reference violation in planc's words."""
    schema = error.schema if isinstance(error.schema, dict) else {}
    return _message(error.validator, error.validator_value, schema, error.instance)


# ---------------------------------------------------------------------------------------------
# Messages in the importers' words
# ---------------------------------------------------------------------------------------------

_TYPE_PHRASES = {"object": "an object", "array": "an array", "string": "a string",
                 "integer": "an integer", "number": "a number", "boolean": "a boolean",
                 "null": "null"}


def _message(keyword: str, expected: Any, schema: Any, value: Any) -> str:
    """A violation of `keyword` (whose value is `expected`, in subschema `schema`) by
    `value`, in the importers' words ('expected ..., got ...')."""
    from ground.json_reader import describe

    schema = schema if isinstance(schema, dict) else {}
    match keyword:
        case "type":
            kinds = [expected] if isinstance(expected, str) else list(expected)
            return f"expected {one_of(_TYPE_PHRASES[k] for k in kinds)}, got {describe(value)}"
        case "required":
            missing = next((k for k in expected if k not in value), expected[0])
            return f"missing required key '{missing}'"
        case "enum" if isinstance(value, str) and all(isinstance(v, str) for v in expected):
            # A misspelt name gets the nearest (`"FP17"`: did you mean FP16?).
            return (f"expected {one_of(expected)}, got {json.dumps(value)}"
                    f"{did_you_mean(value, expected)}")
        case "enum":
            return f"expected {one_of(json.dumps(v) for v in expected)}, got {describe(value)}"
        case "const":
            return f"expected {json.dumps(expected)}, got {describe(value)}"
        case "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum":
            return _range_message(schema, value)
        case "minItems" | "maxItems":
            return _count_message(schema, len(value), "element")
        case "minProperties" | "maxProperties":
            return _count_message(schema, len(value), "member")
        case "uniqueItems":
            return "lists a value twice"
        case "not":
            return _not_message(expected)
        case "propertyNames":
            allowed = expected.get("enum", []) if isinstance(expected, dict) else []
            bad = next((k for k in value if k not in allowed), None) if allowed else None
            if bad is not None:
                return (f"unknown key '{bad}'{did_you_mean(bad, allowed)} (expected "
                        f"{one_of(allowed)})")
        case "anyOf" | "oneOf":
            return _choice_message(expected)
    return f"violates the schema's '{keyword}'"


def _range_message(schema: dict, value: Any) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if "exclusiveMinimum" in schema:
        lo = schema["exclusiveMinimum"] + 1
    if "exclusiveMaximum" in schema:
        hi = schema["exclusiveMaximum"] - 1
    kind = "an integer" if isinstance(value, int) else "a number"
    if lo is not None and hi is not None:
        return f"expected {kind} in [{lo}, {hi}], got {value}"
    bound = f">= {lo}" if lo is not None else f"<= {hi}"
    return f"expected {kind} {bound}, got {value}"


def _count_message(schema: dict, count: int, noun: str) -> str:
    """Phrased like `JsonNode.as_list`: '2 integers', '1 to 4 integers', 'an array of at
    least 1 element', 'an object with exactly one key'."""
    if noun == "member":
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties")
        if lo == hi == 1:
            return f"expected an object with exactly one key, got {count}"
        return f"expected an object of {lo} to {hi} members, got {count}"
    lo, hi = schema.get("minItems", 0), schema.get("maxItems")
    if _integer_items(schema.get("items")):
        noun = "integer"
    if hi is None:
        return f"expected an array of at least {lo} {noun}{'s' * (lo != 1)}, got {count}"
    if lo == hi:
        return f"expected {lo} {noun}{'s' * (lo != 1)}, got {count}"
    return f"expected {lo} to {hi} {noun}s, got {count}"


def _integer_items(items: Any) -> bool:
    if not isinstance(items, dict):
        return False
    ref = items.get("$ref", "")
    return items.get("type") == "integer" or ref.endswith(("/int64", "/count", "/index"))


def _not_message(forbidden: Any) -> str:
    keys = forbidden.get("required") if isinstance(forbidden, dict) else None
    if keys and len(keys) > 1:
        return f"has both {' and '.join(repr(k) for k in keys)}; expected one of them"
    if keys:
        return f"unexpected key '{keys[0]}'"
    return "matches what the schema forbids here"


def _choice_message(alternatives: Any) -> str:
    keys = [a["required"][0] for a in alternatives
            if isinstance(a, dict) and list(a) == ["required"] and len(a["required"]) == 1]
    if keys and len(keys) == len(alternatives):
        return f"missing required key '{keys[0]}'"
    return "matches none of the forms the schema allows here"
