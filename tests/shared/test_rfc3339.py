"""shared.rfc3339: timestamps written and read as the API server writes and reads them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from shared.rfc3339 import parse_rfc3339, rfc3339


def test_timestamps_are_written_and_read_as_the_api_server_does() -> None:
    moment = datetime(2026, 11, 24, 13, 5, 7, 900000, tzinfo=timezone(timedelta(hours=2)))
    assert rfc3339(moment) == "2026-11-24T11:05:07Z"
    assert parse_rfc3339("2026-11-24T11:05:07Z") == datetime(2026, 11, 24, 11, 5, 7, tzinfo=UTC)
    with pytest.raises(ValueError, match="without a time zone"):
        parse_rfc3339("2026-11-24T11:05:07")
    with pytest.raises(ValueError, match="naive"):
        rfc3339(datetime(2026, 11, 24))
