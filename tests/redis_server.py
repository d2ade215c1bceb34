"""A real redis-server process on a free port, for the tests and the benchmark of the agent's
optional Redis cache (.ci/run installs Debian's redis-server)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from tests.helpers import free_port, wait_for


def redis_server_binary() -> str | None:
    return shutil.which("redis-server")


@contextmanager
def redis_server() -> Iterator[str]:
    """A fresh, empty, non-persistent redis-server; yields its URL."""
    binary = redis_server_binary()
    assert binary is not None, "redis-server is not installed"
    port = free_port()
    directory = tempfile.mkdtemp(prefix="redis-")
    process = subprocess.Popen(
        [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         "--dir", directory],
        stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url)
        wait_for(client.ping, timeout=10, message="redis-server answers")
        client.close()
        yield url
    finally:
        process.terminate()
        process.wait(10)
        shutil.rmtree(directory, ignore_errors=True)
