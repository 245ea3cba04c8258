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
new objects as before, only their (immutable) code objects are shared. The code objects are
kept in a file beside the bytecode (as Python keeps a module's), so a command compiles only
texts no earlier one did (another 30 ms).
"""

from __future__ import annotations

import atexit
import builtins
import sys
from types import CodeType

from ground import code_cache


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


class _Codes:
    """The compiled dataclass method texts of this process, and those read from the cache
    file (`_code_file`), which a planc command writes back when it compiled new ones, as
    Python writes `__pycache__` files: the next command compiles none of them."""

    def __init__(self, path: str | None):
        self.path = path
        self.codes: dict[str, CodeType] = _read_codes(path) if path else {}
        self.used: set[str] = set()
        self.new = False


_MAX_CODES = 2048
"""More texts than this in the file (code edits leave old ones; reading 1,000 takes ~3 ms):
keep only this run's."""

_STATE: _Codes | None = None

FORCE_WRITE = False
"""Write the cache file even under PYTHONDONTWRITEBYTECODE (as `compileall` writes bytecode)."""


def _code_file() -> str | None:
    """The cache file, per interpreter version and optimization level, beside the package's
    bytecode; None where bytecode goes elsewhere (`sys.pycache_prefix`)."""
    return code_cache.cache_path(__file__, "dataclass-code")


def _read_codes(path: str) -> dict[str, CodeType]:
    """The file's texts and code objects; none if it is missing, unreadable or not such a
    table."""
    codes = code_cache.read(path)
    if type(codes) is not dict or not all(type(k) is str and type(v) is CodeType
                                          for k, v in codes.items()):
        return {}
    return codes


def save_dataclass_code() -> None:
    """Write the cache file when this process compiled texts it did not hold (atomically;
    a file planc may not write is left as it is). Like bytecode, not under
    PYTHONDONTWRITEBYTECODE, unless asked (`python -m compiler.warm ARGS`, `FORCE_WRITE`)."""
    state = _STATE
    if state is None or not state.new or state.path is None \
            or (sys.dont_write_bytecode and not FORCE_WRITE):
        return
    state.new = False
    codes = state.codes
    if len(codes) > _MAX_CODES:
        codes = {text: codes[text] for text in state.used}
    code_cache.write(state.path, codes, force=True)


def shared_dataclass_code(path: str | None | bool = True) -> None:
    """Install the shared `exec` (`path`: the cache file, True for `_code_file()`, None for
    none)."""
    global _STATE
    import dataclasses

    if "exec" in vars(dataclasses):  # done already (or someone else's)
        return
    state = _STATE = _Codes(_code_file() if path is True else path)
    codes, used = state.codes, state.used
    run = builtins.exec

    def exec(source, /, *args, **kwargs):  # noqa: A001 -- stands in for the builtin
        if type(source) is str:
            code = codes.get(source)
            if code is None:
                code = codes[source] = compile(source, "<string>", "exec", dont_inherit=True)
                state.new = True
            used.add(source)
            source = code
        return run(source, *args, **kwargs)

    exec._planc_shared = True
    dataclasses.exec = exec
    atexit.register(save_dataclass_code)

