"""DefaultIngressClass, as kube-apiserver's admission plugin: an Ingress created without a class
gets the cluster's default IngressClass (the newest one annotated as the default)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

DEFAULT = {"ingressclass.kubernetes.io/is-default-class": "true"}


@pytest.fixture
def default_class(home: Any) -> Iterator[str]:
    networking = client.NetworkingV1Api(home.api_client)
    networking.create_ingress_class({"metadata": {"name": "sim-default", "annotations": DEFAULT},
                                     "spec": {"controller": "example.com/ingress"}})
    yield "sim-default"
    networking.delete_ingress_class("sim-default")


def ingress(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"rules": [{"host": "a.example.com"}], **spec}}


def test_an_ingress_without_a_class_gets_the_default_one(
        home: Any, namespace: str, default_class: str) -> None:
    networking = client.NetworkingV1Api(home.api_client)
    assert networking.create_namespaced_ingress(
        namespace, ingress("plain")).spec.ingress_class_name == default_class
    assert networking.create_namespaced_ingress(
        namespace, ingress("named", ingressClassName="other")).spec.ingress_class_name == "other"
    legacy = ingress("legacy")
    legacy["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "other"}
    assert networking.create_namespaced_ingress(namespace, legacy).spec.ingress_class_name is None
