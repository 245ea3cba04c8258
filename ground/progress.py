"""Progress bars on stderr for work that takes more than a moment.

`progress(items, label)` iterates like `items`; when stderr is a terminal (and `PLANC_QUIET`
is not set: `planc -q`) it draws a tqdm bar that appears after a second, so short runs stay
silent and logs and pipes never see control characters. `Stages` does the same over named
stages whose lengths are unknown (a pass pipeline).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from time import perf_counter
from typing import TypeVar

T = TypeVar("T")


QUIET = False
"""Set by `planc -q`."""


def enabled() -> bool:
    return sys.stderr.isatty() and not QUIET and not os.environ.get("PLANC_QUIET")


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    if not enabled():
        yield from items
        return
    from tqdm import tqdm

    yield from tqdm(items, desc=f"planc: {label}", total=total, delay=1.0, leave=False,
                    file=sys.stderr, unit="")


class Stages:
    """A bar over named stages (the passes of a pipeline) that also moves while one long stage
    runs: a ticker thread redraws it twice a second, so a pass that takes a minute shows its
    name and the elapsed time instead of a frozen screen."""

    def __init__(self, total: int, label: str, delay: float = 1.0):
        self.bar = None
        if not enabled() or total <= 0:
            return
        import threading

        from tqdm import tqdm

        self.delay = delay
        self.bar = tqdm(total=total, desc=f"planc: {label}", delay=delay, leave=False,
                        file=sys.stderr, unit="pass", bar_format="{desc} [{n}/{total}] "
                        "{elapsed}")
        self.label = f"planc: {label}"
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, daemon=True)
        self._ticker.start()

    def _tick(self) -> None:
        while not self._stop.wait(0.5):
            if self.bar.format_dict["elapsed"] >= self.delay:
                self.bar.refresh()

    def start(self, name: str) -> None:
        """Stage `name` begins."""
        if self.bar is not None:
            shown = self.bar.format_dict["elapsed"] >= self.delay
            self.bar.set_description_str(f"{self.label}: {name}", refresh=shown)

    def done(self) -> None:
        """The current stage ended."""
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self._stop.set()
            self._ticker.join()
            self.bar.close()

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class Steps:
    """The steps of one command (load, simulate, trace, draw): a progress line on a terminal
    while the command runs past a second, naming the step and the time elapsed, and each
    step's seconds on the `planc.COMMAND` logger at INFO (`planc -v`)."""

    def __init__(self, command: str, total: int, delay: float = 1.0):
        self.stages = Stages(total, command, delay)
        self.log = logging.getLogger(f"planc.{command}")

    @contextmanager
    def step(self, name: str) -> Iterator[None]:
        self.stages.start(name)
        begin = perf_counter()
        try:
            yield
        finally:
            self.stages.done()
            self.log.info("%s: %.3f s", name, perf_counter() - begin)

    def __enter__(self) -> Steps:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stages.close()
