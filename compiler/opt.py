"""`planc-opt`: xDSL's opt driver with every planc dialect, pass, frontend and target.

    planc-opt FILE.mlir -p 'ark-compress' [-t ark-model]
    planc-opt model.json -p ... (JSON inputs go through planc's format detection)

It is the tool of lit tests and pass-pipeline scripting. Registration is lazy: dialects and
passes load on first use.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target
from xdsl.xdsl_opt_main import xDSLOptMain

from backends import TARGETS, TargetInfo
from compiler.diagnostics import PlancError
from dialects import get_all_dialects
from passes import get_all_passes


def _import_json(stream: IO[bytes]) -> ModuleOp:
    from compiler.json_reader import parse_json
    from frontends import detect_format

    doc = parse_json(stream.read().decode("utf-8"))
    fmt = detect_format(doc.value)
    if fmt is None:
        raise PlancError("cannot tell the format of this JSON document", path="$")
    return fmt.import_document(doc)


def _planc_target(info: TargetInfo) -> Callable[[], type[Target]]:
    """An xDSL target running planc target `info`'s emitter (single-file targets only)."""

    def factory() -> type[Target]:
        @dataclasses.dataclass(frozen=True)
        class PlancTarget(Target):
            name = info.name

            def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
                product = info.load().emit(module, _no_options())
                if isinstance(product, str):
                    output.write(product)
                    return
                # A directory target: every file, under a header line naming it (for lit).
                for path, text in product.items():
                    output.write(f"// ===== {path} =====\n{text}")

        return PlancTarget

    return factory


class _NoOptions:
    """Target flags as planc's defaults, for targets run from planc-opt."""

    def __getattr__(self, name: str):
        from backends import all_flags

        for flag in all_flags():
            if flag.name.lstrip("-").replace("-", "_") == name:
                return False if flag.switch else flag.default
        raise AttributeError(name)


def _no_options() -> _NoOptions:
    return _NoOptions()


class PlancOptMain(xDSLOptMain):
    def register_all_dialects(self) -> None:
        super().register_all_dialects()
        for name, factory in get_all_dialects().items():
            if name not in self.ctx.registered_dialect_names:
                self.ctx.register_dialect(name, factory)

    def register_all_passes(self) -> None:
        super().register_all_passes()
        for name, factory in get_all_passes().items():
            self.register_pass(name, factory)

    def register_all_targets(self) -> None:
        super().register_all_targets()
        for info in TARGETS:
            if info.name != "mlir":
                self.available_targets[info.name] = _planc_target(info)

    def register_all_frontends(self) -> None:
        super().register_all_frontends()
        self.available_frontends["json"] = _import_json


def main(args: Sequence[str] | None = None) -> None:
    try:
        PlancOptMain(description="planc modular optimizer driver", args=args).run()
    except PlancError as e:
        sys.stderr.write(f"planc-opt: error: {e}\n")
        sys.exit(1)


if __name__ == "__main__":
    main()
