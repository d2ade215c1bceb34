"""Raw REST calls through a fixture's ApiClient, for what typed clients hide (status bodies,
exact JSON, content types)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

JSON = "application/json"
MERGE = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"


def _request(cluster: Any, method: str, path: str, body: Any, content_type: str,
             query: dict[str, Any] | None, stream: bool = False, accept: str = JSON) -> Any:
    configuration = cluster.api_client.configuration
    headers = {"Accept": accept, "Content-Type": content_type}
    token = configuration.auth_settings().get("BearerToken", {}).get("value")
    if token:
        headers["Authorization"] = token
    url = configuration.host + path
    if query:
        url += "?" + urlencode(query)
    data = None if body is None else json.dumps(body).encode()
    return cluster.api_client.rest_client.pool_manager.request(
        method, url, body=data, headers=headers, preload_content=not stream)


def call(cluster: Any, method: str, path: str, body: Any = None, *, content_type: str = JSON,
         query: dict[str, Any] | None = None, accept: str = JSON) -> tuple[int, Any]:
    """(HTTP status, decoded body: JSON when it parses, else text)."""
    response = _request(cluster, method, path, body, content_type, query, accept=accept)
    text = response.data.decode()
    try:
        return response.status, json.loads(text)
    except ValueError:
        return response.status, text


def stream(cluster: Any, path: str, query: dict[str, Any], accept: str = JSON
           ) -> Iterator[dict[str, Any]]:
    """The decoded events of a watch request (ends when the server closes the stream)."""
    response = _request(cluster, "GET", path, None, JSON, {"watch": "true", **query},
                        stream=True, accept=accept)
    try:
        buffer = b""
        for chunk in response.stream(1024, decode_content=False):
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
        if buffer.strip():
            yield json.loads(buffer)
    finally:
        response.release_conn()


COMPACTION_INTERVAL = 300  # seconds: kube-apiserver's --etcd-compaction-interval default
COMPACTION_SLACK = 30  # seconds: the compactor's tick after the interval, under load


def long_compacted_version(cluster: Any) -> str:
    """A resource version etcd no longer has on a real cluster: 1, once the cluster is older
    than two compaction intervals (a younger one may still have it: skipped). kube-apiserver's
    compactor (apiserver/pkg/storage/etcd3/compact.go) compacts, at each interval, to the
    revision it saw at the previous one: nothing at the first, and up to the first interval's
    revision at the second."""
    from datetime import UTC, datetime

    import pytest

    created = cluster.core.read_namespace("kube-system").metadata.creation_timestamp
    age = (datetime.now(UTC) - created).total_seconds()
    if age < 2 * COMPACTION_INTERVAL + COMPACTION_SLACK:
        pytest.skip(f"the cluster is {age:.0f} s old: kube-apiserver compacts etcd every "
                    f"{COMPACTION_INTERVAL} s up to the revision of the interval before, so "
                    "version 1 may not be compacted yet")
    return "1"
