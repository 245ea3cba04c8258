"""Start-up: what `compiler._startup` changes behaves as the original, and saves its import."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

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
