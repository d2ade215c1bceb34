"""shared.forge.kubelet: how the virtual node's kubelet API authorizes a request path (as
kubelet's Webhook authorizer maps it), how a home pod's request is translated to its twin, and
the usage it serves as a kubelet serves it."""

from __future__ import annotations

from shared.forge.kubelet import (
    ContainerUsage,
    PodRequest,
    authorization_attributes,
    parse_pod_path,
    pod_metrics_usage,
    remote_log_query,
    remote_stream_query,
    resource_metrics,
    stats_summary,
)


def test_paths_are_authorized_as_a_kubelet_maps_them() -> None:
    def asked(method: str, path: str) -> tuple[str, str]:
        attributes = authorization_attributes(method, path, "liqo-r")
        assert attributes["resource"] == "nodes" and attributes["name"] == "liqo-r"
        return attributes["verb"], attributes["subresource"]

    assert asked("GET", "/stats/summary") == ("get", "stats")
    assert asked("GET", "/metrics/resource") == ("get", "metrics")
    assert asked("GET", "/metrics") == ("get", "metrics")
    assert asked("GET", "/logs/") == ("get", "log")
    assert asked("GET", "/containerLogs/ns/pod/c") == ("get", "proxy")
    assert asked("GET", "/pods") == ("get", "proxy")
    assert asked("GET", "/statsfoo") == ("get", "proxy")
    assert asked("POST", "/exec/ns/pod/c") == ("create", "proxy")
    # A WebSocket exec is a GET: still create, or nodes/proxy get would run commands.
    assert asked("GET", "/exec/ns/pod/c") == ("create", "proxy")
    assert asked("GET", "/portForward/ns/pod") == ("create", "proxy")
    assert asked("GET", "/attach/ns/pod/uid/c") == ("create", "proxy")


def test_pod_paths_name_the_pod_and_container() -> None:
    assert parse_pod_path("/containerLogs/ns/p/c") == PodRequest("containerLogs", "ns", "p",
                                                                 container="c")
    assert parse_pod_path("/exec/ns/p/u/c") == PodRequest("exec", "ns", "p", "u", "c")
    assert parse_pod_path("/attach/ns/p/c") == PodRequest("attach", "ns", "p", "", "c")
    assert parse_pod_path("/portForward/ns/p") == PodRequest("portForward", "ns", "p")
    assert parse_pod_path("/portForward/ns/p/u") == PodRequest("portForward", "ns", "p", "u")
    for other in ("/containerLogs/ns/p", "/exec/ns", "/run/ns/p/c", "/", "/pods"):
        assert parse_pod_path(other) is None


def test_the_remote_query_carries_only_what_the_subresource_takes() -> None:
    assert remote_log_query("c", {"follow": "true", "tailLines": "3", "container": "other",
                                  "insecureSkipTLSVerifyBackend": "true"}) == {
        "container": "c", "follow": "true", "tailLines": "3"}
    assert remote_log_query("c", {"tail": "5"}) == {"container": "c", "tailLines": "5"}
    assert remote_log_query("c", {"tail": "all", "tailLines": "2"}) == {"container": "c"}
    forward = PodRequest("portForward", "ns", "p")
    assert remote_stream_query(forward, [("port", "80,8080"), ("port", "9090"),
                                         ("command", "x"), ("ports", "1")]) == [
        ("ports", "80"), ("ports", "8080"), ("ports", "9090")]


def test_exec_and_attach_read_the_kubelets_parameter_names() -> None:
    """kube-apiserver asks a kubelet for streams as input, output, error and tty set to "1"
    (strategy.go streamParams); the twin's pods/exec takes them as stdin, stdout, stderr and
    tty. The pods/exec names and other values mean nothing to a kubelet."""
    exec_request = PodRequest("exec", "ns", "p", container="c")
    assert remote_stream_query(exec_request, [
        ("command", "sh"), ("command", "-c"), ("command", "exit 3"), ("error", "1"),
        ("input", "1"), ("output", "1"), ("tty", "1"), ("container", "other")]) == [
        ("command", "sh"), ("command", "-c"), ("command", "exit 3"), ("stdin", "true"),
        ("stdout", "true"), ("stderr", "true"), ("tty", "true"), ("container", "c")]
    attach_request = PodRequest("attach", "ns", "p", container="c")
    assert remote_stream_query(attach_request, [
        ("stdin", "true"), ("stdout", "1"), ("output", "true"), ("error", "0"),
        ("input", "1")]) == [("stdin", "true"), ("container", "c")]


def test_usage_reads_as_a_kubelet_serves_it() -> None:
    sampled, usage = pod_metrics_usage({
        "timestamp": "2026-01-01T00:00:10Z", "window": "10s",
        "containers": [{"name": "web", "usage": {"cpu": "250m", "memory": "64Mi"}},
                       {"name": "side", "usage": {"cpu": "1234567n", "memory": "1Ki"}}]})
    assert sampled == 1767225610.0
    assert usage == {"web": (250_000_000, 64 * 1024 * 1024), "side": (1_234_567, 1024)}
    entries = [ContainerUsage("ns", "p", "uid-1", "web", sampled, 250_000_000, 67108864, 2.5,
                              sampled - 100),
               ContainerUsage("ns", "p", "uid-1", "side", sampled, 1_234_567, 1024, 0.5,
                              sampled - 100)]
    summary = stats_summary("liqo-r", sampled - 1000, sampled, entries)
    assert summary["node"]["nodeName"] == "liqo-r"
    assert summary["node"]["cpu"]["usageNanoCores"] == 251_234_567
    [pod] = summary["pods"]
    assert pod["podRef"] == {"name": "p", "namespace": "ns", "uid": "uid-1"}
    assert pod["cpu"]["usageCoreNanoSeconds"] == 3_000_000_000
    assert pod["memory"]["workingSetBytes"] == 67109888
    text = resource_metrics(sampled, entries)
    assert ('container_cpu_usage_seconds_total{container="web",namespace="ns",pod="p"} '
            '2.500000000 1767225610000') in text
    assert 'pod_memory_working_set_bytes{namespace="ns",pod="p"} 67109888 1767225610000' in text
    assert "node_cpu_usage_seconds_total 3.000000000 1767225610000" in text
    assert "resource_scrape_error 0" in text
