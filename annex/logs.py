"""Logging for every component: human-readable text, or one JSON object per line for collectors.

Each line logged during a reconcile carries the object it is about, as controller-runtime's
structured logger does: `controller`, `namespace`, `name`, `reconcileID` (one per reconcile, so
that `jq 'select(.reconcileID == "...")'` or a grep finds all of one reconcile's lines) and
`cluster`, the peer cluster it concerns. The runtime's Controller sets them (`reconciling`) in
a context variable; the formatters read it, so a plain
`log.info(...)` anywhere under a reconcile, in any coroutine it awaits, is tagged."""

from __future__ import annotations

import contextvars
import json
import logging
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

LogFormat = Literal["text", "json"]

TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# LogRecord attributes that are not caller-supplied `extra=` fields.
_STANDARD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message", "asctime", "taskName"}
OBJECT_FIELDS = ("controller", "namespace", "name", "reconcileID", "cluster")
"""controller-runtime's keys for the object a line is about, in the order text lines show them."""


@dataclass(frozen=True)
class Reconcile:
    """The object one reconcile is about (what its log lines carry)."""

    controller: str
    namespace: str | None
    name: str | None
    reconcile_id: str
    cluster: str | None = None

    def fields(self) -> dict[str, str]:
        values = (self.controller, self.namespace, self.name, self.reconcile_id, self.cluster)
        return {key: value for key, value in zip(OBJECT_FIELDS, values, strict=True)
                if value is not None}


_current: contextvars.ContextVar[Reconcile | None] = contextvars.ContextVar(
    "annex_reconcile", default=None)
_process_cluster: str | None = None
"""The peer cluster of every line of this process (an agent serves one), unless a reconcile
names its own."""


@contextmanager
def reconciling(controller: str, namespace: str | None, name: str | None,
                cluster: str | None = None) -> Iterator[Reconcile]:
    """Tag every line logged inside with the object and a fresh reconcile id."""
    current = Reconcile(controller, namespace, name, str(uuid.uuid4()), cluster)
    token = _current.set(current)
    try:
        yield current
    finally:
        _current.reset(token)


def object_fields(record: logging.LogRecord) -> dict[str, str]:
    """The object fields of `record`: the reconcile in progress where it was logged, else the
    process's cluster; `extra=` values given by the caller win."""
    current = _current.get()
    fields = current.fields() if current is not None else {}
    if "cluster" not in fields and _process_cluster is not None:
        fields["cluster"] = _process_cluster
    for key in OBJECT_FIELDS:
        # `name` is the logger's (a record attribute `extra=` may not set)
        given = getattr(record, key, None) if key not in _STANDARD_ATTRIBUTES else None
        if given is not None:
            fields[key] = str(given)
    return fields


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the object, extras and the
    exception."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
            **object_fields(record),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD_ATTRIBUTES and not key.startswith("_") and key not in entry:
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


class TextFormatter(logging.Formatter):
    """`TIME LEVEL LOGGER: message key=value ...`, the object's fields after the message (the
    exception, if any, on the lines below)."""

    def __init__(self) -> None:
        super().__init__(TEXT_FORMAT)

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        fields = object_fields(record)
        if not fields:
            return line
        return line + " " + " ".join(f"{key}={_quoted(value)}" for key, value in fields.items())


def _quoted(value: str) -> str:
    return json.dumps(value) if not value or any(c in value for c in ' "=\n') else value


def configure_logging(format: LogFormat = "text", level: str | int = "INFO",
                      cluster: str | None = None) -> None:
    """Send every logger's records to stderr in the chosen format (replaces earlier handlers);
    `cluster` tags every line of the process."""
    global _process_cluster
    _process_cluster = cluster
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if format == "json" else TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper() if isinstance(level, str) else level)
