"""`annexctl offload namespace` writes the NamespaceOffloading the flags describe (liqoctl's
flags and the short aliases), replaces it on a second run, prints it instead with -o;
`annexctl unoffload namespace` deletes it."""

from __future__ import annotations

from typing import Any

import yaml
from kubernetes.client.exceptions import ApiException

from tests.annexctl.conftest import Annexctl, home_flags
from tests.conftest import ClusterHandle
from tests.helpers import wait_for


def offloading(home: ClusterHandle, namespace: str) -> dict[str, Any] | None:
    resource = home.dynamic.resources.get(api_version="offloading.liqo.io/v1beta1",
                                          kind="NamespaceOffloading")
    try:
        return dict(resource.get(namespace=namespace, name="offloading").to_dict())
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def test_offload_writes_the_namespace_offloading_and_unoffload_deletes_it(
        annexctl: Annexctl, home: ClusterHandle, namespace: str, crds: None) -> None:
    run = annexctl("offload", "namespace", namespace, *home_flags(home),
                   "--pod-strategy", "Remote", "--mapping", "SelectedName",
                   "--remote-namespace-name", "chosen",
                   "--cluster-selector", "region in (eu,us), !staging", "-l", "tier=gold")
    assert run.code == 0, run.err
    assert namespace in run.out and "created" in run.out
    assert offloading(home, namespace)["spec"] == {
        "podOffloadingStrategy": "Remote", "namespaceMappingStrategy": "SelectedName",
        "remoteNamespaceName": "chosen",
        "clusterSelector": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu", "us"]},
                                  {"key": "staging", "operator": "DoesNotExist"}]},
            {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}]},
        "deleteRemoteClaims": False}

    again = annexctl("offload", "namespace", namespace, *home_flags(home))
    assert again.code == 0 and "configured" in again.out
    assert offloading(home, namespace)["spec"] == {
        "podOffloadingStrategy": "LocalAndRemote", "namespaceMappingStrategy": "DefaultName",
        "clusterSelector": {}, "deleteRemoteClaims": False}

    run = annexctl("unoffload", "namespace", namespace, *home_flags(home))
    assert run.code == 0, run.err
    wait_for(lambda: offloading(home, namespace) is None, timeout=30,
             message="the NamespaceOffloading is gone")


def test_offload_with_output_prints_the_resource_without_applying_it(
        annexctl: Annexctl, home: ClusterHandle, namespace: str, crds: None) -> None:
    run = annexctl("offload", "namespace", namespace, *home_flags(home), "--pod-strategy",
                   "Local", "-o", "yaml")
    assert run.code == 0, run.err
    assert yaml.safe_load(run.out)["spec"]["podOffloadingStrategy"] == "Local"
    assert offloading(home, namespace) is None


def test_offload_and_unoffload_refuse_what_cannot_work(
        annexctl: Annexctl, home: ClusterHandle, namespace: str, crds: None) -> None:
    run = annexctl("offload", "namespace", namespace, *home_flags(home), "--mapping",
                   "SelectedName")
    assert (run.code, run.err) == (
        1, "error: --remote-namespace-name is required with the SelectedName strategy\n")
    run = annexctl("offload", "namespace", namespace, *home_flags(home), "-l", "a in b")
    assert run.code == 1 and "cannot parse 'a in b'" in run.err
    run = annexctl("offload", "namespace", "no-such-namespace", *home_flags(home))
    assert run.code == 1 and "namespace no-such-namespace not found" in run.err
    run = annexctl("unoffload", "namespace", namespace, *home_flags(home))
    assert run.code == 1 and f"namespace {namespace} is not offloaded" in run.err


def test_offload_waits_for_ready_only_when_asked(
        annexctl: Annexctl, home: ClusterHandle, namespace: str, crds: None) -> None:
    # No home agent serves this namespace: nobody reports.
    run = annexctl("offload", "namespace", namespace, *home_flags(home), "--timeout", "0.5")
    assert run.code == 1
    assert run.err == (f"error: namespace {namespace}: offloading not Ready after 0.5s (phase "
                       "not reported): no cluster has reported yet; is a home agent running and "
                       "its remote selected?\n")
    assert offloading(home, namespace) is not None  # written all the same
