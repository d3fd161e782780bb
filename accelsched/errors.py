"""The one error type for bad input: it names the file, the object and the field, so the CLI can print one line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# How much of a user's value an error quotes: a field may hold megabytes, and the error must stay one short line.
QUOTED_LIMIT = 80


def clipped(text: str, limit: int = QUOTED_LIMIT) -> str:
    """``text`` cut after ``limit`` characters, saying how many more there were: for a value a message quotes in
    its own way (kube-apiserver's ``Invalid value: "text"``)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit} more characters)"


def quoted(value: Any, limit: int = QUOTED_LIMIT, quote: Callable[[Any], str] = repr) -> str:
    """``value`` as ``quote`` writes it (Python's repr: 'text', 12, [1, 2]; json.dumps for the API server's
    "text"), bounded as ``clipped``: a string is cut before it is quoted, so its quotes stay whole."""
    if isinstance(value, str):  # the limit counts the value's characters, not its quotes or escapes
        if len(value) <= limit:
            return quote(value)
        return f"{quote(value[:limit])}... ({len(value) - limit} more characters)"
    return clipped(quote(value), limit)


class InputError(Exception):
    """Bad user input. Printed as ``FILE: KIND NS/NAME: FIELD: what is wrong`` and exit code 2."""

    def __init__(self, message: str, *, source: str = "", obj: str = "", field: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.obj = obj
        self.field = field

    def __str__(self) -> str:
        parts = [p for p in (self.source, self.obj, self.field) if p]
        # One line whatever the input held: a line break inside an echoed name or value is shown escaped, as Go's %q.
        return ": ".join([*parts, self.message]).replace("\r", "\\r").replace("\n", "\\n")


class Where:
    """Where an object came from: raises InputError with the file and object already filled in."""

    __slots__ = ("obj", "source")

    def __init__(self, source: str, obj: str) -> None:
        self.source = source
        self.obj = obj

    def error(self, field: str, message: str) -> InputError:
        return InputError(message, source=self.source, obj=self.obj, field=field)
