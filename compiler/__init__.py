"""The planc driver: command line, pipelines, diagnostics and simulation.

The Python API (`compiler.api`) is re-exported here, imported on first use so that the command
line's start-up stays free of xDSL: `import compiler as planc; planc.compile(...)`.
"""

from typing import Any

from compiler._startup import quiet_deprecated, shared_dataclass_code

quiet_deprecated()
shared_dataclass_code()

_API = ("load", "compile", "check", "simulate", "SimulationResult", "CheckReport", "Finding",
        "InputFormat", "document_format", "formats", "PlancError", "UsageError",
        "ArgumentError")


def __getattr__(name: str) -> Any:
    if name in _API:
        from compiler import api

        return getattr(api, name)
    raise AttributeError(f"module 'compiler' has no attribute '{name}'")


__all__ = list(_API)
