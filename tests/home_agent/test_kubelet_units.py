"""The pure parts of the virtual node's kubelet API: the address the node advertises, how a
request path is authorized (as kubelet's Webhook authorizer maps it), and how a home pod's
request is translated to its twin."""

from __future__ import annotations

from shared.forge.node import Health, node_status


def test_the_node_advertises_only_the_agent_address_and_its_kubelet_port() -> None:
    status = node_status({}, Health(True, ""), "r", "10.1.2.3", "liqo-r", 10443)
    # No Hostname: kube-apiserver prefers it by default and nothing resolves a virtual node.
    assert status["addresses"] == [{"type": "InternalIP", "address": "10.1.2.3"}]
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10443}}


def test_paths_are_authorized_as_a_kubelet_maps_them() -> None:
    from shared.forge.kubelet import authorization_attributes

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
    from shared.forge.kubelet import PodRequest, parse_pod_path

    assert parse_pod_path("/containerLogs/ns/p/c") == PodRequest("containerLogs", "ns", "p",
                                                                 container="c")
    assert parse_pod_path("/exec/ns/p/u/c") == PodRequest("exec", "ns", "p", "u", "c")
    assert parse_pod_path("/attach/ns/p/c") == PodRequest("attach", "ns", "p", "", "c")
    assert parse_pod_path("/portForward/ns/p") == PodRequest("portForward", "ns", "p")
    assert parse_pod_path("/portForward/ns/p/u") == PodRequest("portForward", "ns", "p", "u")
    for other in ("/containerLogs/ns/p", "/exec/ns", "/run/ns/p/c", "/", "/pods"):
        assert parse_pod_path(other) is None


def test_the_remote_query_carries_only_what_the_subresource_takes() -> None:
    from shared.forge.kubelet import PodRequest, remote_log_query, remote_stream_query

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
    from shared.forge.kubelet import PodRequest, remote_stream_query

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


def test_a_client_certificate_names_the_user_and_groups() -> None:
    from home_agent.kubelet.auth import Caller, certificate_caller

    peercert = {"subject": ((("organizationName", "system:masters"),),
                            (("commonName", "kube-apiserver-kubelet-client"),))}
    assert certificate_caller(peercert) == Caller("kube-apiserver-kubelet-client",
                                                  ("system:masters",))
    assert certificate_caller({}) is None
    assert certificate_caller({"subject": ((("organizationName", "x"),),)}) is None


def test_usage_reads_as_a_kubelet_serves_it() -> None:
    from shared.forge.kubelet import (
        ContainerUsage,
        pod_metrics_usage,
        resource_metrics,
        stats_summary,
    )

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


def test_cpu_seconds_are_counted_from_the_rates() -> None:
    from home_agent.kubelet.usage import Usage

    usage = Usage(None, None)  # type: ignore[arg-type]  # counting needs neither
    key = ("ns", "p", "web")
    assert usage._count(key, 100.0, 500_000_000) == 0.0
    assert usage._count(key, 110.0, 1_000_000_000) == 5.0  # 0.5 core for 10 s
    assert usage._count(key, 110.0, 1_000_000_000) == 5.0  # the same sample: nothing more
    assert usage._count(key, 112.0, 0) == 7.0


def test_explain_names_the_kubelet_endpoint_and_an_unresolvable_hostname() -> None:
    from annexctl.explain import kubelet_endpoint

    old = {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                                    {"type": "Hostname", "address": "liqo-r"}],
                      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    endpoint, notes = kubelet_endpoint(old)
    assert endpoint["url"] == "https://10.0.0.7:10250"
    assert any("Hostname" in note for note in notes)
    endpoint, notes = kubelet_endpoint({"status": {}})
    assert endpoint["url"] is None and any("no InternalIP" in note for note in notes)
