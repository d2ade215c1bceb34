"""Server-side Table output (what `kubectl get` prints) and PartialObjectMetadata: negotiated
from the Accept header, rows carrying PartialObjectMetadata by default, the built-in printers'
columns and cells, CRD printer columns, the default NAME/CREATED AT table, watches."""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from kubesim import printers
from tests.helpers import wait_for
from tests.kubesim.rest import call, stream
from tests.kubesim.test_api_crd import CRDS, definition, established

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
TABLE_BETA = "application/json;as=Table;v=v1beta1;g=meta.k8s.io"
KUBECTL_ACCEPT = f"{TABLE},{TABLE_BETA},application/json"  # what `kubectl get` sends
AGE = re.compile(r"^\d+s$")
KUBECTL = shutil.which("kubectl")


def cms(namespace: str, name: str = "") -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps" + (f"/{name}" if name else "")


def column_names(table: dict) -> list[str]:
    return [c["name"] for c in table["columnDefinitions"]]


def test_a_table_of_one_object_has_one_row_and_rows_carry_partial_metadata(
        home, namespace) -> None:
    _, created = call(home, "POST", cms(namespace), {"metadata": {"name": "a"},
                                                      "data": {"x": "1", "y": "2"}})
    status, table = call(home, "GET", cms(namespace, "a"), accept=KUBECTL_ACCEPT)
    assert status == 200, table
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"] == {"resourceVersion": created["metadata"]["resourceVersion"]}
    assert [(c["name"], c["type"], c["format"], c["priority"])
            for c in table["columnDefinitions"]] == [
        ("Name", "string", "name", 0), ("Data", "string", "", 0), ("Age", "string", "", 0)]
    [row] = table["rows"]
    name, data, age = row["cells"]
    assert (name, data) == ("a", 2) and AGE.match(age)
    assert row["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                             "metadata": created["metadata"]}


def test_a_list_table_has_a_row_per_item_and_the_list_metadata(home, namespace) -> None:
    for name in ("a", "b"):
        call(home, "POST", cms(namespace), {"metadata": {"name": name}})
    status, table = call(home, "GET", cms(namespace), accept=TABLE, query={"limit": "1"})
    assert status == 200, table
    assert table["metadata"]["resourceVersion"].isdigit() and table["metadata"]["continue"]
    assert len(table["rows"]) == 1
    _, rest = call(home, "GET", cms(namespace), accept=TABLE,
                   query={"continue": table["metadata"]["continue"]})
    names = [r["cells"][0] for r in table["rows"] + rest["rows"]]
    assert {"a", "b"} <= set(names)


@pytest.mark.parametrize(("include", "expected_kind"), [
    ("Object", "ConfigMap"), ("Metadata", "PartialObjectMetadata"), ("None", None)])
def test_include_object_chooses_what_each_row_carries(home, namespace, include,
                                                      expected_kind) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}, "data": {"x": "1"}})
    _, table = call(home, "GET", cms(namespace, "a"), accept=TABLE,
                    query={"includeObject": include})
    carried = table["rows"][0]["object"]
    assert (carried or {}).get("kind") == expected_kind
    if include == "Object":
        assert carried["data"] == {"x": "1"} and carried["apiVersion"] == "v1"


def test_an_unknown_include_object_is_400(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})
    status, body = call(home, "GET", cms(namespace, "a"), accept=TABLE,
                        query={"includeObject": "All"})
    assert (status, body["reason"], body["message"]) == (
        400, "BadRequest", "Unable to convert to Table as requested: includeObject: Invalid "
        "value: \"All\": must be 'Metadata', 'Object', 'None', or empty")


def test_write_answers_are_converted_too_but_a_status_stays_a_status(home, namespace) -> None:
    status, created = call(home, "POST", cms(namespace), {"metadata": {"name": "a"}},
                           accept=TABLE)
    assert (status, created["kind"], created["rows"][0]["cells"][0]) == (201, "Table", "a")
    _, patched = call(home, "PATCH", cms(namespace, "a"), {"data": {"x": "1"}},
                      content_type="application/merge-patch+json", accept=TABLE)
    assert patched["rows"][0]["cells"][1] == 1
    status, deleted = call(home, "DELETE", cms(namespace, "a"), accept=TABLE)
    assert (status, deleted["kind"], deleted["status"]) == (200, "Status", "Success")


def test_negotiation_takes_the_first_acceptable_media_type(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a"}})
    _, beta = call(home, "GET", cms(namespace, "a"), accept=TABLE_BETA)
    assert (beta["kind"], beta["apiVersion"]) == ("Table", "meta.k8s.io/v1beta1")
    assert beta["rows"][0]["object"]["apiVersion"] == "meta.k8s.io/v1beta1"
    unknown = "application/json;as=Tabular;v=v1;g=meta.k8s.io"
    _, plain = call(home, "GET", cms(namespace, "a"), accept=f"{unknown}, application/json")
    assert plain["kind"] == "ConfigMap"
    status, body = call(home, "GET", cms(namespace, "a"), accept=unknown)
    assert (status, body["reason"]) == (406, "NotAcceptable")
    assert body["message"].startswith("only the following media types are accepted: "
                                      "application/json, application/yaml")


def test_partial_object_metadata_of_an_object_and_of_a_list(home, namespace) -> None:
    call(home, "POST", cms(namespace), {"metadata": {"name": "a", "labels": {"l": "v"}},
                                        "data": {"x": "1"}})
    partial = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    partial_list = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    _, one = call(home, "GET", cms(namespace, "a"), accept=partial)
    assert (one["kind"], one["metadata"]["labels"], "data" in one) == (
        "PartialObjectMetadata", {"l": "v"}, False)
    _, listed = call(home, "GET", cms(namespace), accept=partial_list)
    assert listed["kind"] == "PartialObjectMetadataList"
    assert "a" in [i["metadata"]["name"] for i in listed["items"]]
    status, body = call(home, "GET", cms(namespace), accept=partial)
    assert (status, body["message"]) == (406, "you requested PartialObjectMetadata, but the "
                                         "requested object is a list (*core.ConfigMapList)")


# the columns of the real printers (pkg/printers/internalversion/printers.go), wide included
COLUMNS = {
    "/api/v1/namespaces/{ns}/pods": ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node",
                                     "Nominated Node", "Readiness Gates"],
    "/api/v1/nodes": ["Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP",
                      "OS-Image", "Kernel-Version", "Container-Runtime"],
    "/api/v1/namespaces": ["Name", "Status", "Age"],
    "/api/v1/namespaces/{ns}/services": ["Name", "Type", "Cluster-IP", "External-IP", "Port(s)",
                                         "Age", "Selector"],
    "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices": [
        "Name", "AddressType", "Ports", "Endpoints", "Age"],
    "/api/v1/namespaces/{ns}/secrets": ["Name", "Type", "Data", "Age"],
    "/api/v1/namespaces/{ns}/events": ["Last Seen", "Type", "Reason", "Object", "Subobject",
                                       "Source", "Message", "First Seen", "Count", "Name"],
    "/apis/events.k8s.io/v1/namespaces/{ns}/events": [
        "Last Seen", "Type", "Reason", "Object", "Subobject", "Source", "Message", "First Seen",
        "Count", "Name"],
    "/apis/apps/v1/namespaces/{ns}/deployments": ["Name", "Ready", "Up-to-date", "Available",
                                                  "Age", "Containers", "Images", "Selector"],
    "/apis/apps/v1/namespaces/{ns}/replicasets": ["Name", "Desired", "Current", "Ready", "Age",
                                                  "Containers", "Images", "Selector"],
    "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases": ["Name", "Holder", "Age"],
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings": [
        "Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"],
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings": [
        "Name", "Role", "Age", "Users", "Groups", "ServiceAccounts"],
    "/api/v1/namespaces/{ns}/endpoints": ["Name", "Endpoints", "Age"],
    "/api/v1/namespaces/{ns}/serviceaccounts": ["Name", "Secrets", "Age"],
    "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses": [
        "Name", "Class", "Hosts", "Address", "Ports", "Age"],
    "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations": [
        "Name", "Webhooks", "Age"],
    # kinds without a printer of their own get rest.defaultTableConvertor's table
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles": ["Name", "Created At"],
}


# volumes print their VolumeAttributesClass since 1.29
VOLUME_COLUMNS = {
    "/api/v1/namespaces/{ns}/persistentvolumeclaims": [
        "Name", "Status", "Volume", "Capacity", "Access Modes", "StorageClass",
        "VolumeAttributesClass", "Age", "VolumeMode"],
    "/api/v1/persistentvolumes": [
        "Name", "Capacity", "Access Modes", "Reclaim Policy", "Status", "Claim", "StorageClass",
        "VolumeAttributesClass", "Reason", "Age", "VolumeMode"],
}


def assert_columns(home, namespace: str, columns: dict[str, list[str]]) -> None:
    for path, expected in columns.items():
        status, table = call(home, "GET", path.format(ns=namespace), accept=TABLE)
        assert status == 200, (path, table)
        assert column_names(table) == expected, path


def test_each_kind_has_the_real_printers_columns(home, namespace) -> None:
    assert_columns(home, namespace, COLUMNS)


@pytest.mark.since("1.29", "volumes print their VolumeAttributesClass")
def test_volumes_print_their_attributes_class(home, namespace) -> None:
    assert_columns(home, namespace, VOLUME_COLUMNS)


WEB = {"app": "web"}
WEB_DEPLOYMENT = {
    "metadata": {"name": "web"},
    "spec": {"replicas": 0, "selector": {"matchLabels": WEB}, "template": {
        "metadata": {"labels": WEB},
        "spec": {"containers": [{"name": "c", "image": "nginx:1"},
                                {"name": "d", "image": "busybox"}]}}}}


@pytest.mark.since("1.31", "a status subresource prints its kind's columns (checked against "
                           "v1.31's registry; v1.24 does not)")
def test_a_status_subresource_prints_the_kinds_row(home, namespace) -> None:
    call(home, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", WEB_DEPLOYMENT)
    _, status = call(home, "GET",
                     f"/apis/apps/v1/namespaces/{namespace}/deployments/web/status", accept=TABLE)
    assert status["rows"][0]["cells"][:2] == ["web", "0/0"]


def test_deployment_and_service_rows(home, namespace) -> None:
    labels = WEB
    call(home, "POST", f"/apis/apps/v1/namespaces/{namespace}/deployments", WEB_DEPLOYMENT)
    call(home, "POST", f"/api/v1/namespaces/{namespace}/services", {
        "metadata": {"name": "svc"},
        "spec": {"selector": labels, "ports": [{"port": 80, "targetPort": 8080}]}})
    _, deployment = call(home, "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/web",
                         accept=TABLE)
    cells = deployment["rows"][0]["cells"]
    assert cells[:4] + cells[5:] == ["web", "0/0", 0, 0, "c,d", "nginx:1,busybox", "app=web"]
    _, service = call(home, "GET", f"/api/v1/namespaces/{namespace}/services/svc", accept=TABLE)
    name, type_, cluster_ip, external, ports, _, selector = service["rows"][0]["cells"]
    assert (name, type_, external, ports, selector) == (
        "svc", "ClusterIP", "<none>", "80/TCP", "app=web")
    assert re.match(r"^[\d.:a-f]+$", cluster_ip)


def test_role_binding_rows_list_subjects_by_kind(home, namespace) -> None:
    call(home, "POST", f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": "rb"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "view"},
        "subjects": [{"kind": "User", "name": "ann", "apiGroup": "rbac.authorization.k8s.io"},
                     {"kind": "ServiceAccount", "name": "sa", "namespace": namespace},
                     {"kind": "User", "name": "bob", "apiGroup": "rbac.authorization.k8s.io"}]})
    _, table = call(home, "GET",
                    f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/rb",
                    accept=TABLE)
    name, role, _, users, groups, accounts = table["rows"][0]["cells"]
    assert (name, role, users, groups, accounts) == (
        "rb", "ClusterRole/view", "ann, bob", "", f"{namespace}/sa")


def test_a_table_watch_sends_the_columns_with_the_first_event_only(home, namespace) -> None:
    for name in ("a", "b"):
        call(home, "POST", cms(namespace), {"metadata": {"name": name}})
    events = list(stream(home, cms(namespace), {"resourceVersion": "0", "timeoutSeconds": "1"},
                         accept=KUBECTL_ACCEPT))
    assert len(events) >= 2 and {e["type"] for e in events} == {"ADDED"}
    tables_sent = [e["object"] for e in events]
    assert {t["kind"] for t in tables_sent} == {"Table"}
    assert column_names(tables_sent[0]) == ["Name", "Data", "Age"]
    assert all(t["columnDefinitions"] is None for t in tables_sent[1:])
    assert {"a", "b"} <= {t["rows"][0]["cells"][0] for t in tables_sent}


# ------------------------------------------------------------------------- custom resources
COLUMNS_CRD = [
    {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
    {"name": "Color", "type": "string", "jsonPath": ".spec.color", "description": "the color"},
    {"name": "Ready", "type": "string",
     "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Free", "type": "string", "jsonPath": ".spec.free", "priority": 1},
    {"name": "Missing", "type": "boolean", "jsonPath": ".spec.nothing"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]
SCHEMA = {"type": "object", "properties": {
    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}


@pytest.fixture
def crd_group(home) -> Iterator[str]:
    """widgets.<group> with printer columns on v1 and none on v2."""
    group = f"t{uuid.uuid4().hex[:8]}.example.com"
    crd = definition(group, SCHEMA)
    v1 = crd["spec"]["versions"][0]
    v1["additionalPrinterColumns"] = COLUMNS_CRD
    del v1["subresources"]
    crd["spec"]["versions"].append({**v1, "name": "v2", "storage": False,
                                    "additionalPrinterColumns": []})
    status, body = call(home, "POST", CRDS, crd)
    assert status == 201, body
    wait_for(lambda: established(home, f"widgets.{group}"), 60, "CRD not established")
    wait_for(lambda: call(home, "GET", f"/apis/{group}/v2")[0] == 200, 60, "not served")
    yield group
    call(home, "DELETE", f"{CRDS}/widgets.{group}")


def test_custom_resources_print_the_crd_versions_printer_columns(home, namespace,
                                                                 crd_group) -> None:
    path = f"/apis/{crd_group}/v1/namespaces/{namespace}/widgets"
    status, body = call(home, "POST", path, {
        "apiVersion": f"{crd_group}/v1", "kind": "Widget", "metadata": {"name": "w"},
        "spec": {"size": 3, "color": "red", "free": {"b": 1, "a": [1]}},
        "status": {"conditions": [{"type": "Other", "status": "False"},
                                  {"type": "Ready", "status": "True"}]}})
    assert status == 201, body
    _, table = call(home, "GET", f"{path}/w", accept=TABLE)
    columns = table["columnDefinitions"]
    assert [(c["name"], c["type"], c["priority"]) for c in columns] == [
        ("Name", "string", 0), ("Size", "integer", 0), ("Color", "string", 0),
        ("Ready", "string", 0), ("Free", "string", 1), ("Missing", "boolean", 0),
        ("Age", "date", 0)]
    assert columns[2]["description"] == "the color"
    assert columns[1]["description"] == (
        "Custom resource definition column (in JSONPath format): .spec.size")
    *cells, age = table["rows"][0]["cells"]
    assert cells == ["w", 3, "red", "True", '{"a":[1],"b":1}', None] and AGE.match(age)
    # a version without printer columns prints NAME and AGE
    _, v2 = call(home, "GET", f"/apis/{crd_group}/v2/namespaces/{namespace}/widgets",
                 accept=TABLE)
    assert column_names(v2) == ["Name", "Age"] and v2["rows"][0]["cells"][0] == "w"


# --------------------------------------------------------------------------- kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_get_pods_wide_prints_every_column(home, namespace) -> None:
    call(home, "POST", f"/api/v1/namespaces/{namespace}/pods", {
        "metadata": {"name": "p"},
        "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "nginx"}]}})
    assert KUBECTL is not None
    result = subprocess.run([KUBECTL, "--kubeconfig", str(home.kubeconfig), "-n", namespace,
                             "get", "pods", "-o", "wide"], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    header, row = result.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE",
                              "NOMINATED", "NODE", "READINESS", "GATES"]
    name, ready, phase, restarts, age, *wide = row.split()
    assert (name, ready, phase, restarts, wide) == (
        "p", "0/1", "Pending", "0", ["<none>"] * 4)
    assert AGE.match(age)


# ---------------------------------------------------------------- printer logic (no cluster)
NOW = datetime(2024, 1, 1, 12, 0, tzinfo=UTC)


def ago(seconds: int) -> str:
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod(*statuses: dict, init: tuple[dict, ...] = (), phase: str = "Running",
        conditions: tuple[str, ...] = (), **meta: object) -> dict:
    return {
        "metadata": {"name": "p", "creationTimestamp": ago(300), **meta},
        "spec": {"containers": [{"name": f"c{i}"} for i in range(len(statuses) or 1)],
                 "initContainers": [{"name": f"i{i}", **({"restartPolicy": "Always"}
                                                         if s.get("sidecar") else {})}
                                    for i, s in enumerate(init)]},
        "status": {"phase": phase, "containerStatuses": list(statuses),
                   "initContainerStatuses": [
                       {"name": f"i{i}", **{k: v for k, v in s.items() if k != "sidecar"}}
                       for i, s in enumerate(init)],
                   "conditions": [{"type": c, "status": "True"} for c in conditions]},
    }


RUNNING = {"ready": True, "restartCount": 0, "state": {"running": {}}}
WAITING = {"ready": False, "restartCount": 0, "state": {"waiting": {"reason":
                                                                    "ContainerCreating"}}}
CRASHING = {"ready": False, "restartCount": 3, "state": {"waiting": {"reason":
                                                                     "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(30)}}}
DONE = {"ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 0,
                                                                     "reason": "Completed"}}}
KILLED = {"ready": False, "restartCount": 0, "state": {"terminated": {"exitCode": 137,
                                                                       "signal": 9}}}


@pytest.mark.parametrize(("subject", "ready", "status", "restarts"), [
    (pod(phase="Pending"), "0/1", "Pending", "0"),
    (pod(WAITING, phase="Pending"), "0/1", "ContainerCreating", "0"),
    (pod(RUNNING, RUNNING), "2/2", "Running", "0"),
    (pod(DONE, phase="Succeeded"), "0/1", "Completed", "0"),
    (pod(DONE, RUNNING, conditions=("Ready",)), "1/2", "Running", "0"),
    (pod(DONE, RUNNING), "1/2", "NotReady", "0"),
    (pod(CRASHING), "0/1", "CrashLoopBackOff", "3 (30s ago)"),
    (pod(KILLED, phase="Failed"), "0/1", "Signal:9", "0"),
    (pod(RUNNING, deletionTimestamp=ago(1)), "1/1", "Terminating", "0"),
    (pod(RUNNING, deletionTimestamp=ago(1), phase="Succeeded"), "1/1", "Succeeded", "0"),
    (pod(WAITING, init=({"state": {"running": {}}},), phase="Pending"), "0/1", "Init:0/1", "0"),
    (pod(WAITING, init=(DONE, {"state": {"waiting": {"reason": "PodInitializing"}}}),
         phase="Pending"), "0/1", "Init:1/2", "0"),
    (pod(WAITING, init=({"state": {"terminated": {"exitCode": 2, "reason": "Error"}}},),
         phase="Pending"), "0/1", "Init:Error", "0"),
    (pod(WAITING, init=(CRASHING,), phase="Pending"), "0/1", "Init:CrashLoopBackOff",
     "3 (30s ago)"),
    (pod(RUNNING, init=({**RUNNING, "started": True, "sidecar": True},),
         conditions=("Initialized",)), "2/2", "Running", "0"),
])
def test_pod_status_follows_the_printers_reason_logic(subject, ready, status,
                                                      restarts) -> None:
    cells = printers.pod_row(subject, NOW).cells
    assert cells[1:5] == [ready, status, restarts, "5m"]


def test_a_pod_that_ran_to_completion_carries_a_completed_row_condition() -> None:
    row = printers.pod_row(pod(DONE, phase="Succeeded"), NOW)
    assert row.conditions == [{"type": "Completed", "status": "True", "reason": "Succeeded",
                               "message": "The pod has completed successfully."}]
    scheduling_gated = pod(phase="Pending")
    scheduling_gated["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                                 "reason": "SchedulingGated"}]
    assert printers.pod_row(scheduling_gated, NOW).cells[2] == "SchedulingGated"


def test_node_status_roles_and_wide_columns() -> None:
    node = {"metadata": {"name": "n", "creationTimestamp": ago(3 * 86400 + 3600),
                         "labels": {"node-role.kubernetes.io/control-plane": "",
                                    "kubernetes.io/role": "worker"}},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{"type": "Ready", "status": "False"}],
                       "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                       "nodeInfo": {"kubeletVersion": "v1.31.0"}}}
    assert printers.node_row(node, NOW).cells == [
        "n", "NotReady,SchedulingDisabled", "control-plane,worker", "3d1h", "v1.31.0",
        "10.0.0.1", "<none>", "<unknown>", "<unknown>", "<unknown>"]
    node["status"]["conditions"] = []
    assert printers.node_row(node, NOW).cells[1] == "Unknown,SchedulingDisabled"


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (59, "59s"), (119, "119s"), (120, "2m"), (150, "2m30s"),
    (600, "10m"), (3 * 3600 + 60, "3h1m"), (8 * 3600, "8h"), (2 * 86400, "2d"),
    (3 * 86400 + 3600, "3d1h"), (30 * 86400, "30d"), (3 * 365 * 86400 + 86400, "3y1d"),
    (9 * 365 * 86400, "9y")])
def test_ages_read_like_apimachinery_human_durations(seconds, text) -> None:
    assert printers.human_duration(seconds) == text
