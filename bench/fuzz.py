"""Mutation fuzzing of planc's readers, commands and outputs.

    python bench/fuzz.py [--mutants 300] [--seed 0] [--lower] [--timeout 20] [--memory-gb 2]
                         [--fork | --in-process] [--formats model,plan,tt,mscclpp,gemini]
                         [--commands 2] [--json FILE]

Seeds are real and shipped documents of every format (the examples, planc's own plans of them,
and the upstream corpus when it is present), ONNX models (the onnx package's light networks and
two small networks built here) and MLIR printed by planc from the JSON seeds. Mutants:

- JSON: a member deleted, a value's type changed, a strange value (huge or negative numbers,
  deep nesting, long or odd strings), an element duplicated, the text truncated, an integer
  literal of 4,301 or more digits, and encodings (a byte order mark, latin-1 or NUL bytes,
  UTF-16).
- ONNX (protobuf surgery): an initializer's dims or element type changed, a node's input
  renamed to nothing, an output produced twice, an initializer or node deleted, the nodes
  shuffled or reversed, attributes and graph input shapes changed, bytes flipped, truncated.
- MLIR (tokens): an integer replaced (beyond i64, 5,000 digits), a type changed (i128), a
  token deleted, repeated or swapped, a second block (`^bb1:`), nesting 50 to 10,000 deep,
  truncation and the encodings above.

Each mutant runs `planc check` and (the `formats`' ordinary mode) up to `--commands` more of
the commands that take it: `simulate`, `plot`, every lowering of the format, `tune` (a budget
of 2), `planc-opt` with and without `-o` (with `--lower`, all of them). A run fails when it
ends in an internal error (any exit but 0, 1 and 3), a time-out, running out of memory (exit
3), an error that is not one line, or a damaged file: the mutant changed, an existing output
file changed by a failing run, a file the user had in an output directory changed, or a
temporary file left behind. Failures are written to `fuzz-failures/` for reproduction.

Runners: a new interpreter per run (the default: isolation, 1.5 runs/s), a child forked from
one warm process (`--fork`: the same limits, CPU seconds, ~10 runs/s), or the fuzzing process
itself (`--in-process`: a CPU-time alarm per run and one memory limit for all; the cheapest).

The test suite runs a fixed-seed slice of this (tests/test_fuzz.py).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

STRANGE = [0, -1, 1 << 62, -(1 << 63) - 1, 1 << 70, 3.5, -0.0, 1e308, "", "x" * 1000,
           "a\nb", None, True, [], {}, [[[]]], "\u00e9\u4e2d", 2 ** 42]
FORMATS = ("model", "plan", "tt", "mscclpp", "gemini", "onnx", "mlir")
SENTINEL = b"a file the user had\n"


def seeds() -> dict[str, list[Path]]:
    """JSON documents to mutate, by format."""
    from tests.conftest import corpus_root

    examples = ROOT / "examples"
    found = {"model": [examples / "ffn.json", examples / "sendrecv_rank0.json",
                       examples / "attention_nodes.json"]}
    corpus = corpus_root()
    if corpus.is_dir():
        found["model"].append(corpus / "ark" / "tutorial_model.json")
        found["plan"] = sorted((corpus / "ark").glob("tutorial_plan*.json"))[:3] + \
            sorted((corpus / "ark").glob("allreduce_sm_plan_gpu0.json"))
        found["tt"] = sorted((corpus / "tt").glob("*.plan.json"))
        found["mscclpp"] = sorted((corpus / "mscclpp").glob("*.json"))[:3] + \
            sorted((corpus / "mscclpp" / "dsl").glob("*.json"))[:3]
        found["gemini"] = sorted((corpus / "gemini").glob("*resnet34*.json"))
    return {k: v for k, v in found.items() if v}


# ---------------------------------------------------------------------------------------------
# Seeds of every format, and the commands that take each
# ---------------------------------------------------------------------------------------------

# {m}: the mutant, {o}: an existing output file (holding SENTINEL), {d}: an existing output
# directory (holding keep.txt), {svg}: an existing image file.
COMMANDS = {
    "model": [["simulate", "{m}"], ["{m}", "-t", "ark", "-o", "{o}"],
              ["{m}", "-t", "tt", "-o", "{o}"], ["{m}", "-t", "gemini", "-o", "{o}"],
              ["tune", "{m}", "-t", "ark", "-o", "{d}", "--budget", "2", "--verify", "1", "-q"]],
    "plan": [["simulate", "{m}"], ["plot", "{m}", "-o", "{svg}"], ["{m}", "-t", "cpu", "-o", "{d}"],
             ["{m}", "-t", "ark", "-o", "{o}"]],
    "tt": [["simulate", "{m}"], ["plot", "{m}", "-o", "{svg}"],
           ["{m}", "-t", "tt-metal", "-o", "{d}"]],
    "mscclpp": [["simulate", "{m}"],
                ["{m}", "-t", "mscclpp", "--mscclpp-schema", "executor", "-o", "{o}"]],
    "gemini": [["simulate", "{m}"], ["plot", "{m}", "-o", "{svg}"],
               ["{m}", "-t", "gemini", "-o", "{o}"]],
    "onnx": [["simulate", "{m}"], ["{m}", "-t", "ark", "-o", "{o}"],
             ["{m}", "-t", "gemini", "-o", "{o}"], ["{m}", "-t", "mlir"]],
    "mlir": [["simulate", "{m}"], ["{m}", "-t", "mlir", "-o", "{o}"], ["planc-opt", "{m}"],
             ["planc-opt", "{m}", "-o", "{o}"]],
}
"""The commands besides `check` that take a format."""

HEAVY = ("simulate", "plot", "tune")
"""Commands run only on small seeds (the corpus' full-size plans simulate for seconds)."""


@dataclass
class Seed:
    format: str
    path: Path
    small: bool

    @property
    def commands(self) -> list[list[str]]:
        return [c for c in COMMANDS[self.format] if self.small or c[0] not in HEAVY]


def all_seeds(scratch: Path) -> dict[str, list[Seed]]:
    """Every format's seeds; the generated ones (small documents, ONNX models, MLIR) are
    written under `scratch`."""
    from tests.conftest import small_ffn_doc

    found: dict[str, list[Seed]] = defaultdict(list)
    for fmt, paths in seeds().items():
        for path in paths:
            # The shipped models and plans have real sizes (a corpus plan simulates for 40 s,
            # tuning its model takes 2 GB): simulated, drawn and tuned are the small ones.
            found[fmt].append(Seed(fmt, path, small=fmt in ("tt", "mscclpp")))
    small = scratch / "seed_ffn.json"
    small.write_text(json.dumps(small_ffn_doc()))
    found["model"].append(Seed("model", small, True))
    made = {"plan": ("-t", "ark"), "gemini": ("-t", "gemini")}
    for fmt, target in made.items():
        path = scratch / f"seed_{fmt}.json"
        if _quiet_planc([str(small), *target, "-o", str(path)]) == 0:
            found[fmt].append(Seed(fmt, path, True))
    for seed in _onnx_seeds(scratch):
        found["onnx"].append(seed)
    for fmt in ("model", "plan", "tt", "mscclpp", "gemini", "onnx"):
        smallest = min(found.get(fmt, []), key=lambda s: s.path.stat().st_size, default=None)
        if smallest is None:
            continue
        path = scratch / f"seed_{fmt}.mlir"
        if _quiet_planc([str(smallest.path), "-t", "mlir", "-o", str(path)]) == 0:
            found["mlir"].append(Seed("mlir", path, smallest.small))
    return dict(found)


def _quiet_planc(args: list[str]) -> int:
    from compiler.driver import main

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main(args)


def _onnx_seeds(scratch: Path) -> list[Seed]:
    try:
        import onnx
    except ImportError:
        return []
    light = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    found = [Seed("onnx", light / f"light_{name}.onnx", True)
             for name in ("bvlc_alexnet", "squeezenet") if (light / f"light_{name}.onnx").exists()]
    for name, model in (("mlp", _mlp()), ("cnn", _cnn())):
        path = scratch / f"seed_{name}.onnx"
        path.write_bytes(model.SerializeToString())
        found.append(Seed("onnx", path, True))
    return found


def _mlp():
    """MatMul, Add, LayerNormalization, Relu, a folded reshape (Shape, Gather, Concat) and
    Softmax, with initializers that hold their values."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.standard_normal((16, 32)).astype(np.float32), "w1"),
             numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b1"),
             numpy_helper.from_array(np.ones(32, np.float32), "g"),
             numpy_helper.from_array(np.array([0], np.int64), "zero"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1")]
    n = helper.make_node
    nodes = [n("MatMul", ["x", "w1"], ["h"], name="mm"), n("Add", ["h", "b1"], ["hb"]),
             n("LayerNormalization", ["hb", "g"], ["ln"], axis=-1),
             n("Relu", ["ln"], ["r"]), n("Shape", ["r"], ["s"]),
             n("Gather", ["s", "zero"], ["s0"], axis=0),
             n("Concat", ["s0", "minus1"], ["shape"], axis=0),
             n("Reshape", ["r", "shape"], ["flat"]), n("Softmax", ["flat"], ["y"], axis=-1)]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [8, 16])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [8, 32])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _cnn():
    """Conv with bias, BatchNormalization, Relu, MaxPool, Flatten and Gemm, with weights."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(1)

    def init(name, *shape):
        return numpy_helper.from_array(rng.uniform(0.5, 1, shape).astype(np.float32), name)

    inits = [init("w", 8, 3, 3, 3), init("b", 8), init("scale", 8), init("shift", 8),
             init("mean", 8), init("var", 8), init("fw", 10, 128), init("fb", 10)]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
             n("BatchNormalization", ["c", "scale", "shift", "mean", "var"], ["bn"]),
             n("Relu", ["bn"], ["r"]),
             n("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             n("Flatten", ["p"], ["f"]), n("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


# ---------------------------------------------------------------------------------------------
# Mutations
# ---------------------------------------------------------------------------------------------


def paths(value, prefix=()):
    """Every (path, value) of a JSON document, containers included."""
    out = [(prefix, value)]
    stack = [(prefix, value)]
    while stack:
        where, node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) \
            if isinstance(node, list) else ()
        for key, child in items:
            out.append(((*where, key), child))
            if isinstance(child, dict | list):
                stack.append(((*where, key), child))
    return out


def mutate(doc, text: str, rng: random.Random) -> str:
    """One structural mutant of the JSON document `doc` (whose text is `text`), as text."""
    kind = rng.choice(["delete", "retype", "strange", "nest", "truncate", "duplicate"])
    if kind == "truncate":
        return text[: rng.randrange(1, max(2, len(text)))]
    where, _ = rng.choice(paths(doc)[1:] or [((), doc)])
    if not where:
        return json.dumps(rng.choice(STRANGE))
    # Copy only the containers on the way to the mutated value; the rest is shared with
    # `doc` and only read (a deep copy of a corpus schedule cost more than its mutant's run).
    doc = copy.copy(doc)
    parent = doc
    for step in where[:-1]:
        parent[step] = copy.copy(parent[step])
        parent = parent[step]
    key = where[-1]
    if kind == "delete":
        del parent[key]
    elif kind == "retype":
        value = parent[key]
        parent[key] = [value] if not isinstance(value, list) else {"x": value}
    elif kind == "strange":
        parent[key] = rng.choice(STRANGE)
    elif kind == "nest":
        # Written as text: Python's own encoder cannot nest this deep.
        depth = rng.choice([50, 300, 5000])
        parent[key] = "@NEST@"
        return json.dumps(doc).replace('"@NEST@"', "[" * depth + "0" + "]" * depth, 1)
    elif kind == "duplicate" and isinstance(parent, list) and parent:
        parent.append(copy.deepcopy(parent[key]))
    return json.dumps(doc)


_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?![\w.])")


def huge_literal(data: bytes, rng: random.Random) -> bytes:
    """A number of the text replaced by an integer of 4,300 to 6,000 digits (Python converts
    at most 4,300)."""
    numbers = list(_NUMBER.finditer(data))
    if not numbers:
        return data + b"9" * 4301
    hit = rng.choice(numbers)
    digits = rng.choice([4300, 4301, 5000, 6000])
    return data[: hit.start()] + b"-" * rng.randrange(2) + b"9" * digits + data[hit.end():]


def encoding(data: bytes, rng: random.Random) -> bytes:
    """The text with a byte order mark, a latin-1 or NUL byte, or as UTF-16."""
    kind = rng.choice(["bom", "latin1", "nul", "utf16", "crlf"])
    at = rng.randrange(len(data) + 1)
    if kind == "bom":
        return b"\xef\xbb\xbf" + data
    if kind == "latin1":
        return data[:at] + rng.choice([b"\xe9", b"\xff", b"\x80"]) + data[at:]
    if kind == "nul":
        return data[:at] + b"\x00" + data[at:]
    if kind == "utf16":
        return data.decode("utf-8", "replace").encode("utf-16")
    return data.replace(b"\n", b"\r\n")


def mutate_json(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    kind = rng.choices(["structure", "huge", "encoding"], [6, 1, 1])[0]
    if kind == "huge":
        return huge_literal(data, rng), kind
    if kind == "encoding":
        return encoding(data, rng), kind
    text = data.decode("utf-8")
    return mutate(json.loads(text), text, rng).encode("utf-8"), kind


ONNX_KINDS = ["dims", "dtype", "producer", "order", "attribute", "io", "flip", "truncate",
              "delete"]


def mutate_onnx(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutant of an ONNX model: protobuf surgery, or bytes flipped or cut."""
    import onnx

    kind = rng.choice(ONNX_KINDS)
    if kind == "flip":
        out = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out), kind
    if kind == "truncate":
        return data[: rng.randrange(len(data) + 1)], kind
    model = onnx.load_model_from_string(data)
    graph = model.graph
    strange = [0, -1, 1, 2, 3, 7, 1 << 31, 1 << 40, -(1 << 62)]
    if kind == "dims" and graph.initializer:
        tensor = rng.choice(graph.initializer)
        dims = list(tensor.dims)
        choice = rng.randrange(3)
        if choice == 0 and dims:
            dims[rng.randrange(len(dims))] = rng.choice(strange)
        elif choice == 1:
            dims.insert(rng.randrange(len(dims) + 1), rng.choice(strange))
        elif dims:
            dims.pop(rng.randrange(len(dims)))
        del tensor.dims[:]
        tensor.dims.extend(dims)
    elif kind == "dtype" and graph.initializer:
        rng.choice(graph.initializer).data_type = rng.randrange(0, 24)
    elif kind == "producer" and graph.node:
        node = rng.choice(graph.node)
        choice = rng.randrange(4)
        if choice == 0 and node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(["nowhere", ""])
        elif choice == 1 and node.output:
            other = rng.choice(graph.node)
            node.output[0] = other.output[0] if other.output else "y"
        elif choice == 2 and graph.initializer:
            del graph.initializer[rng.randrange(len(graph.initializer))]
        elif node.input:                                 # a cycle, or a self-loop
            node.input[0] = rng.choice(rng.choice(graph.node).output or ["x"])
    elif kind == "order" and len(graph.node) > 1:
        nodes = list(graph.node)
        rng.choice([rng.shuffle, list.reverse])(nodes)
        del graph.node[:]
        graph.node.extend(nodes)
    elif kind == "attribute" and graph.node:
        node = rng.choice(graph.node)
        if node.attribute:
            attribute = rng.choice(node.attribute)
            if attribute.ints:
                attribute.ints[rng.randrange(len(attribute.ints))] = rng.choice(strange)
            elif attribute.type == onnx.AttributeProto.INT:
                attribute.i = rng.choice(strange)
            elif attribute.type == onnx.AttributeProto.FLOAT:
                attribute.f = rng.choice([0.0, -1.0, float("nan"), float("inf"), 1e30])
            else:
                node.attribute.remove(attribute)
    elif kind == "io" and graph.input:
        value = rng.choice(graph.input)
        dims = value.type.tensor_type.shape.dim
        if rng.randrange(3) == 0:
            value.type.tensor_type.elem_type = rng.randrange(0, 24)
        elif dims and rng.randrange(2):
            dims[rng.randrange(len(dims))].dim_value = rng.choice(strange[:6] + [1 << 40])
        else:
            dims.add().dim_value = rng.choice([1, 2, 5])
    elif kind == "delete" and graph.node:
        del graph.node[rng.randrange(len(graph.node))]
    return model.SerializeToString(), kind


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[%#^!@]?[\w.$-]+|->|::|[^\s\w]')
_INTEGER = re.compile(r"-?\d+")
MLIR_KINDS = ["integer", "type", "delete", "repeat", "swap", "punctuation", "block", "nest",
              "truncate", "huge", "encoding"]


def mutate_mlir(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutant of MLIR text: a token changed, deleted, repeated or swapped, a second
    block, deep nesting, truncation, an over-long literal or another encoding."""
    kind = rng.choice(MLIR_KINDS)
    if kind == "huge":
        return huge_literal(data, rng), kind
    if kind == "encoding":
        return encoding(data, rng), kind
    text = data.decode("utf-8")
    if kind == "truncate":
        return text[: rng.randrange(len(text) + 1)].encode(), kind
    if kind == "nest":
        return _nest(text, rng).encode(), kind
    if kind == "block":
        lines = text.split("\n")
        at = rng.randrange(1, max(2, len(lines) - 1))
        lines.insert(at, rng.choice(["^bb1:", "^bb0:", "^bb1(%a: i64):"]))
        return "\n".join(lines).encode(), kind
    tokens = list(_TOKEN.finditer(text))
    if kind == "integer":
        tokens = [t for t in tokens if _INTEGER.fullmatch(t.group())] or tokens
    elif kind == "type":
        tokens = [t for t in tokens if re.fullmatch(r"[iuf]\d+|index", t.group())] or tokens
    hit = rng.choice(tokens)
    a, b = hit.span()
    if kind == "integer":
        new = str(rng.choice([1 << 63, 1 << 64, -(1 << 63) - 1, 10 ** 30, -1, 0, 1 << 31,
                              -(10 ** 25)]))
    elif kind == "type":
        new = rng.choice(["i128", "i1", "i32", "f32", "index", "i0", "si64", "ui64", "f128"])
    elif kind == "delete":
        new = ""
    elif kind == "repeat":
        new = hit.group() * 2 if rng.randrange(2) else hit.group() + " " + hit.group()
    elif kind == "swap":
        first, second = sorted((hit, rng.choice(tokens)), key=lambda t: t.start())
        if first.end() > second.start():
            return text.encode(), kind
        return (text[: first.start()] + second.group() + text[first.end(): second.start()]
                + first.group() + text[second.end():]).encode(), kind
    else:
        new = rng.choice(["{", "}", "(", ")", "[", "]", "<", ">", ",", ":", "=", "%", "#",
                          "!", "^", '"', "->"])
    return (text[:a] + new + text[b:]).encode(), kind


def _nest(text: str, rng: random.Random) -> str:
    """Regions, attributes or types nested 50 to 10,000 deep."""
    depth = rng.choice([50, 150, 400, 10_000])
    kind = rng.randrange(3)
    if kind == 0:
        return "builtin.module {\n" * depth + text + "}\n" * depth
    if kind == 1 and "{" in text:
        at = text.index("{", rng.randrange(len(text)) // 2) if "{" in text[len(text) // 2:] \
            else text.index("{")
        return text[: at + 1] + "deep = " + "[" * depth + "]" * depth + ", " + text[at + 1:]
    return text.replace(": i64", ": " + "tuple<" * depth + "i64" + ">" * depth, 1)


MUTATORS = {"onnx": mutate_onnx, "mlir": mutate_mlir}


def make_mutant(fmt: str, data: bytes, rng: random.Random) -> tuple[bytes, str]:
    return MUTATORS.get(fmt, mutate_json)(data, rng)


# ---------------------------------------------------------------------------------------------
# Runners
# ---------------------------------------------------------------------------------------------


@dataclass
class Outcome:
    mutant: str
    args: list[str]
    code: int | None
    stderr: str
    why: str = "internal"
    data: bytes = b""
    format: str = ""


WALL_FACTOR = 5
"""The wall-clock limit of a forked child, in multiples of its CPU-time limit."""


def _dispatch(args: list[str]) -> int:
    """`planc ARGS`, or `planc-opt ARGS[1:]` when ARGS starts with "planc-opt"."""
    if args and args[0] == "planc-opt":
        from compiler.opt import run as opt_run

        try:
            return opt_run(args[1:])
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
    from compiler.driver import main as planc_main

    return planc_main(args)


def run_forked(args: list[str], timeout: float, memory_bytes: int) -> tuple[int | None, str]:
    """`planc ARGS` in a forked child of this process, which has imported planc once: the
    same isolation (time and memory limits, a crash ends only the child) at a tenth of the
    cost of a new interpreter per mutant."""
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:                                        # the child
            try:
                resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
                # A hang burns CPU: the limit is CPU seconds (SIGXCPU), so a loaded machine
                # cannot fake one; the wall alarm (SIGALRM) catches a child that blocks.
                seconds = max(1, math.ceil(timeout))
                resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds + 1))
                signal.alarm(WALL_FACTOR * seconds)
                os.dup2(os.open(os.devnull, os.O_WRONLY), 1)    # results, not judged
                os.dup2(log.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)     # noqa: SIM115 (whoever had them)
                sys.stderr = open(2, "w", closefd=False)     # noqa: SIM115
                code = _dispatch(args)
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:                            # noqa: BLE001
                code = 99                                    # escaped planc's own handlers
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        log.seek(0)
        err = log.read().decode(errors="replace")
    if os.WIFSIGNALED(status):
        why = {signal.SIGXCPU: f"over {timeout:g} CPU s",
               signal.SIGALRM: f"over {WALL_FACTOR * timeout:g} s wall, blocked"}
        return None, f"killed by signal {os.WTERMSIG(status)} " \
            f"({why.get(os.WTERMSIG(status), 'memory or a crash')})"
    return os.WEXITSTATUS(status), err


def run(args: list[str], timeout: float, memory_bytes: int) -> tuple[int | None, str]:
    """`planc ARGS` in a new interpreter, limited in memory and wall time."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))

    code = ("import sys; from compiler.opt import main; main(sys.argv[2:])"
            if args and args[0] == "planc-opt" else
            "import sys; from compiler.driver import main; sys.exit(main())")
    try:
        result = subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT,
                                capture_output=True, text=True, timeout=timeout,
                                preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return None, "time-out"
    return result.returncode, result.stderr


class _Hang(KeyboardInterrupt):
    """Raised by the CPU-time alarm of an in-process run: a KeyboardInterrupt, which planc's
    handlers of errors leave alone (they end it as an interrupt, exit 130); the alarm's flag
    tells the time-out."""


def run_in_process(args: list[str], timeout: float, memory_bytes: int,
                   ) -> tuple[int | None, str]:
    """`planc ARGS` in this process (memory limited once for the whole campaign, see
    `fuzz`), stopped after `timeout` CPU seconds (ITIMER_PROF)."""
    err = io.StringIO()
    fired: list[bool] = []

    def alarm(signum, frame):
        fired.append(True)
        raise _Hang

    previous = signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, timeout)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code: int | None = _dispatch(args)
    except _Hang:
        code = None
    except BaseException as e:                               # noqa: BLE001
        code = 99
        err.write(f"escaped: {type(e).__name__}: {e}\n")
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, previous)
    if fired:
        return None, f"over {timeout:g} CPU s"
    return code, err.getvalue()


def _address_space() -> int:
    """This process' virtual memory in bytes (Linux; 0 where /proc is absent)."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize"))
    except (OSError, StopIteration):
        return 0


def preload() -> None:
    """Import what every run needs, so forked children start warm."""
    import compiler.checking  # noqa: F401
    import compiler.driver  # noqa: F401
    import compiler.opt  # noqa: F401
    from backends import TARGETS
    from passes import get_all_passes

    for target in TARGETS:
        target.load()
    for make in get_all_passes().values():
        make()


# ---------------------------------------------------------------------------------------------
# Judging a run
# ---------------------------------------------------------------------------------------------


def verdict(args: list[str], code: int | None, err: str) -> str | None:
    """Why the run failed (None: it ended cleanly): a hang, an internal error, running out of
    memory, or an error report that is not one line."""
    if code is None:
        return "hang"
    if code == 3:
        return "memory"
    if code not in (0, 1) or "internal error" in err or "Traceback" in err:
        return "internal"
    prog = "planc-opt" if args[0] == "planc-opt" else "planc"
    lines = err.splitlines()
    if prog == "planc-opt" and len(lines) == 3 and set(lines[2].strip()) == {"^"}:
        # planc-opt keeps xDSL's caret snippet (the source line, a caret under the fault)
        # under a parse error's one-line message, as xdsl-opt and mlir-opt print it.
        lines = lines[:1]
    if any(not line.startswith(f"{prog}: ") for line in lines):
        return "not one line"
    errors = [line for line in lines if line.startswith(f"{prog}: error: ")]
    if code == 1 and args[0] != "check" and len(errors) > 1:
        return "not one line"
    return None


@dataclass
class Workspace:
    """The files a run may write: an existing file and directory the user had."""

    root: Path

    def prepare(self) -> dict[str, str]:
        for name in ("out.json", "out.svg"):
            (self.root / name).write_bytes(SENTINEL)
        folder = self.root / "outdir"
        if folder.exists():
            import shutil

            shutil.rmtree(folder)
        folder.mkdir()
        (folder / "keep.txt").write_bytes(SENTINEL)
        return {"o": str(self.root / "out.json"), "svg": str(self.root / "out.svg"),
                "d": str(folder)}

    def damage(self, code: int | None, mutant: Path, data: bytes) -> str | None:
        """What a run did to files it must not touch, if anything."""
        if mutant.read_bytes() != data:
            return "input changed"
        if (self.root / "outdir" / "keep.txt").read_bytes() != SENTINEL:
            return "a file in the output directory changed"
        if code != 0:
            for name in ("out.json", "out.svg"):
                if (self.root / name).read_bytes() != SENTINEL:
                    return f"failing run changed {name}"
            extra = {p.name for p in (self.root / "outdir").iterdir()} - {"keep.txt"}
            if extra - {"tune.sqlite"}:
                return f"failing run wrote {sorted(extra)[:3]}"
        if [p for p in self.root.rglob(".*.tmp")]:
            return "temporary file left"
        return None


# ---------------------------------------------------------------------------------------------
# The campaign
# ---------------------------------------------------------------------------------------------


@dataclass
class Tally:
    mutants: Counter = field(default_factory=Counter)
    runs: Counter = field(default_factory=Counter)
    commands: dict = field(default_factory=lambda: defaultdict(Counter))
    failures: dict = field(default_factory=lambda: defaultdict(Counter))
    kinds: dict = field(default_factory=lambda: defaultdict(Counter))


def fuzz(mutants: int, seed: int, lower: bool, timeout: float, memory_gb: float,
         report=print, fork: bool = False, formats: set[str] | None = None,
         in_process: bool = False, commands: int = 2, tally: Tally | None = None,
         ) -> list[Outcome]:
    """`mutants` mutants of each format in `formats` (all by default), each through `check`
    and `commands` more of the commands that take it (all of them with `lower`)."""
    rng = random.Random(seed)
    memory = int(memory_gb * (1 << 30))
    if fork or in_process:
        preload()
    if in_process:
        # What the process holds already (planc imported, numpy's thread buffers) plus the
        # memory one run may take.
        runner = run_in_process
        resource.setrlimit(resource.RLIMIT_AS, (_address_space() + memory,
                                                resource.getrlimit(resource.RLIMIT_AS)[1]))
    else:
        runner = run_forked if fork else run
    tally = tally if tally is not None else Tally()
    failures: list[Outcome] = []
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        groups = {k: v for k, v in all_seeds(scratch).items() if not formats or k in formats}
        work = Workspace(scratch / "work")
        work.root.mkdir()
        for fmt in sorted(groups):
            for index in range(mutants):
                source = rng.choice(groups[fmt])
                data, kind = make_mutant(fmt, source.path.read_bytes(), rng)
                mutant = work.root / f"m{index}{source.path.suffix}"
                mutant.write_bytes(data)
                tally.mutants[fmt] += 1
                tally.kinds[fmt][kind] += 1
                others = source.commands
                chosen = others if lower else rng.sample(others, min(commands, len(others)))
                for job in [["check", "{m}"], *chosen]:
                    names = {"m": str(mutant), **work.prepare()}
                    args = [a.format(**names) for a in job]
                    code, err = runner(args, timeout, memory)
                    tally.runs[fmt] += 1
                    tally.commands[fmt][_label(job)] += 1
                    why = verdict(args, code, err) or work.damage(code, mutant, data)
                    if why is None:
                        continue
                    tally.failures[fmt][why] += 1
                    failures.append(Outcome(data.decode("utf-8", "replace")[:2000], job, code,
                                            err.strip()[-400:], why, data, fmt))
                    report(f"{fmt} {source.path.name} mutant {index} ({kind}): "
                           f"{' '.join(job)} -> {code} ({why}): {err.strip()[-200:]}")
                mutant.unlink()
    return failures


def _label(job: list[str]) -> str:
    """A command's name in the figures: `check`, `-t ark`, `planc-opt -o`, ..."""
    if job[0] == "{m}":
        return " ".join(job[1:3])
    return "planc-opt -o" if job[0] == "planc-opt" and "-o" in job else job[0]


def summary(tally: Tally) -> str:
    """The campaign's figures as a Markdown table."""
    rows = ["| format | mutants | runs | internal errors | hangs | out of memory | not one "
            "line | damaged files |", "|---|---|---|---|---|---|---|---|"]
    damage = ("input changed", "a file in the output directory changed", "temporary file left")
    for fmt in sorted(tally.mutants):
        f = tally.failures.get(fmt, Counter())
        damaged = sum(n for why, n in f.items() if why in damage or why.startswith("failing"))
        rows.append(f"| {fmt} | {tally.mutants[fmt]:,} | {tally.runs[fmt]:,} | "
                    f"{f['internal']} | {f['hang']} | {f['memory']} | {f['not one line']} | "
                    f"{damaged} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mutants", type=int, default=300, help="per format")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lower", action="store_true",
                        help="run every command that takes the format on each mutant")
    parser.add_argument("--commands", type=int, default=2,
                        help="commands besides check per mutant (default 2, chosen at random)")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds per run (CPU seconds with --fork and --in-process)")
    parser.add_argument("--memory-gb", type=float, default=2.0)
    runners = parser.add_mutually_exclusive_group()
    runners.add_argument("--fork", action="store_true",
                         help="run each mutant in a forked child of one warm process (POSIX)")
    runners.add_argument("--in-process", action="store_true",
                         help="run each mutant in this process (cheapest; one memory limit)")
    parser.add_argument("--formats", default="", help="comma-separated: " + ", ".join(FORMATS))
    parser.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    args = parser.parse_args()
    start, cpu = time.perf_counter(), time.process_time()
    tally = Tally()
    failures = fuzz(args.mutants, args.seed, args.lower, args.timeout, args.memory_gb,
                    fork=args.fork, formats=set(filter(None, args.formats.split(","))),
                    in_process=args.in_process, commands=args.commands, tally=tally)
    out = ROOT / "fuzz-failures"
    if failures:
        out.mkdir(exist_ok=True)
        for i, f in enumerate(failures):
            suffix = {"onnx": ".onnx", "mlir": ".mlir"}.get(f.format, ".json")
            (out / f"seed{args.seed}-failure{i}{suffix}").write_bytes(f.data)
    print(summary(tally))
    seconds = time.perf_counter() - start
    print(f"{sum(tally.mutants.values())} mutants, {sum(tally.runs.values())} runs, "
          f"{len(failures)} failures in {seconds:.0f} s ({time.process_time() - cpu:.0f} CPU s "
          "in this process)")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "seed": args.seed, "mutants": tally.mutants, "runs": tally.runs,
            "commands": tally.commands, "failures": tally.failures, "kinds": tally.kinds,
            "seconds": round(seconds, 1)}, indent=1))


if __name__ == "__main__":
    main()
