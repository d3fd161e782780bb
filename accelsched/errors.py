"""The one error type for bad input: it names the file, the object and the field, so the CLI can print one line."""

from __future__ import annotations


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
