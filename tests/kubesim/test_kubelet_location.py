"""What kubesim's API server asks a kubelet for pods/log, exec, attach and port-forward: the
query kube-apiserver's location functions write (pkg/registry/core/pod/strategy.go LogLocation,
streamParams), decoded from the client's pods/* options and encoded under the kubelet's names.
These read kubesim's own translation, so they do not run against a real cluster."""

from __future__ import annotations

import pytest
from multidict import MultiDict

from kubesim.errors import StatusError
from kubesim.kubeletproxy import log_params, port_forward_params, stream_params

pytestmark = pytest.mark.kubesim_only(reason="unit tests of kubesim's own translation of pods/* "
                                             "options (kubesim.kubeletproxy)")


def test_exec_asks_the_kubelet_for_input_output_error_and_tty() -> None:
    query = MultiDict([("command", "sh"), ("command", "-c"), ("command", "exit 3"),
                       ("stdin", "true"), ("stdout", "1"), ("stderr", ""), ("tty", "false"),
                       ("container", "main"), ("other", "x")])
    assert stream_params("exec", query) == {
        "command": ["sh", "-c", "exit 3"], "error": ["1"], "input": ["1"], "output": ["1"]}


def test_attach_carries_the_streams_and_no_command() -> None:
    query = MultiDict([("stdin", "True"), ("stdout", "0"), ("tty", "t"), ("command", "x")])
    assert stream_params("attach", query) == {"input": ["1"], "tty": ["1"]}


def test_port_forward_joins_the_ports_as_the_kubelets_port() -> None:
    query = MultiDict([("ports", "80"), ("ports", "8080,9090")])
    assert port_forward_params(query) == {"port": ["80,8080,9090"]}
    assert port_forward_params(MultiDict()) == {}
    with pytest.raises(StatusError) as caught:
        port_forward_params(MultiDict([("ports", "http")]))
    assert caught.value.code == 400


def test_logs_pass_the_options_normalized_and_keep_the_backend_choice() -> None:
    query = MultiDict([("follow", "1"), ("previous", "false"), ("timestamps", "True"),
                       ("tailLines", "03"), ("limitBytes", "10"), ("container", "main"),
                       ("sinceTime", "2026-01-02T03:04:05.678+01:00"),
                       ("insecureSkipTLSVerifyBackend", "true"), ("tail", "5")])
    assert log_params(query) == {
        "follow": ["true"], "limitBytes": ["10"], "sinceTime": ["2026-01-02T02:04:05Z"],
        "tailLines": ["3"], "timestamps": ["true"]}
    assert log_params(MultiDict([("sinceSeconds", "60")])) == {"sinceSeconds": ["60"]}
    with pytest.raises(StatusError) as caught:
        log_params(MultiDict([("sinceTime", "yesterday")]))
    assert caught.value.code == 400
