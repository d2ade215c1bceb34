"""annex.api_errors: what callers read of a failed call (a refusal's Status is read against a live
API server in test_kubeapi.py)."""

from __future__ import annotations

from annex.api_errors import error_message, error_reason, is_not_found, status_of
from annex.transport_errors import ConnectFailed


def test_errors_without_an_answer_have_no_status() -> None:
    error = ConnectFailed("refused")
    assert status_of(error) is None and not is_not_found(error)
    assert error_reason(error) == "ConnectFailed"
    assert error_message(error) == "refused"
