"""annexctl explain: where the home API server reaches a virtual node's kubelet API, and why not
by a Hostname."""

from __future__ import annotations

from annexctl.explain import kubelet_endpoint


def test_explain_names_the_kubelet_endpoint_and_an_unresolvable_hostname() -> None:
    old = {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.7"},
                                    {"type": "Hostname", "address": "liqo-r"}],
                      "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}}}}
    endpoint, notes = kubelet_endpoint(old)
    assert endpoint["url"] == "https://10.0.0.7:10250"
    assert any("Hostname" in note for note in notes)
    endpoint, notes = kubelet_endpoint({"status": {}})
    assert endpoint["url"] is None and any("no InternalIP" in note for note in notes)
