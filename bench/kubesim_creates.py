"""Server CPU for 1,000 creates with two watchers attached.

Starts `python -m kubesim up` in a subprocess, opens two watches on a fresh namespace's
ConfigMaps, creates N ConfigMaps over one keep-alive HTTPS connection, waits until both
watchers have seen every ADDED event, and prints the server process's CPU seconds (user+system,
from /proc) spent over that span, plus wall time.

    python -m bench.kubesim_creates [--count 1000] [--controllers LIST]

`--controllers ""` measures the API server alone (part 2's controllers, which also react to
the creates, off).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import urllib3
import yaml

from bench.processes import cpu_seconds

ROOT = Path(__file__).resolve().parents[1]


class Client:
    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        self.url = cluster["server"]
        ca = tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False)
        import base64

        ca.write(base64.b64decode(cluster["certificate-authority-data"]))
        ca.close()
        self.headers = {"Authorization": "Bearer " + config["users"][0]["user"]["token"],
                        "Content-Type": "application/json", "Accept": "application/json"}
        self.pool = urllib3.PoolManager(ca_certs=ca.name, cert_reqs="CERT_REQUIRED", maxsize=4)

    def request(self, method: str, path: str, body: Any = None, **kwargs: Any) -> Any:
        data = None if body is None else json.dumps(body).encode()
        return self.pool.request(method, self.url + path, body=data, headers=self.headers,
                                 **kwargs)


def watch_until(client: Client, path: str, expected: int, seen: list[int],
                ready: threading.Event) -> None:
    response = client.request("GET", path + "?watch=true&timeoutSeconds=600",
                              preload_content=False)
    ready.set()
    count = 0
    buffer = b""
    for chunk in response.stream(65536):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        count += sum(1 for line in lines if line.startswith(b'{"type":"ADDED"'))
        if count >= expected:
            break
    seen.append(count)
    response.release_conn()


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.kubesim_creates",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--controllers", default=None,
                        help="passed to `kubesim up` (default: all controllers)")
    args = parser.parse_args()
    flags = [] if args.controllers is None else ["--controllers", args.controllers]
    with tempfile.TemporaryDirectory() as directory:
        server = subprocess.Popen(
            [sys.executable, "-m", "kubesim", "up", "--dir", directory, "bench", *flags],
            stdout=subprocess.PIPE, text=True, cwd=ROOT)
        try:
            assert server.stdout is not None
            _, _, kubeconfig, *_ = server.stdout.readline().split()
            client = Client(Path(kubeconfig))
            namespace = f"bench-{os.getpid()}"
            client.request("POST", "/api/v1/namespaces", {"metadata": {"name": namespace}})
            path = f"/api/v1/namespaces/{namespace}/configmaps"
            seen: list[int] = []
            watchers = []
            for _ in range(2):
                ready = threading.Event()
                thread = threading.Thread(target=watch_until,
                                          args=(client, path, args.count, seen, ready))
                thread.start()
                ready.wait(30)
                watchers.append(thread)
            cpu_before, wall_before = cpu_seconds(server.pid), time.perf_counter()
            for index in range(args.count):
                response = client.request("POST", path, {
                    "metadata": {"name": f"cm-{index}", "labels": {"bench": "yes"}},
                    "data": {"key": "value" * 10}})
                assert response.status == 201, response.data
            for thread in watchers:
                thread.join(120)
            cpu = cpu_seconds(server.pid) - cpu_before
            wall = time.perf_counter() - wall_before
            assert seen == [args.count, args.count], seen
            which = "all controllers" if args.controllers is None else (
                f"controllers {args.controllers!r}")
            print(f"{args.count} creates, 2 watchers ({which}): server CPU {cpu:.2f} s "
                  f"(wall {wall:.2f} s, {args.count / wall:.0f} creates/s)")
        finally:
            server.terminate()
            server.wait(30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
