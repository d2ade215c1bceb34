"""Timestamps as the Kubernetes API writes and reads them (RFC 3339)."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(moment: datetime) -> str:
    """A timestamp as Kubernetes writes them (seconds, UTC)."""
    if moment.tzinfo is None:
        raise ValueError(f"timestamps must be timezone-aware, got naive {moment.isoformat()}")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> datetime:
    """An RFC 3339 timestamp as the API server writes them (ValueError when it is not one)."""
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        raise ValueError(f"timestamp without a time zone: {text!r}")
    return parsed
