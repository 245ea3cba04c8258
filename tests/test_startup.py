"""Start-up: what `compiler._startup` changes behaves as the original, and saves its import."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import pytest
import typing_extensions

from tests.conftest import ROOT


def test_quiet_deprecated_decorates_as_the_original():
    from compiler._startup import quiet_class

    original = typing_extensions.deprecated
    if getattr(original, "_planc_quiet", False):
        original = original.__mro__[1]
    quiet = quiet_class(original)

    def f(x: int) -> int:
        """Doc."""
        return x + 1

    for make in (quiet, original):
        g = make("use h", category=FutureWarning, stacklevel=2)(f)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert g(1) == 2
        assert [(w.category, str(w.message)) for w in caught] == [(FutureWarning, "use h")]
        assert g.__deprecated__ == "use h" and g.__name__ == "f" and g.__doc__ == "Doc."
    assert quiet("x", category=None)(f) is f

    async def c() -> None:
        pass

    assert getattr(quiet("x")(c), "__deprecated__", None) == "x"  # the original's path


def test_the_compile_path_does_not_load_asyncio():
    code = ("import sys; import compiler.driver, compiler.context, passes.ark_plan, "
            "backends.ark_plan, frontends.ark_model; print('asyncio' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "False"


def test_compiling_json_loads_no_mlir_text_modules(tmp_path):
    """IRDL reads assembly formats when an op class is defined, which loads xDSL's format,
    parser and printer modules; planc's dialects read theirs on first use
    (`dialects.utils.format_on_first_use`), so compiling JSON to JSON loads none of them."""
    text_modules = ("xdsl.parser", "xdsl.printer", "xdsl.irdl.declarative_assembly_format")
    code = ("import sys\nfrom compiler import driver\ntry:\n"
            f"    driver.main([{str(ROOT / 'examples' / 'ffn.json')!r}, '--target', 'ark', "
            f"'-o', {str(tmp_path / 'plan.json')!r}])\nexcept SystemExit:\n    pass\n"
            f"print([m for m in {text_modules!r} if m in sys.modules])")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "plan.json").exists()


def test_formats_read_on_first_use_print_and_parse_as_irdl_would():
    """Every op class given its format on first use prints and parses through the same
    format program IRDL would have made of its `assembly_format`."""
    from xdsl.irdl.declarative_assembly_format import FormatProgram

    from dialects import ark, plan, sched

    lazy = [cls for module in (ark, plan, sched) for cls in vars(module).values()
            if isinstance(cls, type) and cls.__module__ == module.__name__
            and "print" in cls.__dict__ and cls.__dict__.get("assembly_format", 0) is None]
    assert {ark.ViewOp, ark.ModelOp, plan.PlanOp, sched.ScheduleOp} <= set(lazy)
    for cls in lazy:
        assert cls.get_irdl_definition().assembly_format is None  # nothing read at import
        source = cls.print.__code__.co_freevars
        assert "load" in source, cls
        program = cls.print.__closure__[source.index("load")].cell_contents()
        assert isinstance(program, FormatProgram)


@pytest.mark.parametrize("target", ["ark", "tt", "cpu", "mlir"])
def test_compiling_does_not_import_numpy(target, tmp_path):
    """numpy is the simulators' (0.07 s of start-up): the cost model's estimates for the
    planners run in plain Python (`targets.ark.cost_model.first_task_work`)."""
    code = ("import sys; from compiler import driver; "
            f"code = driver.main([{str(ROOT / 'examples' / 'ffn.json')!r}, '--target', "
            f"{target!r}, '-o', {str(tmp_path / 'out')!r}]); "
            "print(code, 'numpy' in sys.modules)")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout
    assert out.split()[-2:] == ["0", "False"]


def _make_pair():
    """Two dataclasses alike in their fields (their methods' texts are equal)."""
    import dataclasses

    made = []
    for name in ("A", "B"):
        made.append(dataclasses.make_dataclass(
            name, [("x", int), ("y", "tuple[int, ...]", dataclasses.field(default_factory=tuple)),
                   ("z", float, dataclasses.field(default=1.5))], frozen=True, order=True))
    return made


_METHODS = ("__init__", "__repr__", "__eq__", "__lt__", "__hash__", "__setattr__",
            "__delattr__")


def _code_facts(cls) -> list[tuple]:
    return [(c.co_code, c.co_consts, c.co_names, c.co_varnames, c.co_flags, c.co_filename,
             c.co_freevars) for c in (getattr(cls, m).__code__ for m in _METHODS)]


def test_shared_dataclass_code_compiles_as_exec_does(monkeypatch):
    """`shared_dataclass_code`: dataclasses made with it have the code `exec` of the text
    gives (no `__future__` flag leaks in: annotations stay objects), behave alike, and
    dataclasses alike in their fields share their methods' code objects."""
    import dataclasses

    import compiler  # noqa: F401 -- installs it
    assert getattr(vars(dataclasses).get("exec"), "_planc_shared", False)
    a, b = _make_pair()
    assert all(getattr(a, m).__code__ is getattr(b, m).__code__ for m in _METHODS)
    assert a.__init__ is not b.__init__
    monkeypatch.delitem(vars(dataclasses), "exec")
    c, _ = _make_pair()
    assert c.__init__.__code__ is not a.__init__.__code__
    assert _code_facts(a) == _code_facts(c)
    assert a.__init__.__annotations__ == c.__init__.__annotations__ \
        and a.__init__.__annotations__["x"] is int
    for cls in (a, c):
        one, two = cls(1), cls(2, (3,))
        assert repr(one) == f"{cls.__name__}(x=1, y=(), z=1.5)" and one < two
        assert one == cls(1) and hash(one) == hash(cls(1))
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.x = 3


def test_dataclass_code_cache_file_round_trip(tmp_path):
    """A command writes the texts it compiled to the cache file (under
    PYTHONDONTWRITEBYTECODE only when asked); the next reads them and makes dataclasses whose
    code is what `exec` gives; a damaged file is read as empty, never trusted."""
    cache = tmp_path / "codes.marshal"
    code = (
        "import sys, dataclasses, marshal\n"
        "from compiler import _startup\n"
        "vars(dataclasses).pop('exec', None)\n"
        f"_startup.shared_dataclass_code({str(cache)!r})\n"
        "state = _startup._STATE\n"
        "held = len(state.codes)\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class P:\n    x: int\n    y: str = 'a'\n"
        "_startup.FORCE_WRITE = sys.argv[1] == 'force'\n"
        "_startup.save_dataclass_code()\n"
        "print(held, repr(P(1)), P(1) == P(1), P.__init__.__annotations__['x'] is int)\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}

    def run(mode: str) -> str:
        return subprocess.run([sys.executable, "-c", code, mode], env=env, cwd=ROOT,
                              check=True, capture_output=True, text=True).stdout.split()

    assert run("plain")[0] == "0" and not cache.exists()   # PYTHONDONTWRITEBYTECODE holds
    assert run("force")[0] == "0" and cache.exists()
    first = run("plain")
    assert int(first[0]) > 0 and first[1:] == ["P(x=1,", "y='a')", "True", "True"]
    import marshal

    from compiler._startup import _read_codes
    codes = _read_codes(str(cache))
    for text, compiled in codes.items():
        assert compiled == compile(text, "<string>", "exec", dont_inherit=True)
    cache.write_bytes(marshal.dumps({"def f(): pass": 3}))
    assert _read_codes(str(cache)) == {}
    cache.write_bytes(b"\x00garbage")
    assert _read_codes(str(cache)) == {} and run("plain")[0] == "0"
