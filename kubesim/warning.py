"""Warnings for the API client, as k8s.io/apiserver/pkg/warning and the WithWarningRecorder
filter carry them: anything serving a request (admission plugins, webhooks) adds texts; the
response carries them as `Warning: 299 - "<text>"` headers, deduplicated, at most 4096
characters in all (past that, each is cut to 256 characters, then the last ones dropped)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

TOTAL_LIMIT = 4 * 1024
ITEM_LIMIT = 256
_recorder: ContextVar[list[str] | None] = ContextVar("kubesim_warnings", default=None)


def add_warning(text: str) -> None:
    """Record a warning for the current request (nothing outside a request)."""
    texts = _recorder.get()
    if texts is not None and text and text not in texts:
        texts.append(text)


@contextmanager
def recording() -> Iterator[list[str]]:
    """The warnings added while the block runs (tasks it starts share them)."""
    texts: list[str] = []
    token = _recorder.set(texts)
    try:
        yield texts
    finally:
        _recorder.reset(token)


def header_values(texts: list[str]) -> list[str]:
    if sum(len(t) for t in texts) > TOTAL_LIMIT:
        texts = [t[:ITEM_LIMIT] for t in texts]
    values, total = [], 0
    for text in texts:
        total += len(text)
        if total > TOTAL_LIMIT:
            break
        values.append('299 - "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"')
    return values
