"""The JSON Schemas of `frontends/schemas`: every real file and every document planc writes
passes them, generated mutants are refused at the right JSON path, the compiled validator
(fastjsonschema, what planc runs) agrees with the reference one (jsonschema, the draft 2020-12
specification), and nothing the schemas refuse is something the importers accept."""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from frontends import FORMATS, detect_format, format_named
from frontends import schemas as S
from ground.diagnostics import PlancError, extend_path
from ground.json_reader import JsonNode
from tests.conftest import EXAMPLES, corpus_root

NOT_DOCUMENTS = {"TT_RUNTIME_PLAN.schema.json"}
"""JSON files of the corpus that are not documents of a format (TileLang-TT's own schema)."""


def corpus_files() -> list:
    root = corpus_root()
    files = sorted(p for p in root.rglob("*.json") if p.name not in NOT_DOCUMENTS) \
        if root.is_dir() else []
    if not files:
        return [pytest.param(None, marks=pytest.mark.skip(reason=f"no corpus at {root}"))]
    return [pytest.param(f, id=str(f.relative_to(root))) for f in files]


def refusal(name: str, value: Any) -> str | None:
    """'PATH: message' of the compiled validator's refusal, or None if it accepts."""
    try:
        S.validate(name, value)
    except PlancError as e:
        return f"{e.path}: {e.message}"
    return None


def reference_refusal(name: str, value: Any) -> str | None:
    error = S.first_error(name, value)
    return None if error is None else f"{S.json_path(error)}: {S.message(error)}"


def assert_valid(name: str, value: Any) -> None:
    assert refusal(name, value) is None, refusal(name, value)
    assert reference_refusal(name, value) is None, reference_refusal(name, value)


# ---------------------------------------------------------------------------------------------
# The schemas themselves
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(S.SCHEMAS))
def test_every_schema_is_valid_draft_2020_12(name):
    from jsonschema import Draft202012Validator

    schema = S.load(name)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == S.BASE_URI + S.file_name(name)


def test_every_input_format_has_a_schema():
    assert all(f.schema in S.SCHEMAS for f in FORMATS)


def test_schemas_are_loaded_lazily():
    """Importing the driver reads no schema; the first validation reads the ones it needs."""
    import subprocess
    import sys

    code = ("import sys, compiler.driver, frontends.schemas as S; "
            "assert S.load.cache_info().currsize == 0; assert 'fastjsonschema' not in "
            "sys.modules and 'jsonschema' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_unknown_members_are_allowed_everywhere():
    """No schema closes an object: `additionalProperties: false` and `unevaluated*` would
    refuse the newer fields planc keeps."""
    def walk(value):
        if isinstance(value, dict):
            assert value.get("additionalProperties") is not False
            assert "unevaluatedProperties" not in value
            for member in value.values():
                walk(member)
        elif isinstance(value, list):
            for member in value:
                walk(member)

    for name in S.SCHEMAS:
        walk(S.load(name))


def test_gemini_ir_schema_follows_the_field_tables():
    """The Gemini schema names every field of `dialects.gemini`'s tables, with the same
    required ones (a second reading of the format, from the dialect)."""
    from dialects import gemini as g

    defs = S.load("gemini-ir")["$defs"]
    for key, cls in {"destination": g.DestinationAttr, "source": g.SourceAttr,
                     "dramStore": g.DramStoreOp, "dramLoad": g.DramLoadOp,
                     "ifmap": g.IfmapOp, "ofmap": g.OfmapOp, "weight": g.WeightOp,
                     "l2Tensor": g.L2TensorOp, "wl0Tensor": g.Wl0TensorOp, "tile": g.TileOp,
                     "workload": g.WorkloadOp}.items():
        assert {f.key for f in cls.FIELDS} <= set(defs[key]["properties"]), key
        assert set(defs[key].get("required", ())) == {f.key for f in cls.FIELDS if f.required}


def test_mscclpp_schemas_name_every_key_in_its_spelling():
    """Every canonical key of `frontends.mscclpp_schema.KEYS` that planc types appears in
    each schema under that schema's spelling."""
    from frontends.mscclpp_schema import SEED_KEYS

    for schema in ("seed", "executor"):
        defs = S.load(f"mscclpp-{schema}")["$defs"]
        channel = json.dumps(defs["channel"])
        for canonical, seed_key in SEED_KEYS["channel"].items():
            assert f'"{seed_key if schema == "seed" else canonical}"' in channel
        assert ("inputChunks" in defs["gpu"]["required"]) == (schema == "seed")


# ---------------------------------------------------------------------------------------------
# Real files and planc's own documents
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", corpus_files())
def test_every_corpus_file_validates(path: Path):
    value = json.loads(path.read_text())
    fmt = detect_format(value)
    assert fmt is not None, path
    assert_valid(fmt.schema, value)
    if fmt.name == "ark-plan":
        version = "current" if "Architecture" in value else "legacy"
        assert_valid(f"ark-plan-{version}", value)
    if fmt.name == "mscclpp":
        assert_valid("mscclpp-executor", value)


def _outputs(tmp_path: Path) -> Iterator[tuple[str, str, Any]]:
    """(what, schema, document) for what planc writes from the examples and the corpus."""
    from compiler import api
    from compiler.pipeline import load_inputs

    models = ["ffn.json", "attention.json", "attention_nodes.json"]
    for name in models:
        model = api.load(EXAMPLES / name)
        yield f"{name} -t ark-model", "ark-model", api.compile(model, "ark-model")
        for version in ("current", "legacy", "torch"):
            yield (f"{name} -t ark --ark-format {version}", f"ark-plan-{version}",
                   api.compile(model, "ark", ark_format=version))
        if name == "ffn.json":      # ARK's default tiles do not divide the others
            yield f"{name} -t ark --planner ark-default", "ark-plan", api.compile(
                model, "ark", planner="ark-default")
        yield f"{name} -t gemini-layers", "gemini-layers", api.compile(model, "gemini-layers")
    ffn = api.load(EXAMPLES / "ffn.json")
    yield "ffn.json -t tt", "tt", api.compile(ffn, "tt")
    yield "ffn.json -t gemini --mesh 2x2", "gemini-ir", api.compile(ffn, "gemini", mesh="2x2")
    for pair in ("allreduce", "sendrecv"):
        _, module = load_inputs([str(EXAMPLES / f"{pair}_rank{r}.json") for r in (0, 1)])
        for schema in ("seed", "executor"):
            yield (f"{pair}_rank*.json -t mscclpp --mscclpp-schema {schema}",
                   f"mscclpp-{schema}", api.compile(module, "mscclpp", mscclpp_schema=schema))
    corpus = corpus_root()
    for path in sorted(corpus.glob("mscclpp/*.json")) + sorted(corpus.glob("mscclpp/*/*.json")):
        try:
            module = api.load(path)
        except PlancError:
            continue            # the two plans the current executor would get wrong
        for schema in ("seed", "executor"):
            yield (f"{path.name} -t mscclpp --mscclpp-schema {schema}", f"mscclpp-{schema}",
                   api.compile(module, "mscclpp", mscclpp_schema=schema))
    for path in sorted(corpus.glob("gemini/*.json")):
        fmt = detect_format(json.loads(path.read_text()))
        target = "gemini" if fmt.name == "gemini-ir" else "gemini-layers"
        yield f"{path.name} -t {target}", fmt.schema, api.compile(api.load(path), target)
    for path in sorted(corpus.glob("tt/tilelang*.json")):
        yield f"{path.name} -t tt", "tt", api.compile(api.load(path), "tt")


@pytest.mark.slow
def test_every_document_planc_writes_validates(tmp_path):
    seen = set()
    validated = set()       # attention.json and attention_nodes.json give the same ARK plans
    for what, schema, text in _outputs(tmp_path):
        seen.add(schema)
        if (schema, text) in validated:
            continue
        validated.add((schema, text))
        value = json.loads(text)
        assert refusal(schema, value) is None, (what, refusal(schema, value))
        assert reference_refusal(schema, value) is None, (what, reference_refusal(schema, value))
        general = {"ark-plan-current": "ark-plan", "ark-plan-legacy": "ark-plan",
                   "ark-plan-torch": "ark-plan", "mscclpp-seed": "mscclpp",
                   "mscclpp-executor": "mscclpp"}.get(schema)
        if general:
            assert refusal(general, value) is None, (what, refusal(general, value))
    assert seen == set(S.SCHEMAS) - {"ark-plan", "mscclpp"} | {"ark-plan"}


@pytest.mark.parametrize("args", [
    ("-t", "mscclpp", "--collective", "allreduce", "--ranks", "4", "--algorithm", "ring"),
    ("-t", "mscclpp", "--collective", "allreduce", "--ranks", "4", "--algorithm", "nvls"),
    ("-t", "mscclpp", "--collective", "allgather", "--ranks", "2", "--protocol", "LL",
     "--message-size", "64K"),
    ("-t", "mscclpp", "--collective", "reducescatter", "--ranks", "2", "--instances", "2"),
    ("-t", "mscclpp", "--collective", "broadcast", "--ranks", "3", "--root", "1"),
    ("-t", "mscclpp", "--collective", "alltoall", "--ranks", "2", "--out-of-place"),
])
@pytest.mark.parametrize("schema", ["seed", "executor"])
def test_generated_collectives_validate(planc, tmp_path, args, schema):
    out = tmp_path / "plan.json"
    result = planc(*args, "--mscclpp-schema", schema, "-o", out)
    assert result.code == 0, result.err
    value = json.loads(out.read_text())
    assert_valid(f"mscclpp-{schema}", value)
    assert_valid("mscclpp", value)


# ---------------------------------------------------------------------------------------------
# Mutants
# ---------------------------------------------------------------------------------------------


def seed_documents() -> dict[str, Any]:
    """One small document of each schema (from the examples, a two-operator model and the
    corpus). The ARK model and plan are the two-operator model's: they hold every member and
    kind of value at every place that examples/ffn.json and its plan hold one (compared by
    path and JSON type), at a fifth of the size, and the reference validator's time grows
    with the size (2-15 ms a mutant)."""
    from compiler import api
    from frontends.model_builder import ModelBuilder

    ffn = api.load(EXAMPLES / "ffn.json")
    m = ModelBuilder()
    m.relu(m.matmul(m.tensor([1, 64, 64]), m.tensor([64, 64]), transpose_other=True))
    small = m.finish()
    corpus = corpus_root()
    docs = {
        "ark-model": json.loads(api.compile(small, "ark-model")),
        "ark-plan": json.loads(api.compile(small, "ark")),
        "tt": _first(json.loads(api.compile(small, "tt"))),
        "gemini-layers": json.loads(api.compile(ffn, "gemini-layers")),
        "gemini-ir": json.loads(api.compile(small, "gemini")),
    }
    plan = corpus / "mscclpp" / "executor-tests__execution-plans__reduce_pack_tbg.json"
    if plan.is_file():
        docs["mscclpp-executor"] = json.loads(plan.read_text())
        docs["mscclpp-seed"] = json.loads(api.compile(api.load(plan), "mscclpp",
                                                      mscclpp_schema="seed"))
    return docs


def _first(plans: Any) -> Any:
    return plans[0] if isinstance(plans, list) else plans


def sites(value: Any, steps: tuple = ()) -> Iterator[tuple]:
    """The path of every value in a document."""
    yield steps
    children = value.items() if isinstance(value, dict) else \
        enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from sites(child, (*steps, key))


def at(value: Any, steps: tuple) -> Any:
    for step in steps:
        value = value[step]
    return value


OTHER_TYPES = ["x", 1.5, None, True, [], {}, 7]
EDGE_INTEGERS = [-1, 0, 2 ** 31, 2 ** 32, 2 ** 63, 2 ** 64, -2 ** 63 - 1]


def mutants(doc: Any, rng: random.Random, count: int) -> Iterator[tuple[str, tuple, Any]]:
    """`count` single-site mutants: a member deleted, an integer replaced by an edge value
    (negative, zero, beyond 32 and 64 bits), or a value replaced by one of another JSON type
    (kind, site, mutated document)."""
    everything = [s for s in sites(doc) if s]
    for steps in rng.sample(everything, min(count, len(everything))):
        parent, key = at(doc, steps[:-1]), steps[-1]
        mutant = copy.deepcopy(doc)
        target = at(mutant, steps[:-1])
        if isinstance(parent, dict) and rng.random() < 0.4:
            del target[key]
            yield "delete", steps, mutant
            continue
        old = parent[key]
        if type(old) is int and rng.random() < 0.5:
            target[key] = rng.choice([v for v in EDGE_INTEGERS if v != old])
            yield "edge", steps, mutant
            continue
        choices = [v for v in OTHER_TYPES if type(v) is not type(old)
                   or (type(old) is int and v == 7)]
        target[key] = rng.choice(choices)
        if target[key] == old and type(target[key]) is type(old):
            target[key] = "x"
        yield "retype", steps, mutant


def importer_accepts(schema: str, value: Any) -> bool:
    """Does the format's importer, then its verifiers, accept `value` (without the schema)?"""
    from dialects.locations import verify_module

    fmt = format_named({"ark-plan": "ark-plan", "mscclpp-seed": "mscclpp",
                        "mscclpp-executor": "mscclpp"}.get(schema, schema))
    try:
        verify_module(fmt.import_document(JsonNode(value)))
    except Exception:  # noqa: BLE001 -- any refusal counts; crashes are what schemas prevent
        return False
    return True


STRICTER_THAN_IMPORTERS: list[tuple[str, str]] = [
    (r"expected an integer in \[-9223372036854775808, 9223372036854775807\], got -?\d+$",
     "integers beyond int64: issue 12 has them refused at import, and the schemas are that "
     "check; some importer paths keep them in unbounded IntAttrs (tensor and buffer ids, "
     "Gemini sizes)"),
    (r"\.Buffer\.(SendTags|RecvTags): expected an array, got an object$",
     "an empty object for an ARK buffer's tags: the importer's buffer cache reads `{}` as the "
     "empty list it looks like (frontends/ark_model.py:_buffer_key)"),
    (r"\.(PaddedShape|Pads): expected an array, got null$",
     "a null PaddedShape or Pads: the importer's fast path for tensors reads null as absent "
     "(frontends/ark_model.py:_plain_tensor) and exports the tensor without it"),
]
"""Mutants the schemas refuse though the importers accept them ('PATH: message' pattern,
why). Each is an importer leniency the schema closes, none a document planc should read."""


def documented(refused: str) -> bool:
    import re

    return any(re.search(pattern, refused) for pattern, _ in STRICTER_THAN_IMPORTERS)


@pytest.fixture(scope="module")
def seeds():
    return seed_documents()


@pytest.mark.parametrize("first, count", [(0, 50), pytest.param(50, 150, marks=pytest.mark.slow)])
@pytest.mark.parametrize("schema", ["ark-model", "ark-plan", "tt", "gemini-layers",
                                    "gemini-ir", "mscclpp-executor", "mscclpp-seed"])
def test_mutants_are_refused_where_they_are_wrong(seeds, schema, first, count):
    """Generated single-site mutants: the compiled validator and the reference validator
    agree on every verdict; a refusal names the mutated site or one of its ancestors (a
    deleted member is missing from its object; a choice between forms fails as a whole).
    The first 50 mutants of each in `-m "not slow"` (the reference validator takes 2-15 ms a
    mutant), the next 100 in the slow case (CI runs both: 150 in all)."""
    if schema not in seeds:
        pytest.skip("no corpus")
    doc = seeds[schema]
    rng = random.Random(f"{schema}-12")
    refused = 0
    for kind, steps, mutant in itertools.islice(mutants(doc, rng, count), first, None):
        fast, reference = refusal(schema, mutant), reference_refusal(schema, mutant)
        assert (fast is None) == (reference is None), (kind, steps, fast, reference)
        if fast is None:
            continue
        refused += 1
        site = extend_path("$", *steps)
        path = fast.split(": ", 1)[0]
        assert site.startswith(path) or path.startswith(site), (kind, site, fast)
    assert refused > 20 * (count - first) // 150, refused


@pytest.mark.parametrize("schema", ["ark-model", "ark-plan", "tt", "gemini-layers",
                                    "gemini-ir", "mscclpp-executor", "mscclpp-seed"])
def test_schema_refuses_nothing_the_importer_accepts(seeds, schema):
    """Brute-force cross-check on mutants: whatever the schema refuses, the importer and
    verifiers (run without the schema) refuse too, but for the documented cases."""
    if schema not in seeds:
        pytest.skip("no corpus")
    doc = seeds[schema]
    rng = random.Random(f"{schema}-cross")
    stricter = []
    checked = 0
    for kind, steps, mutant in mutants(doc, rng, 120):
        if refusal(schema, mutant) is None:
            continue
        checked += 1
        site = f"{schema}: {extend_path('$', *steps)}"
        refused = refusal(schema, mutant)
        if not documented(refused) and importer_accepts(schema, mutant):
            stricter.append((kind, site, refused))
    assert not stricter, stricter
    assert checked > 10, checked


def test_the_cross_check_can_tell_acceptance():
    """`importer_accepts` is not always False: a member planc does not know is accepted."""
    doc = json.loads((EXAMPLES / "ffn.json").read_text())
    doc["Nodes"][0]["Op"]["Newer"] = {"field": [1, 2]}
    assert importer_accepts("ark-model", doc)
    doc["Nodes"][0]["Op"]["IsVirtual"] = 0
    assert not importer_accepts("ark-model", doc)


@pytest.mark.parametrize("schema, edit, expected", [
    ("ark-model", lambda d: d["Nodes"][1]["Op"].update(IsVirtual="no"),
     "$.Nodes[1].Op.IsVirtual: expected a boolean, got a string (\"no\")"),
    ("ark-model", lambda d: d["Nodes"][0]["Op"]["ReadTensors"][1]["Buffer"].pop("SendTags"),
     "$.Nodes[0].Op.ReadTensors[1].Buffer: missing required key 'SendTags'"),
    ("ark-model", lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Shape=[1, 2, 3, 4, 5]),
     "$.Nodes[0].Op.ReadTensors[0].Shape: expected 1 to 4 integers, got 5"),
    ("ark-model", lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Strides=[0, 1, 1]),
     "$.Nodes[0].Op.ReadTensors[0].Strides[0]: expected an integer in [1, 9223372036854775807], "
     "got 0"),
    ("ark-model", lambda d: d["Nodes"][0].update(Ops=[]),
     "$.Nodes[0]: has both 'Op' and 'Ops'; expected one of them"),
    ("ark-model", lambda d: d["Nodes"][0].pop("Op"),
     "$.Nodes[0]: missing required key 'Op'"),
    ("ark-model", lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"INT": 1, "BOOL": True}),
     "$.Nodes[0].Op.Args.X: expected an object with exactly one key, got 2"),
    ("ark-model", lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"INT": 2 ** 31}),
     "$.Nodes[0].Op.Args.X.INT: expected an integer in [-2147483648, 2147483647], got "
     "2147483648"),
    ("ark-model", lambda d: d.update(WorldSize="1"),
     "$.WorldSize: expected an integer, got a string (\"1\")"),
    ("ark-plan", lambda d: d["ProcessorGroups"][0].update(ProcessorRange=[0]),
     "$.ProcessorGroups[0].ProcessorRange: expected 2 to 3 integers, got 1"),
    ("ark-plan", lambda d: d["TaskInfos"][0]["Ops"][0].pop("Config"),
     "$.TaskInfos[0].Ops[0]: missing required key 'Config'"),
    ("tt", lambda d: d["work_partition"]["(0,0)"][0].update(io="0"),
     "$.work_partition['(0,0)'][0].io: expected an integer, got a string (\"0\")"),
    ("tt", lambda d: d.pop("layouts"), "$: missing required key 'layouts'"),
    ("gemini-layers", lambda d: next(iter(d.values())).update(output_shape=[[1, 2, 3, 4, 5]]),
     None),
    ("mscclpp-executor", lambda d: d["gpus"][0]["channels"][0].update(channel_type="nvls"),
     "$.gpus[0].channels[0].channel_type: expected memory, port or switch, got \"nvls\""),
    ("mscclpp-executor", lambda d: d["gpus"][1]["threadblocks"][0]["ops"][0].pop("name"),
     "$.gpus[1].threadblocks[0].ops[0]: missing required key 'name'"),
    ("mscclpp-seed", lambda d: d["gpus"][0].pop("inputChunks"), None),
])
def test_hand_made_mutants(seeds, schema, edit, expected):
    """Hand-made mutants: the exact one-line message, phrased like the importers'."""
    if schema not in seeds:
        pytest.skip("no corpus")
    doc = copy.deepcopy(seeds[schema])
    edit(doc)
    found = refusal(schema, doc)
    assert found is not None
    if expected is not None:
        assert found == expected
    assert reference_refusal(schema, doc) is not None


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def test_schema_errors_come_before_the_importer(planc, tmp_path):
    doc = json.loads((EXAMPLES / "ffn.json").read_text())
    doc["Nodes"][2]["Op"]["ReadTensors"][0]["Buffer"]["Rank"] = [0]
    path = tmp_path / "m.json"
    path.write_text(json.dumps(doc))
    result = planc(path, "-t", "ark-model")
    assert result.code == 1 and result.out == ""
    assert result.err == (f"planc: error: {path}: $.Nodes[2].Op.ReadTensors[0].Buffer.Rank: "
                          "expected an integer, got an array of 1\n")


def test_planc_schema_prints_lists_and_checks(planc, tmp_path):
    listing = planc("schema")
    assert listing.code == 0 and all(name in listing.out for name in S.SCHEMAS)
    for name in S.SCHEMAS:
        printed = planc("schema", name)
        assert printed.code == 0 and json.loads(printed.out) == S.load(name)
    ok = planc("schema", "ark-model", EXAMPLES / "ffn.json")
    assert ok.code == 0 and ok.out.strip() == f"{EXAMPLES / 'ffn.json'}: ok: ark-model"
    bad = planc("schema", "ark-plan", EXAMPLES / "ffn.json")
    assert bad.code == 1 and bad.err == (f"planc: error: {EXAMPLES / 'ffn.json'}: $: missing "
                                         "required key 'NumProcessors'\n")


def compiled_accepts(name: str, value: Any) -> bool:
    from fastjsonschema import JsonSchemaValueException

    try:
        S.compiled(name)(value)
    except JsonSchemaValueException:
        return False
    return True


QUICK_EDITS = [
    lambda d: d["Nodes"][0].update(Ops=[d["Nodes"][0]["Op"]]),
    lambda d: d["Nodes"][0].update(Ops=[]),
    lambda d: d["Nodes"][0].pop("Op"),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Id=True),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Id=2 ** 63),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Shape"].__setitem__(0, 1.0),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Shape"].__setitem__(0, True),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Shape"].extend([1, 1, 1, 1]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Offsets=[]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Pads=[-1]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(PaddedShape=None),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(SendTags=[[1]]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(RecvTags=[[1, 2 ** 64]]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(IsExternal=1),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(DataType="FP64"),
    # the lists of one bound are checked together (`quick._tensor`): each list still counts
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(DataType=["FP16"]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Id=-2 ** 63 - 1),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Strides=[0]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Strides=[2 ** 63]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Offsets=[True]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Offsets=[-1]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(PaddedShape=[0]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(PaddedShape=[1, 1, 1, 1, 1]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(PaddedShape=[]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Pads=[1.0]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Pads=[0, 0, 0, 0, 0]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Pads=None),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Pads=[2 ** 63]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Pads=[0], PaddedShape=[1]),  # fine
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(Id=False),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(Rank=2 ** 63),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(SendTags=[[1, True]]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(SendTags=[[1, 2]]),  # fine
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(RecvTags="x"),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0]["Buffer"].update(RecvTags=[[1, 2, 3]]),
    lambda d: d["Nodes"][0]["Op"]["ReadTensors"][0].update(Buffer=[]),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"INT": 2 ** 31}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"UINT64": -1}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"FLOAT": True}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"DIMS": [1, 2, 3, 4, 5]}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"INT": 1, "BOOL": True}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"OFFSET": {"BufferId": 1}}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"TENSOR": {"Id": 1}}),
    lambda d: d["Nodes"][0]["Op"]["Args"].update(X={"STRING": "x"}),
    lambda d: d.update(WorldSize=0),
    lambda d: d["Nodes"][0].update(ProducerNodeIds=[False]),
]


def test_quick_acceptance_never_accepts_what_the_schema_refuses(seeds):
    """`quick.ACCEPTS` decides nothing but "certainly well-formed": on the seed, on generated
    mutants and on hand-made type confusions, whatever it accepts the compiled validator
    accepts too (and it accepts the seed and most well-formed mutants: not vacuous)."""
    from frontends.schemas.quick import ACCEPTS

    accepts = ACCEPTS["ark-model"]
    doc = seeds["ark-model"]
    assert accepts(doc)
    rng = random.Random("quick")
    edited = []
    for edit in QUICK_EDITS:
        mutant = copy.deepcopy(doc)
        edit(mutant)
        edited.append(mutant)
    _quick_agrees("ark-model", [*edited, *(m for _, _, m in mutants(doc, rng, 400))])


def _work(d: Any) -> list:
    return next(iter(d["work_partition"].values()))


TT_QUICK_EDITS = [
    lambda d: _work(d)[0].update(io=True),
    lambda d: _work(d)[0].update(io=2 ** 63),
    lambda d: _work(d)[0].update(io=-1),  # fine: the schema's io is any int64
    lambda d: _work(d)[0].update(io=1.0),
    lambda d: _work(d)[0].pop("jo"),
    lambda d: _work(d)[-1].pop("jo"),
    lambda d: _work(d)[-1].update(jo="1"),
    lambda d: _work(d)[-1].update(len_k=True),
    lambda d: _work(d)[-1].update(len_k=None),  # fine
    lambda d: _work(d)[-1].update(len_k=2 ** 63),
    lambda d: _work(d)[-1].update(len_k=-2 ** 63 - 1),
    lambda d: _work(d)[-1].update(tile_order=3),
    lambda d: _work(d)[-1].update(tile_order=None),  # fine
    lambda d: _work(d)[-1].update(other=[1]),  # fine: unknown members are kept
    lambda d: _work(d).append([1, 2]),
    lambda d: _work(d).append({"io": 1}),
    lambda d: _work(d).append({"io": 1, "jo": 2, "x": 3, "y": 4}),
    lambda d: _work(d).clear(),  # fine
    # a member the first item lacks, so that no column holds it
    lambda d: _work(d).__setitem__(slice(None), [{"io": 0, "jo": 0}, {"io": 0, "jo": 1,
                                                                       "len_k": "x"}]),
    lambda d: _work(d).__setitem__(slice(None), [{"io": 0, "jo": 0}, {"io": 0, "jo": 1,
                                                                       "len_k": 2}]),  # fine
    lambda d: d["work_partition"].update(x={"io": 1, "jo": 1}),
    lambda d: d.update(core_grid=[1]),
    lambda d: d.update(core_grid=[1, True]),
    lambda d: d["core_ranges"][0].update(start=[1, 2, 3]),
    lambda d: d["core_ranges"][0].update(replicated=1),
    lambda d: d["core_ranges"][0].pop("extent"),
    lambda d: d.update(core_ranges={}),
    lambda d: next(iter(d["layouts"].values())).update(shard=1),
    lambda d: next(iter(d["layouts"].values())).update(stride=[1]),
    lambda d: next(iter(d["layouts"].values())).update(interleave="yes"),
    lambda d: next(iter(d["layouts"].values())).update(tile_id_order=None),
    lambda d: d.update(layouts=[]),
    lambda d: d.update(schema_version=1.5),
    lambda d: d.update(backend_version=3),
    lambda d: d.pop("layouts"),
    lambda d: d["kernel"].pop("grid_tiles"),
    lambda d: d["kernel"].update(len_k=True),
    lambda d: d["kernel"].update(len_k=None),  # fine
    lambda d: d["kernel"]["operator"].update(IsVirtual=0),
    lambda d: d["kernel"].pop("operator"),
]


def test_quick_acceptance_of_tt_plans_never_accepts_what_the_schema_refuses(seeds):
    """`quick.tt_plans` (the work items checked a member at a time over whole arrays) accepts
    nothing the compiled validator refuses: on a planned tt plan, an array of plans, an empty
    array, hand-made edits of every member and generated mutants; and it accepts the plan and
    most well-formed mutants (not vacuous)."""
    from frontends.schemas.quick import ACCEPTS

    accepts = ACCEPTS["tt"]
    doc = seeds["tt"]
    assert "kernel" in doc and accepts(doc) and accepts([doc, doc]) and not accepts([])
    edited = []
    for edit in TT_QUICK_EDITS:
        mutant = copy.deepcopy(doc)
        edit(mutant)
        edited += [mutant, [doc, mutant]]
    _quick_agrees("tt", [*edited,
                         *(m for _, _, m in mutants(doc, random.Random("quick-tt"), 300))])


def _quick_agrees(schema_name: str, documents: list) -> None:
    """Whatever the quick acceptance of `schema_name` accepts the compiled validator accepts,
    and it accepts more than half of what the validator does (not vacuous)."""
    from frontends.schemas.quick import ACCEPTS

    accepts = ACCEPTS[schema_name]
    quick = schema = 0
    for mutant in documents:
        verdict = compiled_accepts(schema_name, mutant)
        if accepts(mutant):
            assert verdict, mutant
            quick += 1
        schema += verdict
    assert quick > schema // 2, (quick, schema)


# ---------------------------------------------------------------------------------------------
# The validators' code cache
# ---------------------------------------------------------------------------------------------


def test_a_cached_validator_is_loaded_not_generated_and_judges_alike(tmp_path, monkeypatch):
    """The second command loads the validator the first one wrote (nothing generated), and it
    refuses and accepts what the freshly generated one does; a file from other schemas or
    another fastjsonschema (its stamp differs) is ignored and replaced."""
    from ground import code_cache

    files: dict[str, Path] = {}
    monkeypatch.setattr(code_cache, "FORCE", True)
    monkeypatch.setattr(code_cache, "cache_path",
                        lambda _, stem: str(files.setdefault(stem, tmp_path / stem)))
    fresh = S.compiled.__wrapped__("ark-model")
    path = files["schema-ark-model"]
    assert path.is_file()
    generated = []
    real = S._generate
    monkeypatch.setattr(S, "_generate", lambda name: generated.append(name) or real(name))
    loaded = S.compiled.__wrapped__("ark-model")
    assert generated == []
    good = json.loads((EXAMPLES / "ffn.json").read_text())
    bad = copy.deepcopy(good)
    bad["Rank"] = "zero"
    for document in (good, bad):
        verdicts = []
        for validator in (fresh, loaded):
            try:
                validator(document)
                verdicts.append(None)
            except Exception as e:  # noqa: BLE001 -- the verdict is the exception's text
                verdicts.append(str(e))
        assert verdicts[0] == verdicts[1], verdicts
    assert verdicts[0] is not None               # the mutant is refused by both
    code_cache.write(str(path), ("another digest", *real("tt")))
    S.compiled.__wrapped__("ark-model")
    assert generated == ["ark-model"]              # the stale file was not used ...
    assert code_cache.read(str(path))[0] != "another digest"     # ... and was replaced
