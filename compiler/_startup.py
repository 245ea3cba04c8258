"""What planc does before anything imports xDSL, to keep start-up short.

xDSL marks a function of `xdsl.dialects.builtin` with `typing_extensions.deprecated`, whose
decorator (for a plain function) imports `asyncio` to ask whether the function is a coroutine
function: 40-60 ms of every planc run spent loading an event loop planc never uses.
`quiet_deprecated()` gives `typing_extensions` a `deprecated` that decorates plain functions
exactly as the original does (the same warning on each call, the same `__deprecated__`) and
asks `inspect` instead; coroutine functions, classes and anything else go to the original.
It changes nothing where `asyncio` is loaded already (nothing to save then) or where
`typing_extensions` has no such class.

`shared_dataclass_code()`: `dataclasses` writes each method of a dataclass (`__init__`,
`__repr__`, `__eq__`, `__hash__`, `__setattr__`, ...) as Python text and `exec`s it, compiling
it anew every time: 1,100 compilations (50-70 ms) in one `planc MODEL --target ark`, 40% of
them of a text compiled before (dataclasses alike in their fields). It gives the module an
`exec` that compiles each text once, exactly as `exec` does (file "<string>", no inherited
`__future__` flags: `dataclasses` has none), and runs the code object; the functions made are
new objects as before, only their (immutable) code objects are shared.
"""

from __future__ import annotations

import builtins
import sys


def quiet_deprecated() -> None:
    if "asyncio" in sys.modules or "xdsl.dialects.builtin" in sys.modules:
        return
    try:
        import typing_extensions
    except ImportError:
        return
    original = getattr(typing_extensions, "deprecated", None)
    if not isinstance(original, type) or getattr(original, "_planc_quiet", False) \
            or original.__module__ != "typing_extensions":
        return

    typing_extensions.deprecated = quiet_class(original)


def quiet_class(original: type) -> type:
    """`original` (typing_extensions' `deprecated`), deciding plain functions itself."""
    import functools
    import inspect
    import warnings

    class deprecated(original):  # noqa: N801 -- the name it stands for
        _planc_quiet = True

        def __call__(self, arg):
            if self.category is None or not inspect.isfunction(arg) \
                    or inspect.iscoroutinefunction(arg) \
                    or getattr(arg, "_is_coroutine", None) is not None:
                return super().__call__(arg)
            msg, category, stacklevel = self.message, self.category, self.stacklevel

            @functools.wraps(arg)
            def wrapper(*args, **kwargs):
                warnings.warn(msg, category=category, stacklevel=stacklevel + 1)
                return arg(*args, **kwargs)

            arg.__deprecated__ = wrapper.__deprecated__ = msg
            return wrapper

    deprecated.__doc__ = original.__doc__
    return deprecated


def shared_dataclass_code() -> None:
    import dataclasses

    if "exec" in vars(dataclasses):  # done already (or someone else's)
        return
    codes: dict[str, object] = {}
    run = builtins.exec

    def exec(source, /, *args, **kwargs):  # noqa: A001 -- stands in for the builtin
        if type(source) is str:
            code = codes.get(source)
            if code is None:
                code = codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
            source = code
        return run(source, *args, **kwargs)

    exec._planc_shared = True
    dataclasses.exec = exec
