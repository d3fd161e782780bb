"""What every accelsched command shares at the terminal: the console, and bad input as one line and exit 2.

Its own module so that a subcommand defined elsewhere (sim/command.py) uses it without importing the CLI that
imports the subcommand.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from functools import wraps
from typing import Any

import click
from rich.console import Console

from accelsched.errors import InputError

EXIT_BAD_INPUT = 2


def console() -> Console:
    """A terminal gets its own width; a pipe or file gets wide lines instead of rich's 80 columns."""
    plain = Console()
    return plain if plain.is_terminal else Console(width=160)


def bad_input_exits(func: Callable[..., Any]) -> Callable[..., Any]:
    """Turn InputError into ``accelsched: error: FILE: OBJECT: FIELD: what`` and exit 2, never a traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except InputError as exc:
            click.echo(f"accelsched: error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper
