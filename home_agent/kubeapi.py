"""The agent's access to a cluster: the shared REST client (annex.kubeapi), re-exported under the
names the agent's modules import. Every agent request, reads included, is rate limited."""

from annex.kubeapi import (
    JSON,
    MERGE_PATCH,
    REQUEST_TIMEOUT,
    STRATEGIC_MERGE_PATCH,
    ApiError,
    ClusterApi,
    core_path,
    custom_path,
    error_message,
    error_reason,
    group_path,
    is_not_found,
    status_of,
)

__all__ = [
    "JSON", "MERGE_PATCH", "REQUEST_TIMEOUT", "STRATEGIC_MERGE_PATCH", "ApiError", "ClusterApi",
    "core_path", "custom_path", "error_message", "error_reason", "group_path", "is_not_found",
    "status_of",
]
