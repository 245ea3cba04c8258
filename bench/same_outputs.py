"""Prove that a refactor changed no output of planc: record every output before, record after,
compare byte for byte.

    git worktree add /tmp/before HEAD          # or any copy of the old code
    python bench/same_outputs.py record /tmp/eq_before --tree /tmp/before
    python bench/same_outputs.py record /tmp/eq_after            # this checkout
    python bench/same_outputs.py compare /tmp/eq_before /tmp/eq_after

`record DIR [--tree PATH]` runs a fixed list of cases with the planc code of checkout PATH
(default: the checkout holding this script) and stores, per case, the stdout, stderr and exit
code of each of its commands and every file they wrote (files or output directories), with
DIR/manifest.json holding the sha256 of each. `compare DIR_A DIR_B` prints each case whose
exit code, stdout, stderr or files differ (with the first differing line of text) and
`N cases, M identical, K differ`; it exits 1 if any differ.

Which code runs: every command is `python3 -c "...; from compiler.driver import main; ..."`
(the entry points are read from PATH's pyproject.toml `[project.scripts]`), with
PYTHONPATH=PATH and setuptools' editable-install finder removed from `sys.meta_path`, so
that only PATH's packages can be imported (a module missing from PATH is an ImportError, not
the copy of the editable install). `record` checks once, before anything else, that every
package of PATH's `[tool.setuptools.packages.find]` imports from inside PATH.

The cases (about 650, running 810 commands; 12 CPU minutes, 6-9 minutes on 2 cores):
  * every input: `examples/*.json` of this checkout (so both trees read the same inputs) and
    every JSON or ONNX file under the corpus (PLANC_CORPUS, else ../shared/corpus next to
    this checkout): `planc check`, `check --strict --json` (whose `format` decides the
    cases below), `simulate --json --seed 0` (with `--trace` where the format has one),
    `plot` (exit code, stdout and stderr; the image itself is not compared), `planc FILE`
    (MLIR on stdout) followed by planc-opt runs on that MLIR, and each `-t TARGET` variant
    that applies to the input's format (the first input of each format gets every variant,
    so that the refusals are recorded as well);
  * `-t mscclpp` from the examples' per-rank ARK models and from generated collectives;
  * `planc tune` (small budgets), `planc schema`, `--help` texts, `compile --json` and `-v`
    (their timings normalised, see `TIMING`), and `examples/api_tour.py` of PATH.

Every command runs in its own scratch directory DIR/work/CASE/, with its inputs copied in and
named relatively, so that file names in messages are the same for both trees; any remaining
occurrence of PATH, of the scratch directory or of DIR is replaced by `<tree>`, `<work>` and
`<dir>` before hashing. Each command has a time limit (--timeout, 120 s): a timeout is
recorded as the result, and a timeout in both trees counts as identical but is flagged.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MANIFEST = "manifest.json"
NOT_COMPARED = "not compared"
# Pictures (matplotlib's PNG bytes are not what a refactor changes) and tune's SQLite results
# (binary, with timestamps; `planc tune --report` prints what they hold) are recorded as
# present, not hashed.
UNCOMPARED_SUFFIXES = (".png", ".svg", ".pdf", ".sqlite", ".sqlite-journal")

AM, AP, TT, GI, GL, MS = "ark-model", "ark-plan", "tt", "gemini-ir", "gemini-layers", "mscclpp"
KNOWN_FORMATS = (AM, AP, TT, GI, GL, MS)


@dataclass(frozen=True)
class Variant:
    """One `planc INPUT -t ...` command: its arguments and the formats it applies to."""

    label: str
    args: tuple[str, ...]
    formats: frozenset[str]
    output: str = "out.json"
    representative_only: bool = False
    """Only on the first input of each format (options that change little per input)."""


def _v(label: str, args: str, formats: tuple[str, ...], output: str = "out.json",
       representative_only: bool = False) -> Variant:
    return Variant(label, tuple(args.split()), frozenset(formats), output, representative_only)


VARIANTS = (
    _v("mlir", "-t mlir", KNOWN_FORMATS, "out.mlir"),
    _v("mlir-generic-debuginfo", "-t mlir --generic --debuginfo", KNOWN_FORMATS, "out.mlir",
       representative_only=True),
    _v("ark-model", "-t ark-model", (AM,)),
    _v("ark-a100", "-t ark --arch a100", (AM, AP)),
    _v("ark-h100", "-t ark --arch h100", (AM, AP)),
    _v("ark-mi300x", "-t ark --arch mi300x", (AM, AP)),
    _v("ark-planner-ark-default", "-t ark --planner ark-default", (AM,)),
    _v("ark-legacy-indented", "-t ark --ark-format legacy --json-layout indented", (AM, AP)),
    _v("ark-torch", "-t ark --ark-format torch", (AP,), representative_only=True),
    _v("tt", "-t tt", (AM, TT)),
    _v("tt-blackhole", "-t tt --arch blackhole", (AM, TT)),
    _v("tt-grid-2x2-block", "-t tt --grid 2x2 --partition block", (AM, TT),
       representative_only=True),
    _v("tt-metal", "-t tt-metal", (AM, TT), "out"),
    _v("tt-metal-blackhole", "-t tt-metal --arch blackhole", (AM, TT), "out"),
    _v("gemini-1x1", "-t gemini --mesh 1x1", (AM, GI, GL)),
    _v("gemini-2x2", "-t gemini --mesh 2x2", (AM, GI, GL)),
    _v("gemini-layers", "-t gemini-layers", (AM, GL)),
    _v("mscclpp", "-t mscclpp", (MS,)),
    _v("mscclpp-executor", "-t mscclpp --mscclpp-schema executor", (MS,)),
    _v("cpu", "-t cpu", (AM, AP), "out"),
    _v("cuda", "-t cuda", (AM, AP), "out"),
    _v("cuda-sm90", "-t cuda --cuda-arch sm_90", (AM, AP), "out", representative_only=True),
)

# The target that writes each format back, for `planc-opt x.mlir -t TARGET` and `--json`.
OWN_TARGET = {AM: "ark-model", AP: "ark", TT: "tt", GI: "gemini", GL: "gemini-layers",
              MS: "mscclpp"}
# Formats that `planc simulate --trace` and `planc plot` draw.
TRACE_FORMATS = (AP, GI, TT)

GENERATED_COLLECTIVES = (
    "--collective allreduce --ranks 4",
    "--collective allreduce --ranks 8 --algorithm allpairs --protocol LL",
    "--collective allreduce --ranks 4 --algorithm ring --instances 2 --out-of-place",
    "--collective allreduce --ranks 4 --algorithm auto --message-size 64K",
    "--collective allgather --ranks 4 --mscclpp-schema executor",
    "--collective reducescatter --ranks 4",
    "--collective broadcast --ranks 4 --root 1",
    "--collective alltoall --ranks 4",
)

SCHEMAS = ("ark-model", "ark-plan", "ark-plan-current", "ark-plan-legacy", "ark-plan-torch",
           "tt", "mscclpp", "mscclpp-executor", "mscclpp-seed", "gemini-ir", "gemini-layers")

# Nondeterministic fields, normalised before hashing (found by recording one tree twice):
# `planc ... -o OUT --json` prints the wall time of each step and pass under "seconds", and
# `-v` logs them as "0.012 s". Those are the only timing figures planc prints; the modeled
# times of `simulate` come from the cost model and are compared exactly.
TIMING = re.compile(rb"\b\d+(\.\d+)? s\b")


def _json_seconds(data: bytes) -> bytes:
    """stdout of `--json` compiles with every number under a "seconds" key replaced."""

    def scrub(node: object, timed: bool = False) -> object:
        if isinstance(node, dict):
            return {k: scrub(v, timed or k == "seconds") for k, v in node.items()}
        if isinstance(node, list):
            return [scrub(v, timed) for v in node]
        if timed and isinstance(node, int | float) and not isinstance(node, bool):
            return "<seconds>"
        return node

    lines = []
    for line in data.splitlines(keepends=True):
        try:
            doc = json.loads(line)
        except ValueError:
            lines.append(line)
            continue
        lines.append(json.dumps(scrub(doc)).encode() + b"\n")
    return b"".join(lines)


NORMALISERS: dict[str, Callable[[bytes], bytes]] = {
    "json-seconds": _json_seconds,
    "verbose-seconds": lambda data: TIMING.sub(b"<t> s", data),
}


@dataclass
class Step:
    tool: str
    """An entry point of PATH's pyproject ("planc", "planc-opt"), or "python" (args[0] is a
    script path relative to the tree)."""
    args: tuple[str, ...]
    stdout_to: str | None = None
    """Also write stdout to this file of the scratch directory (the input of a later step)."""
    stdout_normaliser: str | None = None
    stderr_normaliser: str | None = None


@dataclass
class Case:
    id: str
    inputs: dict[str, Path]
    """Name in the scratch directory -> file copied there."""
    steps: list[Step]
    weight: float = 1.0
    """Rough cost, to start the long cases first."""
    format: str | None = None
    info: dict = field(default_factory=dict)


def planc(*args: str, **kw) -> Step:
    return Step("planc", tuple(args), **kw)


def case_dir_name(case_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=-]+", "~", case_id)


# ------------------------------------------------------------------ inputs and cases


def corpus_dir() -> Path:
    return Path(os.environ.get("PLANC_CORPUS") or REPO.parent / "shared" / "corpus")


def collect_inputs() -> dict[str, Path]:
    """key ("examples/ffn.json", "corpus/ark/...") -> file, in sorted key order."""
    found = {f"examples/{p.name}": p for p in (REPO / "examples").glob("*.json")}
    corpus = corpus_dir()
    if corpus.is_dir():
        for p in corpus.rglob("*"):
            # LICENSE and SOURCES.md files are not planc inputs.
            if p.is_file() and p.suffix in (".json", ".onnx"):
                found[f"corpus/{p.relative_to(corpus).as_posix()}"] = p
    else:
        print(f"warning: no corpus at {corpus} (set PLANC_CORPUS)", file=sys.stderr)
    return dict(sorted(found.items()))


def check_cases(inputs: dict[str, Path]) -> list[Case]:
    cases = []
    for key, path in inputs.items():
        name = path.name
        cases.append(Case(f"{key}::check", {name: path}, [planc("check", name)]))
        cases.append(Case(f"{key}::check-strict-json", {name: path},
                          [planc("check", "--strict", "--json", name)]))
    return cases


def detected_format(stdout: bytes) -> str:
    try:
        fmt = json.loads(stdout).get("format")
    except (ValueError, AttributeError):
        return "unknown"
    return fmt if fmt in KNOWN_FORMATS else "unknown"


def input_cases(inputs: dict[str, Path], formats: dict[str, str]) -> list[Case]:
    cases: list[Case] = []
    representatives = {}
    for key in inputs:
        representatives.setdefault(formats[key], key)
    for key, path in inputs.items():
        fmt, name = formats[key], path.name
        representative = representatives[fmt] == key and fmt != "unknown"
        heavy = fmt in (AM, AP) and key.startswith("corpus/")

        def add(label: str, steps: list[Step], weight: float = 1.0,
                _key: str = key, _fmt: str = fmt, _name: str = name, _path: Path = path) -> None:
            cases.append(Case(f"{_key}::{label}", {_name: _path}, steps, weight * len(steps),
                              _fmt))

        simulate = ["simulate", name, "--json", "--seed", "0", "-q"]
        if fmt in TRACE_FORMATS:
            simulate += ["--trace", "trace.json"]
        add("simulate", [planc(*simulate)], 30 if heavy else 2)
        add("plot", [planc("plot", name, "-o", "plot.png", "-q")], 3)

        steps = [planc(name, stdout_to="x.mlir")]
        if fmt != "unknown":
            steps.append(Step("planc-opt", ("x.mlir",)))
            steps.append(Step("planc-opt", ("x.mlir", "-t", OWN_TARGET[fmt])))
        if fmt == AM:
            steps.append(Step("planc-opt", ("x.mlir", "-p", "ark-compress")))
            steps.append(Step("planc-opt", ("x.mlir", "-p", "ark-compress", "-t", "ark-model")))
        add("mlir+opt", steps)

        for v in VARIANTS:
            applies = fmt in v.formats and (representative or not v.representative_only)
            if representative or applies:
                add(f"t:{v.label}", [planc(name, *v.args, "-o", v.output, "-q")],
                    2 if heavy else 1)
        if representative:
            add("compile-json-verbose", [
                planc(name, "-t", OWN_TARGET[fmt], "-o", "out.json", "--json",
                      stdout_normaliser="json-seconds"),
                planc(name, "-t", "mlir", "-o", "v.mlir", "-v",
                      stderr_normaliser="verbose-seconds"),
                planc("schema", fmt, name),
            ])
    return cases


def extra_cases(inputs: dict[str, Path], tree: Path) -> list[Case]:
    cases: list[Case] = []
    examples = {k.removeprefix("examples/"): p for k, p in inputs.items()
                if k.startswith("examples/")}
    for name in sorted(examples):
        if name.endswith("_rank0.json") and name.replace("_rank0", "_rank1") in examples:
            other = name.replace("_rank0", "_rank1")
            cases.append(Case(f"examples/{name.replace('_rank0', '_rank*')}::t:mscclpp",
                              {name: examples[name], other: examples[other]}, [
                planc(name, other, "-t", "mscclpp", "-o", "out.json", "-q"),
                planc(name, other, "-t", "mscclpp", "--mscclpp-schema", "executor",
                      "-o", "exec.json", "-q"),
                planc("check", "--strict", "--json", "out.json"),
                planc("simulate", "out.json", "--json", "-q"),
            ], 4))
    for spec in GENERATED_COLLECTIVES:
        cases.append(Case(f"generated::{spec.replace('--', '').replace(' ', '_')}", {}, [
            planc("-t", "mscclpp", *spec.split(), "-o", "out.json", "-q"),
            planc("simulate", "out.json", "--json", "-q"),
        ], 2))

    ffn = {"ffn.json": examples["ffn.json"]} if "ffn.json" in examples else {}
    if ffn:
        for target, arch in (("ark", "a100"), ("tt", "wormhole_b0")):
            cases.append(Case(f"tune::ffn-{target}", ffn, [
                planc("tune", "ffn.json", "-t", target, "--arch", arch, "--budget", "4",
                      "--verify", "1", "-o", "tuned", "-q"),
                planc("tune", "--report", "tuned"),
            ], 10))
    cases.append(Case("tune::mscclpp-generated", {}, [
        planc("tune", "-t", "mscclpp", "--collective", "allreduce", "--ranks", "4",
              "--budget", "4", "-o", "tuned", "-q"),
        planc("tune", "--report", "tuned"),
    ], 6))
    if (tree / "examples" / "api_tour.py").is_file():
        cases.append(Case("python::examples/api_tour.py", {}, [
            Step("python", ("examples/api_tour.py", "."))], 5))

    cases.append(Case("cli::help", {}, [
        planc("--help"), planc("--version"), planc("check", "--help"),
        planc("simulate", "--help"), planc("plot", "--help"), planc("tune", "--help"),
        planc("schema", "--help"), Step("planc-opt", ("--help",)),
        planc("no-such-file.json"), planc(), Step("planc-opt", ("no-such-file.mlir",)),
    ]))
    cases.append(Case("cli::schema", {}, [planc("schema"),
                                          *(planc("schema", s) for s in SCHEMAS)]))
    return cases


# ------------------------------------------------------------------ running one tree


class Tree:
    """The checkout whose code runs, and how to start its entry points."""

    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        project = tomllib.loads((self.path / "pyproject.toml").read_text())
        self.scripts: dict[str, str] = project["project"]["scripts"]
        include = (project.get("tool", {}).get("setuptools", {}).get("packages", {})
                   .get("find", {}).get("include", ["compiler*"]))
        self.packages = sorted({p.rstrip("*").split(".")[0] for p in include
                                if (self.path / p.rstrip("*").split(".")[0]).is_dir()})
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("PLANC_") and k != "PYTHONSTARTUP"}
        self.env.update({
            "PYTHONPATH": str(self.path),
            # Fixed string hashes: set iteration orders are then the same in every run.
            "PYTHONHASHSEED": "0",
            # argparse wraps --help to the terminal width.
            "COLUMNS": "80",
            "PYTHONIOENCODING": "utf-8",
            "PYTHONWARNINGS": "ignore::DeprecationWarning",
        })

    # Drop setuptools' editable-install finder (and its path hook) so that a package missing
    # from PYTHONPATH is not imported from the editable checkout instead.
    PRELUDE = (
        "import sys\n"
        "sys.meta_path[:] = [f for f in sys.meta_path\n"
        "    if 'editable' not in getattr(f, '__name__', type(f).__name__).lower()]\n"
        "sys.path[:] = [p for p in sys.path if '__editable__' not in p]\n"
    )

    def command(self, step: Step) -> list[str]:
        if step.tool == "python":
            script = str(self.path / step.args[0])
            code = (f"{self.PRELUDE}import runpy\nsys.argv = [{script!r}, *sys.argv[1:]]\n"
                    f"runpy.run_path({script!r}, run_name='__main__')\n")
            return [sys.executable, "-c", code, *step.args[1:]]
        module, _, func = self.scripts[step.tool].partition(":")
        code = (f"{self.PRELUDE}sys.argv[0] = {step.tool!r}\n"
                f"from {module} import {func} as _entry\nsys.exit(_entry())\n")
        return [sys.executable, "-c", code, *step.args]

    def verify(self, scratch: Path) -> dict[str, str]:
        """Import each package in a child run as the commands are; abort unless all of them
        (and the entry points' modules) come from inside the tree."""
        modules = sorted({*self.packages, *(s.partition(":")[0] for s in self.scripts.values())})
        code = (f"{self.PRELUDE}import importlib, json\n"
                f"print(json.dumps({{m: importlib.import_module(m).__file__ "
                f"for m in {modules!r}}}))\n")
        scratch.mkdir(parents=True, exist_ok=True)
        run = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=self.env,
                             capture_output=True, text=True)
        if run.returncode != 0:
            sys.exit(f"same_outputs: cannot import the packages of {self.path}:\n{run.stderr}")
        files = json.loads(run.stdout)
        for module, file in files.items():
            if not Path(file).resolve().is_relative_to(self.path):
                sys.exit(f"same_outputs: {module} imports from {file}, not from {self.path}")
        return files


def normalise(data: bytes, replacements: list[tuple[bytes, bytes]]) -> bytes:
    for old, new in replacements:
        data = data.replace(old, new)
    return data


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def run_step(tree: Tree, step: Step, cwd: Path, timeout: float) -> tuple[int | None, bytes,
                                                                          bytes, float]:
    start = time.monotonic()
    proc = subprocess.Popen(tree.command(step), cwd=cwd, env=tree.env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        # What it printed before being stopped depends on the machine's speed.
        out, err, code = b"", b"", None
    return code, out, err, time.monotonic() - start


def run_case(tree: Tree, case: Case, root: Path, timeout: float) -> dict:
    name = case_dir_name(case.id)
    work, store = root / "work" / name, root / "cases" / name
    for d in (work, store):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    for dest, src in case.inputs.items():
        shutil.copyfile(src, work / dest)
    replacements = sorted({
        (str(p).encode(), tag)
        for p, tag in ((tree.path, b"<tree>"), (work, b"<work>"), (work.resolve(), b"<work>"),
                       (root, b"<dir>"), (root.resolve(), b"<dir>"))
    }, key=lambda r: -len(r[0]))
    steps = []
    for i, step in enumerate(case.steps):
        code, out, err, seconds = run_step(tree, step, work, timeout)
        if step.stdout_to and code is not None:
            (work / step.stdout_to).write_bytes(out)
        out, err = normalise(out, replacements), normalise(err, replacements)
        if step.stdout_normaliser:
            out = NORMALISERS[step.stdout_normaliser](out)
        if step.stderr_normaliser:
            err = NORMALISERS[step.stderr_normaliser](err)
        (store / f"step{i}.stdout").write_bytes(out)
        (store / f"step{i}.stderr").write_bytes(err)
        steps.append({"argv": [step.tool, *step.args], "exit": code, "timed_out": code is None,
                      "stdout": sha(out), "stderr": sha(err), "seconds": round(seconds, 2)})
    files = {}
    for path in sorted(work.rglob("*")):
        rel = path.relative_to(work).as_posix()
        if rel in case.inputs or path.is_dir():
            continue
        if path.is_symlink() or path.suffix in UNCOMPARED_SUFFIXES:
            files[rel] = NOT_COMPARED
            continue
        data = normalise(path.read_bytes(), replacements)
        dest = store / "files" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
        files[rel] = sha(data)
    shutil.rmtree(work, ignore_errors=True)
    return {"dir": name, "format": case.format, "steps": steps, "files": files}


def run_all(tree: Tree, cases: list[Case], root: Path, jobs: int, timeout: float,
            results: dict[str, dict], done0: int, total: int) -> None:
    order = sorted(cases, key=lambda c: -c.weight)
    done = done0
    with ThreadPoolExecutor(jobs) as pool:
        futures = {pool.submit(run_case, tree, c, root, timeout): c for c in order}
        for future in as_completed(futures):
            case = futures[future]
            result = results[case.id] = future.result()
            done += 1
            codes = ["T/O" if s["timed_out"] else str(s["exit"]) for s in result["steps"]]
            seconds = sum(s["seconds"] for s in result["steps"])
            print(f"[{done}/{total}] {case.id}: exit {','.join(codes)} ({seconds:.1f} s)",
                  flush=True)


def record(root: Path, tree_path: Path, jobs: int, timeout: float) -> int:
    start = time.monotonic()
    tree = Tree(tree_path)
    root = root.resolve()
    if (root / MANIFEST).exists() or (root / "cases").exists():
        for leftover in ("cases", "work"):
            shutil.rmtree(root / leftover, ignore_errors=True)
        (root / MANIFEST).unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    modules = tree.verify(root / "work" / "_verify")
    print(f"tree {tree.path}: " + ", ".join(f"{m} from {f}" for m, f in modules.items()))

    inputs = collect_inputs()
    results: dict[str, dict] = {}
    first = check_cases(inputs)
    # The checks come first: their `format` decides the other cases of each input.
    print(f"{len(first)} checks of {len(inputs)} inputs, then the cases of their formats")
    run_all(tree, first, root, jobs, timeout, results, 0, len(first))
    formats = {}
    for key in inputs:
        out = (root / "cases" / results[f"{key}::check-strict-json"]["dir"] / "step0.stdout")
        formats[key] = detected_format(out.read_bytes())
    rest = input_cases(inputs, formats) + extra_cases(inputs, tree.path)
    names = [case_dir_name(c.id) for c in first + rest]
    if len(set(names)) != len(names):
        sys.exit("same_outputs: two cases share a directory name")
    run_all(tree, rest, root, jobs, timeout, results, len(first), len(first) + len(rest))
    shutil.rmtree(root / "work", ignore_errors=True)

    elapsed = time.monotonic() - start
    manifest = {
        "tree": str(tree.path),
        "modules": modules,
        "python": sys.version.split()[0],
        "inputs": {k: {"sha256": sha(p.read_bytes()), "format": formats[k]}
                   for k, p in inputs.items()},
        "seconds": round(elapsed, 1),
        "cases": dict(sorted(results.items())),
    }
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    commands = sum(len(r["steps"]) for r in results.values())
    timeouts = [k for k, r in results.items() if any(s["timed_out"] for s in r["steps"])]
    print(f"recorded {len(results)} cases ({commands} commands, {len(inputs)} inputs) in "
          f"{elapsed:.0f} s to {root}" + (f"; {len(timeouts)} timed out" if timeouts else ""))
    return 0


# ------------------------------------------------------------------ comparing two records


def first_difference(a: Path, b: Path) -> str:
    da = a.read_bytes() if a.exists() else b""
    db = b.read_bytes() if b.exists() else b""
    la, lb = da.splitlines(), db.splitlines()
    for i in range(max(len(la), len(lb))):
        x = la[i] if i < len(la) else None
        y = lb[i] if i < len(lb) else None
        if x != y:
            def show(line: bytes | None) -> str:
                if line is None:
                    return "<end of text>"
                text = line.decode("utf-8", "replace")
                return repr(text[:300] + ("..." if len(text) > 300 else ""))

            return f"line {i + 1}:\n        A: {show(x)}\n        B: {show(y)}"
    return "same lines, different bytes (line endings or final newline)"


def compare_case(dir_a: Path, dir_b: Path, a: dict, b: dict) -> list[str]:
    problems = []
    ca, cb = dir_a / "cases" / a["dir"], dir_b / "cases" / b["dir"]
    if [s["argv"] for s in a["steps"]] != [s["argv"] for s in b["steps"]]:
        problems.append("different commands (the case lists of the two records differ)")
    for i, (sa, sb) in enumerate(zip(a["steps"], b["steps"], strict=False)):
        what = f"step {i} ({' '.join(sa['argv'])})"
        if sa["exit"] != sb["exit"]:
            problems.append(f"{what}: exit {sa['exit']} vs {sb['exit']}"
                            " (None: timed out)")
        for stream in ("stdout", "stderr"):
            if sa[stream] != sb[stream]:
                diff = first_difference(ca / f"step{i}.{stream}", cb / f"step{i}.{stream}")
                problems.append(f"{what}: {stream} differs at {diff}")
    for rel in sorted(set(a["files"]) | set(b["files"])):
        fa, fb = a["files"].get(rel), b["files"].get(rel)
        if fa is None or fb is None:
            problems.append(f"file {rel}: only in {'B' if fa is None else 'A'}")
        elif fa != fb:
            diff = first_difference(ca / "files" / rel, cb / "files" / rel)
            problems.append(f"file {rel}: differs at {diff}")
    return problems


def compare(dir_a: Path, dir_b: Path) -> int:
    ma = json.loads((dir_a / MANIFEST).read_text())
    mb = json.loads((dir_b / MANIFEST).read_text())
    for key in sorted(set(ma["inputs"]) | set(mb["inputs"])):
        ia, ib = ma["inputs"].get(key), mb["inputs"].get(key)
        if ia is None or ib is None or ia["sha256"] != ib["sha256"]:
            print(f"note: input {key} is not the same file in both records")
    ids = sorted(set(ma["cases"]) | set(mb["cases"]))
    differ, flagged = 0, []
    for case_id in ids:
        a, b = ma["cases"].get(case_id), mb["cases"].get(case_id)
        if a is None or b is None:
            problems = [f"case only in {'B' if a is None else 'A'}"]
        else:
            problems = compare_case(dir_a, dir_b, a, b)
            if not problems and any(s["timed_out"] for s in a["steps"]):
                flagged.append(case_id)
        if problems:
            differ += 1
            print(f"DIFFER {case_id}")
            for p in problems:
                print(f"    {p}")
    for case_id in flagged:
        print(f"FLAGGED {case_id}: timed out in both records (counted as identical)")
    print(f"{len(ids)} cases, {len(ids) - differ} identical, {differ} differ"
          + (f" ({len(flagged)} identical by timing out in both)" if flagged else ""))
    return 1 if differ else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    rec = commands.add_parser("record", help="run every case with one tree's code")
    rec.add_argument("dir", type=Path, help="where to store the outputs (created)")
    rec.add_argument("--tree", type=Path, default=REPO,
                     help="checkout whose planc code runs (default: %(default)s)")
    rec.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    rec.add_argument("--timeout", type=float, default=120.0,
                     help="seconds each command may run (default 120)")
    cmp = commands.add_parser("compare", help="compare two records; exit 1 if any case differs")
    cmp.add_argument("dir_a", type=Path)
    cmp.add_argument("dir_b", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        return record(args.dir, args.tree, args.jobs, args.timeout)
    return compare(args.dir_a, args.dir_b)


if __name__ == "__main__":
    sys.exit(main())
