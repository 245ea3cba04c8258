"""User-facing errors.

Every error planc reports to a user is a `PlancError`: one line that names the file and the
JSON path of the offending value, e.g.

    planc: error: m.json: $.Nodes[3].Op.ReadTensors[0].Shape: expected 1 to 4 integers

Library code raises `PlancError` with whatever it knows (a path, a message); the driver adds the
file name and prints it. Nothing else is allowed to reach the user as a traceback.

The Python API (`compiler.api`) raises the same family for every mistake of its caller:

    PlancError              an input document or a request planc refuses (.file, .path, .rule)
    ├── UnsupportedInput    a target given a document it cannot start from
    └── UsageError          a mistake in the command or call itself, not in a document
        └── ArgumentError   a misnamed option or target, or a value of the wrong type or out of
                            its choices (also a ValueError, what the API raised before)
"""

from __future__ import annotations

from collections.abc import Iterable


class PlancError(Exception):
    """An error in the user's input or request, reported as one line."""

    def __init__(self, message: str, *, path: str | None = None, file: str | None = None,
                 rule: str | None = None, hint: str | None = None):
        super().__init__(message)
        self.message = message
        """What is wrong, with the way out where there is one (what the command line prints
        after the file and the path)."""
        self.path = path
        """The JSON path of the value at fault (`$.Nodes[3].Op`), when there is one."""
        self.file = file
        """The file at fault, when there is one."""
        self.rule = rule
        """The named format rule the input breaks, when known (`planc check` reports it)."""
        self.hint = hint
        """The way out alone (which target takes an option, the nearest name), when the
        message gives one; the message already includes it."""

    def in_file(self, file: str) -> PlancError:
        """This error, attributed to `file` unless it already names one."""
        if self.file is None:
            self.file = file
        return self

    def __str__(self) -> str:
        parts = [p for p in (self.file, self.path) if p]
        # Keep the report on one line whatever the message contains.
        parts.append(" ".join(self.message.split()))
        return ": ".join(parts)


class UsageError(PlancError):
    """A mistake on the command line itself, or in an API call (not in an input file)."""

    def in_file(self, file: str) -> PlancError:
        return self


class UnsupportedInput(PlancError):
    """A target given a document it cannot start from (raised by a target's `pipeline`; the
    driver's `lower` adds which targets take the document, from the target table)."""

    def __init__(self, target: str, what: str, source_format: str):
        article = "an" if source_format[:1] in tuple("aeiou") else "a"
        source = f"from {article} {source_format} document" if source_format else \
            "without an INPUT"
        super().__init__(f"cannot make {what} {source}")
        self.target, self.what, self.source_format = target, what, source_format


class ArgumentError(UsageError, ValueError):
    """A misnamed option or target, or an option value of the wrong type or outside its
    choices. Also a `ValueError`: the Python API raised plain ValueErrors for these."""


def json_path(*steps: str | int) -> str:
    """`$` followed by `.key` and `[index]` steps, the notation of JSONPath."""
    return extend_path("$", *steps)


def extend_path(path: str, *steps: str | int) -> str:
    for step in steps:
        if isinstance(step, int):
            path += f"[{step}]"
        elif step.isidentifier():
            path += f".{step}"
        else:
            path += f"[{step!r}]"
    return path


def near_match(word: str, choices: Iterable[str]) -> str | None:
    """The choice `word` was most likely meant to be (difflib's closest, case folded: `A100`
    is a100, `Sigmod` is Sigmoid), or None when nothing is close."""
    import difflib

    by_folded: dict[str, str] = {}
    for choice in choices:
        by_folded.setdefault(choice.casefold(), choice)
    found = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=0.6)
    return by_folded[found[0]] if found else None


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`": did you mean Sigmoid?"`, to follow the unknown name in a message, or "" when no
    choice is close."""
    found = near_match(word, choices)
    return f": did you mean {found}?" if found is not None else ""


def one_of(names: Iterable[str]) -> str:
    """'a, b or c' for error messages that list the valid choices."""
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " or " + names[-1]
