"""The progress line a command shows while it waits (a spinner and what it waits for, on
stderr), drawn only on a terminal: piped into a file, a CI log or a script, a command prints
exactly what it would print without it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from rich.console import Console
from rich.status import Status

_shown: list[Status] = []
"""The line on screen: a wait inside a wait changes its text (a terminal shows one)."""


@contextmanager
def waiting(what: str, stream: TextIO | None = None) -> Iterator[None]:
    """Show `waiting for <what>...` until the block ends, then erase it."""
    stream = stream or sys.stderr
    text = f"waiting for {what}..."
    if _shown:
        outer = _shown[-1]
        before = outer.status
        outer.update(text)
        try:
            yield
        finally:
            outer.update(before)
        return
    if not stream.isatty():
        yield
        return
    status = Console(file=stream, highlight=False).status(text, spinner="dots")
    _shown.append(status)
    try:
        with status:
            yield
    finally:
        _shown.pop()
