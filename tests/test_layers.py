"""The layers of planc (docs/architecture.md): every import points down, and nothing cycles.

    compiler/                       the driver: commands, API, check/simulate/plot/tune
    frontends/  passes/  backends/  readers, transformations, writers
    targets/<runtime>/              machine models: cost models, simulators, interpreters, checks
    dialects/                       the IR
    devices/                        device descriptions
    ground/                         diagnostics, JSON with paths, dtypes, progress

An import counts wherever it stands (module level or inside a function, where planc defers
what start-up does not need), and so does a module named by a string the lazy registries hold
(`"targets.ark.plan_simulator:simulate_plan"` in `frontends.FORMATS`): a deferred import is an
import. Each top-level folder and each sub-package is one package; there must be no cycle
between packages and none between files.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.xdist_group("import-graph")
"""One pytest-xdist worker runs this file: the module-scoped `graph` (every module parsed and
walked, about 2.7 CPU s) is then built once, not once on each worker that gets one of its
tests."""

LAYERS = {"ground": 0, "devices": 1, "dialects": 2, "targets": 3,
          "frontends": 4, "passes": 4, "backends": 4, "compiler": 5}
"""Each top-level package's floor: a package may import its own floor and those below."""

MODULE_NAME = re.compile(r"^([a-z_]+(?:\.[a-z_0-9]+)+)(?::\w+)?$")
"""A string that names a module (`pkg.mod` or `pkg.mod:attr`), as the registries write them."""


def planc_modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of planc's packages, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for top in LAYERS:
        for path in sorted((root / top).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The planc module `name` is in (itself, or the closest enclosing one)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str, modules: dict[str, Path],
               is_package: bool = False) -> set[str]:
    """The planc modules `source` (the text of `module`) imports or names."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parts = parts if is_package else parts[:-1]
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                     for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = MODULE_NAME.match(node.value)
            if match and match.group(1).split(".")[0] in LAYERS:
                names = [match.group(1)]
        for name in names:
            target = _known(name, modules)
            if target is not None and target != module:
                found.add(target)
    return found


def import_graph(root: Path = ROOT) -> nx.DiGraph:
    modules = planc_modules(root)
    graph = nx.DiGraph()
    graph.add_nodes_from(modules)
    for module, path in modules.items():
        for target in imports_of(module, path.read_text(encoding="utf-8"), modules,
                                 path.name == "__init__.py"):
            graph.add_edge(module, target)
    return graph


def package_of(module: str, packages: set[str]) -> str:
    """The package a module belongs to: a package is its own, a module its parent's."""
    return module if module in packages else module.rpartition(".")[0]


def package_graph(graph: nx.DiGraph) -> nx.DiGraph:
    packages = {m for m in graph if any(o.startswith(m + ".") for o in graph)}
    result = nx.DiGraph()
    for a, b in graph.edges:
        pa, pb = package_of(a, packages), package_of(b, packages)
        if pa != pb:
            result.add_edge(pa, pb)
    return result


def upward_imports(graph: nx.DiGraph) -> list[str]:
    """Every import from a layer into a higher one."""
    return [f"{a} imports {b}" for a, b in sorted(graph.edges)
            if LAYERS[b.split(".")[0]] > LAYERS[a.split(".")[0]]]


def cycle(graph: nx.DiGraph) -> list[str]:
    """One cycle of `graph` as its nodes in order, or []."""
    try:
        return [a for a, _ in nx.find_cycle(graph)]
    except nx.NetworkXNoCycle:
        return []


@pytest.fixture(scope="module")
def graph() -> nx.DiGraph:
    return import_graph()


def test_every_import_points_down(graph):
    assert upward_imports(graph) == []


def test_no_cycle_between_packages(graph):
    assert cycle(package_graph(graph)) == []


def test_no_cycle_between_files(graph):
    assert cycle(graph) == []


def test_ground_imports_nothing_of_planc(graph):
    assert [f"{a} -> {b}" for a, b in graph.edges
            if a.startswith("ground") and not b.startswith("ground")] == []


def test_targets_never_reach_passes_frontends_backends_or_driver(graph):
    assert [f"{a} -> {b}" for a, b in graph.edges if a.startswith(("targets", "devices"))
            and b.split(".")[0] in ("passes", "frontends", "backends", "compiler")] == []


def test_the_graph_sees_deferred_imports_and_registry_strings(graph):
    # A function-level import (the driver defers the Python API's checking module) and a module
    # named in `frontends.FORMATS` are edges: otherwise the checks above could pass vacuously.
    assert graph.has_edge("compiler.driver", "compiler.checking")
    assert graph.has_edge("frontends", "targets.ark.plan_simulator")
    assert graph.number_of_edges() > 500


def test_the_checks_catch_an_upward_import_and_cycles(tmp_path):
    # A tree in which a dialect imports the driver, and two target files import each other.
    files = {"ground/__init__.py": "",
             "dialects/__init__.py": "",
             "dialects/ir.py": "def f():\n    from compiler import driver\n",
             "targets/__init__.py": "",
             "targets/ark/__init__.py": "",
             "targets/ark/a.py": "from targets.ark import b\n",
             "targets/ark/b.py": "X = 'targets.ark.a:run'\n",
             "targets/tt/__init__.py": "",
             "targets/tt/c.py": "from targets.ark import a\n",
             "targets/ark/d.py": "from targets.tt import c\n",
             "compiler/__init__.py": "",
             "compiler/driver.py": "from dialects import ir\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    fake = import_graph(tmp_path)
    assert upward_imports(fake) == ["dialects.ir imports compiler.driver"]
    assert sorted(cycle(fake.subgraph(["targets.ark.a", "targets.ark.b"]))) == [
        "targets.ark.a", "targets.ark.b"]
    packages = package_graph(fake)
    assert sorted(cycle(packages.subgraph(["targets.ark", "targets.tt"]))) == [
        "targets.ark", "targets.tt"]
    assert sorted(cycle(packages.subgraph(["compiler", "dialects"]))) == ["compiler", "dialects"]


def test_the_architecture_page_names_every_package(graph):
    # docs/architecture.md opens with the layers and one row per package: a new package
    # without its row would leave a newcomer's "where does this live?" unanswered.
    page = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    layers = page[:page.index("## Why")]
    packages = set(package_graph(graph)) | {m for m in graph if m.count(".") == 0}
    assert sorted(p for p in packages if f"`{p}`" not in layers) == []
