"""The remote enforcer and the home agent as child processes of the run (their logs in the
run directory), read from outside: /proc figures, their /metrics, the agent's JSON log."""

from __future__ import annotations

import base64
import ipaddress
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trustme

from annex.kube import load_connection
from bench.names import Names
from bench.processes import callgrind_wrapper, proc_status, user_and_system_seconds
from home_agent.webhook import MUTATE_POD_PATH
from remote_enforcer.admission import WEBHOOK_PATH
from shared.api.shadowpod import SHADOWPOD
from shared.wellknown import ORIGIN_CLUSTER_LABEL, SCHEDULING_ENABLED_LABEL

ROOT = Path(__file__).resolve().parents[1]
BY_RESOURCE = "annex_rest_client_requests_by_resource_total"
"""The components' request counter the benchmark reads (annex.request_metrics.RequestMetrics)."""
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


class ComponentExited(Exception):
    """The agent or the enforcer exited while the run needed it."""


class Component:
    """A component as a child process (log in the run directory), with /proc figures."""

    def __init__(self, name: str, args: list[str], log_path: Path,
                 wrapper: list[str] | None = None) -> None:
        self.name, self.args, self.log_path = name, args, log_path
        self.wrapper = wrapper or []
        """A command the process runs under (valgrind for --agent-instructions)."""
        self.popen: subprocess.Popen[bytes] | None = None
        self.spawned = 0.0
        """time.monotonic() as it was spawned."""
        self.spawned_at = 0.0
        """time.time() then (its log's clock)."""
        self.stopped = False

    def start(self, checkout: Path = ROOT, flags: tuple[str, ...] = ()) -> None:
        """`checkout`: the source tree it runs from (`python -m` imports from there); `flags`:
        added to its command line for this start only."""
        self.stopped = False
        with self.log_path.open("ab") as log:
            self.spawned, self.spawned_at = time.monotonic(), time.time()
            # the checkout's modules first (its working directory), then this tree's: the
            # bench package, which another checkout may not have (--trace runs bench.trace)
            path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
            self.popen = subprocess.Popen([*self.wrapper, sys.executable, *self.args, *flags],
                                          cwd=checkout, stdout=log,
                                          stderr=subprocess.STDOUT,
                                          env={**os.environ, "PYTHONUNBUFFERED": "1",
                                               "PYTHONPATH": path})

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def running(self) -> bool:
        """alive(), and ComponentExited when it has exited on its own (nothing waits for a
        process that has gone)."""
        if self.popen is not None and self.popen.poll() is not None and not self.stopped:
            raise ComponentExited(f"the {self.name} exited with code {self.popen.returncode}: "
                                  f"see {self.log_path}")
        return self.alive()

    def figures(self) -> dict[str, float]:
        """Peak and current RSS (MiB) and CPU seconds of the running process (and of them, the
        kernel's)."""
        user, system = user_and_system_seconds(self.pid)
        return {"peak_rss_mib": round(proc_status(self.pid, "VmHWM"), 1),
                "rss_mib": round(proc_status(self.pid, "VmRSS"), 1),
                "cpu_seconds": round(user + system, 2), "cpu_system_seconds": round(system, 2)}

    def logged(self, text: str) -> float | None:
        """Seconds after its latest start at which it first logged a line containing `text`
        (its log is JSON lines: `--log-format json`); None when it has not."""
        for line in self.log_path.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
                when = datetime.fromisoformat(entry["time"]).timestamp()
            except (ValueError, KeyError, TypeError):
                continue
            if when >= self.spawned_at and text in str(entry.get("message", "")):
                return round(when - self.spawned_at, 2)
        return None

    def stop(self, kill: bool = False) -> None:
        self.stopped = True
        if not self.alive():
            return
        assert self.popen is not None
        self.popen.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.popen.wait(20)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, ""
    except OSError:
        return 0, ""


def prometheus_samples(text: str) -> dict[str, float]:
    samples = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def metrics(port: int) -> dict[str, float]:
    """The samples on a component's /metrics, `name{labels}` → value ({} while it is not up)."""
    status, text = http_get(f"http://127.0.0.1:{port}/metrics", 2)
    return prometheus_samples(text) if status == 200 else {}


def _nothing_queued(samples: dict[str, float]) -> bool:
    queued = [value for name, value in samples.items()
              if name.split("{", 1)[0].endswith("_controller_queued_keys")]
    return bool(queued) and not any(queued)


def settled(port: int) -> bool:
    """No key waits in any controller of the component serving /metrics on `port`
    (`<prefix>_controller_queued_keys`, annex.metrics), and it says it has some."""
    return _nothing_queued(metrics(port))


def agent_converged(port: int) -> bool:
    """The agent serving /metrics on `port` is synced, with no key queued."""
    samples = metrics(port)
    return samples.get("annex_home_agent_synced") == 1 and _nothing_queued(samples)


def scrape(port: int, family: str, timeout: float = 30.0) -> list[tuple[dict[str, str], float]]:
    """The samples of one family on a running component's /metrics, by label set (retried
    until the endpoint answers: it may be starting)."""
    deadline = time.monotonic() + timeout
    while True:
        status, text = http_get(f"http://127.0.0.1:{port}/metrics", 2)
        if status == 200:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"no /metrics on port {port} after {timeout:.0f}s")
        time.sleep(0.2)
    return [(dict(LABEL.findall(name)), value)
            for name, value in prometheus_samples(text).items() if name.startswith(family + "{")]


def agent_address(kubeconfig: str) -> str:
    """Where the home API server reaches the agent, which runs on this machine: E2E_AGENT_ADDRESS
    (as for the end-to-end tests), else this machine's address on the route to the home API
    server (loopback for kubesim)."""
    if os.environ.get("E2E_AGENT_ADDRESS"):
        return os.environ["E2E_AGENT_ADDRESS"]
    host = urlsplit(load_connection(kubeconfig).server).hostname or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_DGRAM) as probe:
        probe.connect((host, 443))
        return str(probe.getsockname()[0])


def enforcer(kubeconfig: str, names: Names, directory: Path, webhook_port: int,
             health_port: int, flags: list[str], name: str = "enforcer") -> Component:
    """The remote enforcer, serving its webhook on loopback with DIRECTORY/webhook.crt; `name`:
    its log's (one replica of several has its own)."""
    return Component(name, [
        "-m", "remote_enforcer", "--kubeconfig", kubeconfig,
        "--cluster-id", names.provider_id, "--webhook-address", "127.0.0.1",
        "--webhook-port", str(webhook_port), "--webhook-cert", str(directory / "webhook.crt"),
        "--webhook-key", str(directory / "webhook.key"), "--health-address", "127.0.0.1",
        "--health-port", str(health_port), *flags], directory / f"{name}.log")


def pod_webhook_certificate(directory: Path, address: str) -> str:
    """DIRECTORY/pod-webhook.crt and .key for the agent's pod webhook at `address`, issued by a
    CA of the run; that CA's bundle (base64), for the webhook configuration."""
    authority = trustme.CA()
    issued = authority.issue_cert(address)
    issued.cert_chain_pems[0].write_to_path(str(directory / "pod-webhook.crt"))
    issued.private_key_pem.write_to_path(str(directory / "pod-webhook.key"))
    return base64.b64encode(authority.cert_pem.bytes()).decode()


def pod_webhook(name: str, url: str, ca_bundle: str, namespace: str) -> dict[str, Any]:
    """The agent's MutatingWebhookConfiguration as the home-agent chart registers it (pods of
    namespaces the agents label `liqo.io/scheduling-enabled`, failurePolicy Ignore: the agent
    never blocks a pod), for `namespace` only: the run's other pods are not its to judge."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration", "metadata": {"name": name},
        "webhooks": [{
            "name": "pods.home-agent.annex.liqo.io",
            "clientConfig": {"url": f"{url}{MUTATE_POD_PATH}", "caBundle": ca_bundle},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace,
                                                  SCHEDULING_ENABLED_LABEL: "true"}},
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore", "timeoutSeconds": 5, "reinvocationPolicy": "Never"}]}


def home_controller(kubeconfig: str, namespace: str, template: Path, health_port: int,
                    flags: tuple[str, ...], log_path: Path) -> Component:
    """The home controller, its VirtualNodes in `namespace`, their agents made from `template`
    (an `AgentTemplate` as JSON), logging JSON lines."""
    return Component("home controller", [
        "-m", "home_controller", "--kubeconfig", kubeconfig, "--namespace", namespace,
        "--agent-template", str(template), "--health-address", "127.0.0.1",
        "--health-port", str(health_port), "--log-format", "json", *flags], log_path)


def shadowpod_webhook(names: Names, webhook_port: int, ca_bundle: str) -> dict[str, Any]:
    """The enforcer's ValidatingWebhookConfiguration, for this run's twin namespaces only:
    another run's ShadowPods are not its enforcer's to judge."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": names.webhook},
        "webhooks": [{
            "name": names.webhook,
            "clientConfig": {"url": f"https://127.0.0.1:{webhook_port}{WEBHOOK_PATH}",
                             "caBundle": ca_bundle},
            "rules": [{"apiGroups": [SHADOWPOD.group], "apiVersions": [SHADOWPOD.version],
                       "operations": ["CREATE", "UPDATE"], "resources": [SHADOWPOD.plural],
                       "scope": "Namespaced"}],
            "namespaceSelector": {"matchExpressions": [{
                "key": ORIGIN_CLUSTER_LABEL, "operator": "In",
                "values": [names.home_id, names.bare_consumer]}]},
            "admissionReviewVersions": ["v1"], "sideEffects": "NoneOnDryRun",
            "failurePolicy": "Fail", "timeoutSeconds": 10}]}


def agent(args: Any, kubeconfigs: dict[str, str], names: Names, directory: Path,
          remote_pod_cidr: str | None, ports: dict[str, int], name: str = "agent",
          extra: tuple[str, ...] = ()) -> Component:
    """The home agent with its defaults and `--workers`, logging JSON lines; with an address and
    a client CA with which the home API server reaches its kubelet API, as it does for `kubectl
    logs` and `kubectl exec` (the streams scenario). `ports`: metrics and kubelet (kept across
    restarts: a new kubelet port would be a node status write on each start) and, given a port
    `webhook`, the pod webhook's, served as the chart serves it with DIRECTORY/pod-webhook.crt
    (`pod_webhook_certificate`). `name`: its log's, `extra`: more of its command line (a
    replica's)."""
    address = agent_address(kubeconfigs["home"])
    flags = [*extra, "--workers", str(args.workers),
             "--agent-ip", address,
             "--kubelet-port", str(ports["kubelet"]),
             "--kubelet-client-ca", str(directory / "home-ca.crt"),
             "--log-format", "json"]
    if "webhook" in ports:
        flags += ["--webhook-address", f"{address}:{ports['webhook']}",
                  "--webhook-cert", str(directory / "pod-webhook.crt"),
                  "--webhook-key", str(directory / "pod-webhook.key")]
    if remote_pod_cidr:
        remapped = ipaddress.ip_network(remote_pod_cidr).prefixlen
        flags += ["--remote-pod-cidr", remote_pod_cidr,
                  "--remapped-pod-cidr", f"100.64.0.0/{remapped}"]
    # --trace: the agent as bench.trace runs it (its requests, events, reconciles, stalls)
    module = (["-m", "bench.trace", str(directory / "trace-agent.jsonl"), "home_agent"]
              if args.trace else ["-m", "home_agent"])
    return Component("agent", [
        *module,
        "--home-kubeconfig", kubeconfigs["home"],
        "--remote-kubeconfig", kubeconfigs["remote"],
        "--cluster-id", names.home_id, "--remote-cluster-id", names.provider_id,
        "--metrics-address", f"127.0.0.1:{ports['metrics']}",
        *flags, *args.agent_flag], directory / f"{name}.log",
        wrapper=callgrind_wrapper(directory) if args.agent_instructions else None)
