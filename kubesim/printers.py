"""What a kind's Table looks like: its columns and how each object's cells read, as the real
server prints them: the built-in kinds' printers (pkg/printers/internalversion/printers.go),
custom resources (apiextensions tableconvertor: NAME, then the CRD version's
additionalPrinterColumns evaluated as JSONPath) and rest.defaultTableConvertor (NAME, CREATED
AT) for every other kind. Cells are computed when asked: AGE is a string such as "5m"."""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

# typed from jsonpath-ng 1.16 on (py.typed), untyped before: the ignore serves the older releases
from jsonpath_ng.ext.parser import parse as parse_jsonpath  # type: ignore[import-untyped, unused-ignore]

from kubesim.conversion import EVENT_RENAMES
from kubesim.kinds import ResourceKind
from kubesim.selectors import label_selector_from_object_strict

Obj = dict[str, Any]
NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, although some "
    "resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATED_DOC = (
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    description: str
    priority: int = 0
    format: str = ""

    def definition(self) -> Obj:
        return {"name": self.name, "type": self.type, "format": self.format,
                "description": self.description, "priority": self.priority}


@dataclass
class Row:
    cells: list[Any]
    conditions: list[Obj] | None = None


RowFunction = Callable[[Obj, datetime], Row]


@dataclass(frozen=True)
class Printer:
    columns: tuple[Column, ...]
    row: RowFunction
    empty_rows: list[Any] | None = None  # JSON of the rows of an empty list ([] or null)


def printer_for(kind: ResourceKind, crd: Obj | None) -> Printer:
    """`kind`'s printer; a custom resource's comes from `crd`, the definition serving it."""
    if kind.custom:
        return custom_resource_printer(crd_columns(crd, kind.version))
    return BUILTIN_PRINTERS.get(kind.storage_key, DEFAULT_PRINTER)


# ----------------------------------------------------------------------------- primitives
def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def human_duration(seconds_float: float) -> str:
    """apimachinery duration.HumanDuration."""
    seconds = math.trunc(seconds_float)
    if seconds < -1:
        return "<invalid>"
    if seconds < 0:
        return "0s"
    if seconds < 60 * 2:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 10:
        rest = seconds % 60
        return f"{minutes}m" if rest == 0 else f"{minutes}m{rest}s"
    if minutes < 60 * 3:
        return f"{minutes}m"
    hours = seconds // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h" if rest == 0 else f"{hours}h{rest}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d" if rest == 0 else f"{hours // 24}d{rest}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        rest = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if rest == 0 else f"{hours // 24 // 365}y{rest}d"
    return f"{hours // 24 // 365}y"


def since(value: Any, now: datetime) -> str:
    """translateTimestampSince: "<unknown>" for a missing time."""
    moment = parse_time(value)
    if moment is None:
        return "<unknown>"
    return human_duration((now - moment).total_seconds())


def age(obj: Obj, now: datetime) -> str:
    return since(obj["metadata"].get("creationTimestamp"), now)


def format_labels(labels: Mapping[str, str] | None) -> str:
    """labels.FormatLabels."""
    text = ",".join(f"{k}={v}" for k, v in sorted((labels or {}).items()))
    return text or "<none>"


def selector_string(selector: Mapping[str, Any] | None) -> str:
    """LabelSelectorAsSelector(selector).String()."""
    try:
        return str(label_selector_from_object_strict(selector))
    except ValueError:
        return "<invalid>"


def format_label_selector(selector: Mapping[str, Any] | None) -> str:
    """metav1.FormatLabelSelector."""
    try:
        text = str(label_selector_from_object_strict(selector))
    except ValueError:
        return "<error>"
    return text or "<none>"


def container_cells(spec: Obj) -> tuple[str, str]:
    """layoutContainerCells: names and images, comma-separated."""
    containers = spec.get("containers") or []
    return (",".join(c.get("name", "") for c in containers),
            ",".join(c.get("image", "") for c in containers))


def _name(obj: Obj) -> str:
    return str(obj["metadata"].get("name", ""))


def _template_spec(obj: Obj) -> Obj:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


# ---------------------------------------------------------------------------------- pods
POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                  "message": "The pod has completed successfully."}]
POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed",
               "message": "The pod failed."}]


def _condition_true(conditions: Sequence[Obj], type_: str) -> bool:
    for condition in conditions:
        if condition.get("type") == type_:
            return condition.get("status") == "True"
    return False


def _later(current: datetime | None, status: Obj) -> datetime | None:
    finished = parse_time(((status.get("lastState") or {}).get("terminated") or {})
                          .get("finishedAt"))
    if finished is not None and (current is None or current < finished):
        return finished
    return current


def _terminated_reason(terminated: Obj, prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def pod_row(pod: Obj, now: datetime) -> Row:
    """printPod: READY, STATUS (the reason logic), RESTARTS, AGE, then the wide columns."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    conditions = status.get("conditions") or []
    total = len(spec.get("containers") or [])
    ready = restarts = sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None
    phase = status.get("phase", "")
    reason = status.get("reason") or phase
    for condition in conditions:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == (
                "SchedulingGated"):
            reason = "SchedulingGated"
    init_specs = spec.get("initContainers") or []
    sidecars = {c.get("name") for c in init_specs if c.get("restartPolicy") == "Always"}
    total += len([c for c in init_specs if c.get("restartPolicy") == "Always"])
    initializing = False
    for index, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += container.get("restartCount", 0)
        last_restart = _later(last_restart, container)
        sidecar = container.get("name") in sidecars
        if sidecar:
            sidecar_restarts += container.get("restartCount", 0)
            last_sidecar_restart = _later(last_sidecar_restart, container)
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and container.get("started"):
            ready += 1 if container.get("ready") else 0
            continue
        if terminated is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{index}/{len(init_specs)}"
        initializing = True
        break
    if not initializing or _condition_true(conditions, "Initialized"):
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        running = False
        for container in reversed(status.get("containerStatuses") or []):
            restarts += container.get("restartCount", 0)
            last_restart = _later(last_restart, container)
            state = container.get("state") or {}
            terminated, waiting = state.get("terminated"), state.get("waiting")
            if waiting and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None:
                reason = _terminated_reason(terminated)
            elif container.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"
    deleting = bool(pod["metadata"].get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    restart_cell = str(restarts)
    if restarts and last_restart is not None:
        restart_cell = f"{restarts} ({since(last_restart.isoformat(), now)} ago)"
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        by_type: dict[str, Obj] = {}
        for condition in conditions:
            by_type.setdefault(condition.get("type"), condition)
        true = len([g for g in gates
                    if (by_type.get(g.get("conditionType")) or {}).get("status") == "True"])
        gates_cell = f"{true}/{len(gates)}"
    cells = [_name(pod), f"{ready}/{total}", reason, restart_cell, age(pod, now),
             (ips[0].get("ip") if ips else "") or "<none>", spec.get("nodeName") or "<none>",
             status.get("nominatedNodeName") or "<none>", gates_cell]
    row_conditions = {"Succeeded": POD_SUCCEEDED, "Failed": POD_FAILED}.get(phase)
    return Row(cells, row_conditions)


# --------------------------------------------------------------------------- other kinds
def node_row(node: Obj, now: datetime) -> Row:
    spec, status = node.get("spec") or {}, node.get("status") or {}
    by_type = {c.get("type"): c for c in status.get("conditions") or []}
    states = []
    if "Ready" in by_type:
        states.append("Ready" if by_type["Ready"].get("status") == "True" else "NotReady")
    states = states or ["Unknown"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = set()
    for key, value in (node["metadata"].get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/"):]:
            roles.add(key[len("node-role.kubernetes.io/"):])
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}

    def address(type_: str) -> str:
        for entry in status.get("addresses") or []:
            if entry.get("type") == type_:
                return str(entry.get("address", ""))
        return "<none>"

    return Row([_name(node), ",".join(states), ",".join(sorted(roles)) or "<none>",
                age(node, now), info.get("kubeletVersion", ""), address("InternalIP"),
                address("ExternalIP"), info.get("osImage") or "<unknown>",
                info.get("kernelVersion") or "<unknown>",
                info.get("containerRuntimeVersion") or "<unknown>"])


def _load_balancer(status: Obj) -> str:
    seen: list[str] = []
    for ingress in (status.get("loadBalancer") or {}).get("ingress") or []:
        value = ingress.get("ip") or ingress.get("hostname") or ""
        if value and value not in seen:
            seen.append(value)
    return ",".join(seen)


def _external_ip(service: Obj) -> str:
    spec = service.get("spec") or {}
    external = spec.get("externalIPs") or []
    type_ = spec.get("type", "")
    if type_ in ("ClusterIP", "NodePort"):
        return ",".join(external) or "<none>"
    if type_ == "LoadBalancer":
        balancers = _load_balancer(service.get("status") or {})
        if external:
            return ",".join(([*balancers.split(",")] if balancers else []) + external)
        return balancers or "<pending>"
    if type_ == "ExternalName":
        return str(spec.get("externalName", ""))
    return "<unknown>"


def service_row(service: Obj, now: datetime) -> Row:
    spec = service.get("spec") or {}
    ports = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol", "TCP")
        node_port = port.get("nodePort") or 0
        ports.append(f"{port.get('port')}:{node_port}/{protocol}" if node_port > 0
                     else f"{port.get('port')}/{protocol}")
    cluster_ips = spec.get("clusterIPs") or []
    return Row([_name(service), spec.get("type", ""), cluster_ips[0] if cluster_ips else "<none>",
                _external_ip(service), ",".join(ports) or "<none>", age(service, now),
                format_labels(spec.get("selector"))])


def _with_more(values: list[str], total: int, maximum: int = 3, empty: str = "<unset>") -> str:
    """listWithMoreString."""
    text = ",".join(values[:maximum])
    if total > maximum:
        return f"{text} + {total - maximum} more..."
    return text or empty


def endpoint_slice_row(slice_: Obj, now: datetime) -> Row:
    ports = []
    for port in slice_.get("ports") or []:
        if port.get("port") is not None:
            ports.append(str(port["port"]))
        elif port.get("name") is not None:
            ports.append(str(port["name"]))
        else:
            ports.append("*")
    addresses = [a for e in slice_.get("endpoints") or [] for a in e.get("addresses") or []]
    return Row([_name(slice_), slice_.get("addressType", ""), _with_more(ports, len(ports)),
                _with_more(addresses, len(addresses)), age(slice_, now)])


def endpoints_row(endpoints: Obj, now: datetime) -> Row:
    """formatEndpoints(endpoints, nil)."""
    subsets = endpoints.get("subsets") or []
    listed: list[str] = []
    count = 0
    for subset in subsets:
        addresses = [a.get("ip", "") for a in subset.get("addresses") or []]
        ports = subset.get("ports") or []
        if not ports:
            count += len(addresses)
            listed.extend(addresses)
        for port in ports:
            count += len(addresses)
            listed.extend(f"[{ip}]:{port.get('port')}" if ":" in ip else f"{ip}:{port.get('port')}"
                          for ip in addresses)
    cell = "<none>" if not subsets else (
        f"{','.join(listed[:3])} + {count - 3} more..." if len(listed) > 3 else ",".join(listed))
    return Row([_name(endpoints), cell, age(endpoints, now)])


def core_event(event: Obj) -> Obj:
    """An events.k8s.io/v1 Event in its core v1 form (the printers read that form)."""
    if event.get("apiVersion") != "events.k8s.io/v1":
        return event
    renames = dict(EVENT_RENAMES)
    return {renames.get(k, k): v for k, v in event.items()}


def event_row(served: Obj, now: datetime) -> Row:
    event = core_event(served)
    first = since(event.get("firstTimestamp"), now) if event.get("firstTimestamp") else since(
        event.get("eventTime"), now)
    last = since(event.get("lastTimestamp"), now) if event.get("lastTimestamp") else first
    count = event.get("count") or 0
    series = event.get("series")
    if series is not None:
        last = since(series.get("lastObservedTime"), now)
        count = series.get("count", 0)
    elif count == 0:
        count = 1  # singleton events of the new API carry no count
    involved = event.get("involvedObject") or {}
    kind = str(involved.get("kind", "")).lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    component = source.get("component") or event.get("reportingComponent") or ""
    instance = source.get("host") or event.get("reportingInstance") or ""
    source_cell = f"{component}, {instance}" if instance else component
    return Row([last, event.get("type", ""), event.get("reason", ""), target,
                involved.get("fieldPath", ""), source_cell,
                str(event.get("message", "")).strip(), first, count, _name(event)])


def deployment_row(deployment: Obj, now: datetime) -> Row:
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    names, images = container_cells(_template_spec(deployment))
    return Row([_name(deployment),
                f"{status.get('readyReplicas', 0)}/{spec.get('replicas', 0)}",
                status.get("updatedReplicas", 0), status.get("availableReplicas", 0),
                age(deployment, now), names, images, selector_string(spec.get("selector"))])


def replica_set_row(replica_set: Obj, now: datetime) -> Row:
    spec, status = replica_set.get("spec") or {}, replica_set.get("status") or {}
    names, images = container_cells(_template_spec(replica_set))
    return Row([_name(replica_set), spec.get("replicas", 0), status.get("replicas", 0),
                status.get("readyReplicas", 0), age(replica_set, now), names, images,
                format_label_selector(spec.get("selector"))])


def ingress_row(ingress: Obj, now: datetime) -> Row:
    spec = ingress.get("spec") or {}
    rules = spec.get("rules") or []
    hosts = [r["host"] for r in rules if r.get("host")][:3]
    hosts_cell = ",".join(hosts) or "*"
    if len(rules) > 3 and hosts:
        hosts_cell = f"{hosts_cell} + {len(rules) - 3} more..."
    return Row([_name(ingress), spec.get("ingressClassName") or "<none>", hosts_cell,
                _load_balancer(ingress.get("status") or {}),
                "80, 443" if spec.get("tls") else "80", age(ingress, now)])


BETA_STORAGE_CLASS = "volume.beta.kubernetes.io/storage-class"
ACCESS_MODES = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                ("ReadWriteOncePod", "RWOP"))


def access_modes(modes: Sequence[str] | None) -> str:
    """GetAccessModesAsString."""
    return ",".join(short for mode, short in ACCESS_MODES if mode in (modes or ()))


def _storage_class(obj: Obj) -> str:
    """GetPersistentVolume(Claim)Class: the beta annotation first."""
    annotations = obj["metadata"].get("annotations") or {}
    if BETA_STORAGE_CLASS in annotations:
        return str(annotations[BETA_STORAGE_CLASS])
    return str((obj.get("spec") or {}).get("storageClassName") or "")


def _volume_phase(obj: Obj) -> str:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str((obj.get("status") or {}).get("phase", ""))


def persistent_volume_row(volume: Obj, now: datetime) -> Row:
    spec, status = volume.get("spec") or {}, volume.get("status") or {}
    claim = spec.get("claimRef")
    return Row([_name(volume), (spec.get("capacity") or {}).get("storage", "0"),
                access_modes(spec.get("accessModes")),
                spec.get("persistentVolumeReclaimPolicy", ""), _volume_phase(volume),
                f"{claim.get('namespace', '')}/{claim.get('name', '')}" if claim else "",
                _storage_class(volume), spec.get("volumeAttributesClassName") or "<unset>",
                status.get("reason", ""), age(volume, now), spec.get("volumeMode") or "<unset>"])


def persistent_volume_claim_row(claim: Obj, now: datetime) -> Row:
    spec, status = claim.get("spec") or {}, claim.get("status") or {}
    bound = bool(spec.get("volumeName"))
    return Row([_name(claim), _volume_phase(claim), spec.get("volumeName", ""),
                (status.get("capacity") or {}).get("storage", "0") if bound else "",
                access_modes(status.get("accessModes")) if bound else "",
                _storage_class(claim), spec.get("volumeAttributesClassName") or "<unset>",
                age(claim, now), spec.get("volumeMode") or "<unset>"])


def binding_row(binding: Obj, now: datetime) -> Row:
    """printRoleBinding / printClusterRoleBinding with SubjectsStrings."""
    role = binding.get("roleRef") or {}
    by_kind: dict[str, list[str]] = {"User": [], "Group": [], "ServiceAccount": []}
    for subject in binding.get("subjects") or []:
        kind = subject.get("kind", "")
        if kind == "ServiceAccount":
            by_kind[kind].append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
        elif kind in by_kind:
            by_kind[kind].append(str(subject.get("name", "")))
    return Row([_name(binding), f"{role.get('kind', '')}/{role.get('name', '')}",
                age(binding, now), ", ".join(by_kind["User"]), ", ".join(by_kind["Group"]),
                ", ".join(by_kind["ServiceAccount"])])


def _simple(*cells: Callable[[Obj], Any]) -> RowFunction:
    """A row of NAME, the given cells, then AGE."""
    def row(obj: Obj, now: datetime) -> Row:
        return Row([_name(obj), *(cell(obj) for cell in cells), age(obj, now)])

    return row


# ------------------------------------------------------------------------- printer table
# The field documentation (SwaggerDoc) the real printers use as column descriptions.
FIELD_DOCS: dict[str, str] = {
    'PodStatus.podIP': (
        'podIP address allocated to the pod. Routable at least within the cluster. Empty if '
        'not yet allocated.'
    ),
    'PodSpec.nodeName': (
        'NodeName indicates in which node this pod is scheduled. If empty, this pod is a '
        'candidate for scheduling by the scheduler defined in schedulerName. Once this '
        'field is set, the kubelet for this node becomes responsible for the lifecycle of '
        'this pod. This field should not be used to express a desire for the pod to be '
        'scheduled on a specific node. '
        'https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename'
    ),
    'PodStatus.nominatedNodeName': (
        'nominatedNodeName is set only when this pod preempts other pods on the node, but '
        'it cannot be scheduled right away as preemption victims receive their graceful '
        'termination periods. This field does not guarantee that the pod will be scheduled '
        'on this node. Scheduler may decide to place the pod elsewhere if other nodes '
        'become available sooner. Scheduler may also decide to give the resources on this '
        'node to a higher priority pod that is created after preemption. As a result, this '
        'field may be different than PodSpec.nodeName when the pod is scheduled.'
    ),
    'PodSpec.readinessGates': (
        'If specified, all readiness gates will be evaluated for pod readiness. A pod is '
        'ready when all its containers are ready AND all conditions specified in the '
        'readiness gates have status equal to "True" More info: '
        'https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates'
    ),
    'ReplicaSetSpec.replicas': (
        'Replicas is the number of desired pods. This is a pointer to distinguish between '
        'explicit zero and unspecified. Defaults to 1. More info: '
        'https://kubernetes.io/docs/concepts/workloads/controllers/replicaset'
    ),
    'ReplicaSetStatus.replicas': (
        'Replicas is the most recently observed number of non-terminating pods. More info: '
        'https://kubernetes.io/docs/concepts/workloads/controllers/replicaset'
    ),
    'ReplicaSetStatus.readyReplicas': (
        'The number of non-terminating pods targeted by this ReplicaSet with a Ready '
        'Condition.'
    ),
    'ReplicaSetSpec.selector': (
        'Selector is a label query over pods that should match the replica count. Label '
        'keys and values that must match in order to be controlled by this replica set. It '
        "must match the pod template's labels. More info: "
        'https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors'
    ),
    'ServiceSpec.type': (
        'type determines how the Service is exposed. Defaults to ClusterIP. Valid options '
        'are ExternalName, ClusterIP, NodePort, and LoadBalancer. "ClusterIP" allocates a '
        'cluster-internal IP address for load-balancing to endpoints. Endpoints are '
        'determined by the selector or if that is not specified, by manual construction of '
        'an Endpoints object or EndpointSlice objects. If clusterIP is "None", no virtual '
        'IP is allocated and the endpoints are published as a set of endpoints rather than '
        'a virtual IP. "NodePort" builds on ClusterIP and allocates a port on every node '
        'which routes to the same endpoints as the clusterIP. "LoadBalancer" builds on '
        'NodePort and creates an external load-balancer (if supported in the current cloud) '
        'which routes to the same endpoints as the clusterIP. "ExternalName" aliases this '
        'service to the specified externalName. Several other fields do not apply to '
        'ExternalName services. More info: '
        'https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types'  # noqa: E501
    ),
    'ServiceSpec.clusterIP': (
        'clusterIP is the IP address of the service and is usually assigned randomly. If an '
        'address is specified manually, is in-range (as per system configuration), and is '
        'not in use, it will be allocated to the service; otherwise creation of the service '
        'will fail. This field may not be changed through updates unless the type field is '
        'also being changed to ExternalName (which requires this field to be blank) or the '
        'type field is being changed from ExternalName (in which case this field may '
        'optionally be specified, as describe above).\n\nValid values are "None", empty '
        'string (""), or a valid IP address. Setting this to "None" makes a "headless '
        'service" (no virtual IP), which is useful when direct endpoint connections are '
        'preferred and proxying is not required.\n\nOnly applies to types ClusterIP, '
        'NodePort, and LoadBalancer. If this field is specified when creating a Service of '
        'type ExternalName, creation will fail. This field will be wiped when updating a '
        'Service to type ExternalName. More info: '
        'https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies'  # noqa: E501
    ),
    'ServiceSpec.externalIPs': (
        'externalIPs is a list of IP addresses for which nodes in the cluster will also '
        'accept traffic for this service.\n\nThese IPs are not managed by '
        'Kubernetes.\n\nThe user is responsible for ensuring that traffic arrives at a node '
        'with this IP.\n\nA common example is external load-balancers that are not part of '
        'the Kubernetes system.'
    ),
    'ServiceSpec.ports': (
        'The list of ports that are exposed by this service. More info: '
        'https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies'  # noqa: E501
    ),
    'ServiceSpec.selector': (
        'Route service traffic to pods with label keys and values matching this selector. '
        'If empty or not present, the service is assumed to have an external process '
        'managing its endpoints, which Kubernetes will not modify. Only applies to types '
        'ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: '
        'https://kubernetes.io/docs/concepts/services-networking/service/'
    ),
    'Endpoints.subsets': (
        'The set of all endpoints is the union of all subsets. Addresses are placed into '
        'subsets according to the IPs they share. A single address with multiple ports, '
        'some of which are ready and some of which are not (because they come from '
        'different containers) will result in the address being displayed in different '
        'subsets for the different ports. No address will appear in both Addresses and '
        'NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a '
        'service.'
    ),
    'NodeSystemInfo.kubeletVersion': (
        'Kubelet Version reported by the node.'
    ),
    'NodeStatus.addresses': (
        'List of addresses reachable to the node. Queried from cloud provider, if '
        'available. More info: '
        'https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field '
        'is declared as mergeable, but the merge key is not sufficiently unique, which can '
        'cause data corruption when it is merged. Callers should instead use a '
        'full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers '
        'should assume that addresses can change during the lifetime of a Node. However, '
        'there are some exceptions where this may not be possible, such as Pods that '
        "inherit a Node's address in its own status or consumers of the downward API "
        '(status.hostIP).'
    ),
    'NodeSystemInfo.osImage': (
        'OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 '
        '(wheezy)).'
    ),
    'NodeSystemInfo.kernelVersion': (
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."
    ),
    'NodeSystemInfo.containerRuntimeVersion': (
        'ContainerRuntime Version reported by the node through runtime remote API (e.g. '
        'containerd://1.4.2).'
    ),
    'Event.lastTimestamp': (
        'The time at which the most recent occurrence of this event was recorded.'
    ),
    'Event.type': (
        'Type of this event (Normal, Warning), new types could be added in the future'
    ),
    'Event.reason': (
        'This should be a short, machine understandable string that gives the reason for '
        "the transition into the object's current status."
    ),
    'Event.involvedObject': (
        'The object that this event is about.'
    ),
    'ObjectReference.fieldPath': (
        'If referring to a piece of an object instead of an entire object, this string '
        'should contain a valid JSON/Go field access statement, such as '
        'desiredState.manifest.containers[2]. For example, if the object reference is to a '
        'container within a pod, this would take on a value like: "spec.containers{name}" '
        '(where "name" refers to the name of the container that triggered the event) or if '
        'no container name is specified "spec.containers[2]" (container with index 2 in '
        'this pod). This syntax is chosen only to have some well-defined way of referencing '
        'a part of an object.'
    ),
    'Event.source': (
        'The component reporting this event. Should be a short machine understandable '
        'string.'
    ),
    'Event.message': (
        'A human-readable description of the status of this operation.'
    ),
    'Event.firstTimestamp': (
        'The time at which the event was first recorded. (Time of server receipt is in '
        'TypeMeta.)'
    ),
    'Event.count': (
        'The number of times this event has occurred.'
    ),
    'Secret.type': (
        'Used to facilitate programmatic handling of secret data. More info: '
        'https://kubernetes.io/docs/concepts/configuration/secret/#secret-types'
    ),
    'Secret.data': (
        'Data contains the secret data. Each key must consist of alphanumeric characters, '
        "'-', '_' or '.'. The serialized form of the secret data is a base64 encoded "
        'string, representing the arbitrary (possibly non-string) data value here. '
        'Described in https://tools.ietf.org/html/rfc4648#section-4'
    ),
    'ServiceAccount.secrets': (
        'Secrets is a list of the secrets in the same namespace that pods running using '
        'this ServiceAccount are allowed to use. Pods are only limited to this list if this '
        'service account has a "kubernetes.io/enforce-mountable-secrets" annotation set to '
        '"true". The "kubernetes.io/enforce-mountable-secrets" annotation is deprecated '
        'since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This '
        'field should not be used to find auto-generated service account token secrets for '
        'use outside of pods. Instead, tokens can be requested directly using the '
        'TokenRequest API, or service account token secrets can be manually created. More '
        'info: https://kubernetes.io/docs/concepts/configuration/secret'
    ),
    'DeploymentStatus.updatedReplicas': (
        'Total number of non-terminating pods targeted by this deployment that have the '
        'desired template spec.'
    ),
    'DeploymentStatus.availableReplicas': (
        'Total number of available non-terminating pods (ready for at least '
        'minReadySeconds) targeted by this deployment.'
    ),
    'DeploymentSpec.selector': (
        'Label selector for pods. Existing ReplicaSets whose pods are selected by this will '
        "be the ones affected by this deployment. It must match the pod template's labels."
    ),
    'ConfigMap.data': (
        'Data contains the configuration data. Each key must consist of alphanumeric '
        "characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the "
        'BinaryData field. The keys stored in Data must not overlap with the keys in the '
        'BinaryData field, this is enforced during validation process.'
    ),
    'LeaseSpec.holderIdentity': (
        'holderIdentity contains the identity of the holder of a current lease. If '
        'Coordinated Leader Election is used, the holder identity must be equal to the '
        'elected LeaseCandidate.metadata.name field.'
    ),
    'EndpointSlice.addressType': (
        'addressType specifies the type of address carried by this EndpointSlice. All '
        'addresses in this slice must be the same type. This field is immutable after '
        'creation. The following address types are currently supported: * IPv4: Represents '
        'an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully '
        'Qualified Domain Name. (Deprecated) The EndpointSlice controller only generates, '
        'and kube-proxy only processes, slices of addressType "IPv4" and "IPv6". No '
        'semantics are defined for the "FQDN" type.'
    ),
    'EndpointSlice.ports': (
        'ports specifies the list of network ports exposed by each endpoint in this slice. '
        'Each port must have a unique name. Each slice may include a maximum of 100 ports. '
        'Services always have at least 1 port, so EndpointSlices generated by the '
        'EndpointSlice controller will likewise always have at least 1 port. EndpointSlices '
        'used for other purposes may have an empty ports list.'
    ),
    'EndpointSlice.endpoints': (
        'endpoints is a list of unique endpoints in this slice. Each slice may include a '
        'maximum of 1000 endpoints.'
    ),
    'PersistentVolumeSpec.capacity': (
        "capacity is the description of the persistent volume's resources and capacity. "
        'More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity'
    ),
    'PersistentVolumeSpec.accessModes': (
        'accessModes contains all ways the volume can be mounted. More info: '
        'https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes'
    ),
    'PersistentVolumeSpec.persistentVolumeReclaimPolicy': (
        'persistentVolumeReclaimPolicy defines what happens to a persistent volume when '
        'released from its claim. Valid options are Retain (default for manually created '
        'PersistentVolumes), Delete (default for dynamically provisioned '
        'PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the '
        'volume plugin underlying this PersistentVolume. More info: '
        'https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming'
    ),
    'PersistentVolumeStatus.phase': (
        'phase indicates if a volume is available, bound to a claim, or released by a '
        'claim. More info: '
        'https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase'
    ),
    'PersistentVolumeStatus.reason': (
        'reason is a brief CamelCase string that describes any failure and is meant for '
        'machine parsing and tidy display in the CLI.'
    ),
    'PersistentVolumeSpec.volumeMode': (
        'volumeMode defines if a volume is intended to be used with a formatted filesystem '
        'or to remain in raw block state. Value of Filesystem is implied when not included '
        'in spec.'
    ),
    'PersistentVolumeClaimStatus.phase': (
        'phase represents the current phase of PersistentVolumeClaim.'
    ),
    'PersistentVolumeClaimSpec.volumeName': (
        'volumeName is the binding reference to the PersistentVolume backing this claim.'
    ),
    'PersistentVolumeClaimStatus.capacity': (
        'capacity represents the actual resources of the underlying volume.'
    ),
    'PersistentVolumeClaimStatus.accessModes': (
        'accessModes contains the actual access modes the volume backing the PVC has. More '
        'info: '
        'https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1'
    ),
    'PersistentVolumeClaimSpec.volumeMode': (
        'volumeMode defines what type of volume is required by the claim. Value of '
        'Filesystem is implied when not included in claim spec.'
    ),
    'PersistentVolumeSpec.claimRef': (
        'claimRef is part of a bi-directional binding between PersistentVolume and '
        'PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the '
        'authoritative bind between PV and PVC. More info: '
        'https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding'
    ),
    'RoleBinding.roleRef': (
        'RoleRef can reference a Role in the current namespace or a ClusterRole in the '
        'global namespace. If the RoleRef cannot be resolved, the Authorizer must return an '
        'error.'
    ),
    'ClusterRoleBinding.roleRef': (
        'RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef '
        'cannot be resolved, the Authorizer must return an error.'
    ),
}


def _doc(key: str) -> str:
    return FIELD_DOCS[key]


NAME = Column("Name", "string", NAME_DOC, format="name")
AGE = Column("Age", "string", CREATED_DOC)
CONTAINERS = Column("Containers", "string", "Names of each container in the template.", 1)
IMAGES = Column("Images", "string", "Images referenced by each container in the template.", 1)

POD_PRINTER = Printer((
    NAME,
    Column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    Column("Status", "string", "The aggregate status of the containers in this pod."),
    Column("Restarts", "string", "The number of times the containers in this pod have been "
           "restarted and when the last container in this pod has restarted."),
    AGE,
    Column("IP", "string", _doc("PodStatus.podIP"), 1),
    Column("Node", "string", _doc("PodSpec.nodeName"), 1),
    Column("Nominated Node", "string", _doc("PodStatus.nominatedNodeName"), 1),
    Column("Readiness Gates", "string", _doc("PodSpec.readinessGates"), 1),
), pod_row, [])

NODE_PRINTER = Printer((
    NAME,
    Column("Status", "string", "The status of the node"),
    Column("Roles", "string", "The roles of the node"),
    AGE,
    Column("Version", "string", _doc("NodeSystemInfo.kubeletVersion")),
    Column("Internal-IP", "string", _doc("NodeStatus.addresses"), 1),
    Column("External-IP", "string", _doc("NodeStatus.addresses"), 1),
    Column("OS-Image", "string", _doc("NodeSystemInfo.osImage"), 1),
    Column("Kernel-Version", "string", _doc("NodeSystemInfo.kernelVersion"), 1),
    Column("Container-Runtime", "string", _doc("NodeSystemInfo.containerRuntimeVersion"), 1),
), node_row, [])

SERVICE_PRINTER = Printer((
    NAME,
    Column("Type", "string", _doc("ServiceSpec.type")),
    Column("Cluster-IP", "string", _doc("ServiceSpec.clusterIP")),
    Column("External-IP", "string", _doc("ServiceSpec.externalIPs")),
    Column("Port(s)", "string", _doc("ServiceSpec.ports")),
    AGE,
    Column("Selector", "string", _doc("ServiceSpec.selector"), 1),
), service_row, [])

EVENT_PRINTER = Printer((
    Column("Last Seen", "string", _doc("Event.lastTimestamp")),
    Column("Type", "string", _doc("Event.type")),
    Column("Reason", "string", _doc("Event.reason")),
    Column("Object", "string", _doc("Event.involvedObject")),
    Column("Subobject", "string", _doc("ObjectReference.fieldPath"), 1),
    Column("Source", "string", _doc("Event.source"), 1),
    Column("Message", "string", _doc("Event.message")),
    Column("First Seen", "string", _doc("Event.firstTimestamp"), 1),
    Column("Count", "string", _doc("Event.count"), 1),
    Column("Name", "string", NAME_DOC, 1, "name"),
), event_row, [])


def _binding_printer(kind: str) -> Printer:
    return Printer((
        NAME, Column("Role", "string", _doc(f"{kind}.roleRef")), AGE,
        Column("Users", "string", f"Users in the {kind[0].lower()}{kind[1:]}", 1),
        Column("Groups", "string", f"Groups in the {kind[0].lower()}{kind[1:]}", 1),
        Column("ServiceAccounts", "string",
               f"ServiceAccounts in the {kind[0].lower()}{kind[1:]}", 1),
    ), binding_row, [])


PERSISTENT_VOLUME_PRINTER = Printer((
    NAME, Column("Capacity", "string", _doc("PersistentVolumeSpec.capacity")),
    Column("Access Modes", "string", _doc("PersistentVolumeSpec.accessModes")),
    Column("Reclaim Policy", "string", _doc("PersistentVolumeSpec.persistentVolumeReclaimPolicy")),
    Column("Status", "string", _doc("PersistentVolumeStatus.phase")),
    Column("Claim", "string", _doc("PersistentVolumeSpec.claimRef")),
    Column("StorageClass", "string", "StorageClass of the pv"),
    Column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pv"),
    Column("Reason", "string", _doc("PersistentVolumeStatus.reason")), AGE,
    Column("VolumeMode", "string", _doc("PersistentVolumeSpec.volumeMode"), 1),
), persistent_volume_row, [])

PERSISTENT_VOLUME_CLAIM_PRINTER = Printer((
    NAME, Column("Status", "string", _doc("PersistentVolumeClaimStatus.phase")),
    Column("Volume", "string", _doc("PersistentVolumeClaimSpec.volumeName")),
    Column("Capacity", "string", _doc("PersistentVolumeClaimStatus.capacity")),
    Column("Access Modes", "string", _doc("PersistentVolumeClaimStatus.accessModes")),
    Column("StorageClass", "string", "StorageClass of the pvc"),
    Column("VolumeAttributesClass", "string", "VolumeAttributesClass of the pvc"), AGE,
    Column("VolumeMode", "string", _doc("PersistentVolumeClaimSpec.volumeMode"), 1),
), persistent_volume_claim_row, [])

WEBHOOKS_PRINTER = Printer((
    NAME, Column("Webhooks", "integer", "Webhooks indicates the number of webhooks registered in "
                 "this configuration"), AGE,
), _simple(lambda o: len(o.get("webhooks") or [])), [])

BUILTIN_PRINTERS: dict[tuple[str, str], Printer] = {
    ("", "pods"): POD_PRINTER,
    ("", "nodes"): NODE_PRINTER,
    ("", "namespaces"): Printer((
        NAME, Column("Status", "string", "The status of the namespace"), AGE,
    ), _simple(lambda o: (o.get("status") or {}).get("phase", "")), []),
    ("", "services"): SERVICE_PRINTER,
    ("", "endpoints"): Printer((
        NAME, Column("Endpoints", "string", _doc("Endpoints.subsets")), AGE,
    ), endpoints_row, []),
    ("", "configmaps"): Printer((
        NAME, Column("Data", "string", _doc("ConfigMap.data")), AGE,
    ), _simple(lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})), []),
    ("", "secrets"): Printer((
        NAME, Column("Type", "string", _doc("Secret.type")),
        Column("Data", "string", _doc("Secret.data")), AGE,
    ), _simple(lambda o: o.get("type", ""), lambda o: len(o.get("data") or {})), []),
    ("", "serviceaccounts"): Printer((
        NAME, Column("Secrets", "string", _doc("ServiceAccount.secrets")), AGE,
    ), _simple(lambda o: len(o.get("secrets") or [])), []),
    ("", "events"): EVENT_PRINTER,
    ("events.k8s.io", "events"): EVENT_PRINTER,
    ("coordination.k8s.io", "leases"): Printer((
        NAME, Column("Holder", "string", _doc("LeaseSpec.holderIdentity")), AGE,
    ), _simple(lambda o: (o.get("spec") or {}).get("holderIdentity") or ""), []),
    ("discovery.k8s.io", "endpointslices"): Printer((
        NAME, Column("AddressType", "string", _doc("EndpointSlice.addressType")),
        Column("Ports", "string", _doc("EndpointSlice.ports")),
        Column("Endpoints", "string", _doc("EndpointSlice.endpoints")), AGE,
    ), endpoint_slice_row, []),
    ("networking.k8s.io", "ingresses"): Printer((
        NAME,
        Column("Class", "string", "The name of the IngressClass resource that should be used "
               "for additional configuration"),
        Column("Hosts", "string", "Hosts that incoming requests are matched against before the "
               "ingress rule"),
        Column("Address", "string", "Address is a list containing ingress points for the "
               "load-balancer"),
        Column("Ports", "string", "Ports of TLS configurations that open"), AGE,
    ), ingress_row, []),
    ("apps", "deployments"): Printer((
        NAME, Column("Ready", "string", "Number of the pod with ready state"),
        Column("Up-to-date", "string", _doc("DeploymentStatus.updatedReplicas")),
        Column("Available", "string", _doc("DeploymentStatus.availableReplicas")), AGE,
        CONTAINERS, IMAGES, Column("Selector", "string", _doc("DeploymentSpec.selector"), 1),
    ), deployment_row, []),
    ("apps", "replicasets"): Printer((
        NAME, Column("Desired", "integer", _doc("ReplicaSetSpec.replicas")),
        Column("Current", "integer", _doc("ReplicaSetStatus.replicas")),
        Column("Ready", "integer", _doc("ReplicaSetStatus.readyReplicas")), AGE,
        CONTAINERS, IMAGES, Column("Selector", "string", _doc("ReplicaSetSpec.selector"), 1),
    ), replica_set_row, []),
    ("", "persistentvolumes"): PERSISTENT_VOLUME_PRINTER,
    ("", "persistentvolumeclaims"): PERSISTENT_VOLUME_CLAIM_PRINTER,
    ("rbac.authorization.k8s.io", "rolebindings"): _binding_printer("RoleBinding"),
    ("rbac.authorization.k8s.io", "clusterrolebindings"): _binding_printer("ClusterRoleBinding"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"): WEBHOOKS_PRINTER,
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"): WEBHOOKS_PRINTER,
}

# rest.defaultTableConvertor: every kind without a printer of its own (CRDs, RBAC roles, ...)
DEFAULT_PRINTER = Printer((
    NAME, Column("Created At", "date", CREATED_DOC),
), lambda obj, now: Row([_name(obj), obj["metadata"].get("creationTimestamp")
                         or "0001-01-01T00:00:00Z"]), None)


# ------------------------------------------------------------------------ custom resources
AGE_COLUMN = {"name": "Age", "type": "date", "description": CREATED_DOC,
              "jsonPath": ".metadata.creationTimestamp"}


def crd_columns(crd: Obj | None, version: str) -> list[Obj]:
    """The version's additionalPrinterColumns, an Age column when it has none
    (serveDefaultColumnsIfEmpty)."""
    for served in ((crd or {}).get("spec") or {}).get("versions") or []:
        if served.get("name") == version:
            return list(served.get("additionalPrinterColumns") or []) or [AGE_COLUMN]
    return [AGE_COLUMN]


@functools.lru_cache(maxsize=256)
def _compiled(path: str) -> Any:
    """kube's JSONPath (`.status.x`, `.a[0]`, `.a[?(@.type=="Ready")].b`) as jsonpath-ng."""
    return parse_jsonpath("$" + path)


def custom_resource_printer(columns: Sequence[Obj]) -> Printer:
    """tableconvertor.New: NAME, then one column per printer column; a path that does not
    parse ends the columns there, as the real convertor falls back to those it built."""
    usable: list[tuple[Column, Any]] = []
    for column in columns:
        path = str(column.get("jsonPath", ""))
        try:
            expression = _compiled(path)
        except Exception:  # jsonpath-ng raises plain Exceptions for syntax errors
            break
        description = column.get("description") or (
            f"Custom resource definition column (in JSONPath format): {path}")
        usable.append((Column(str(column.get("name", "")), str(column.get("type", "")),
                              description, int(column.get("priority", 0)),
                              str(column.get("format", ""))), expression))

    def row(obj: Obj, now: datetime) -> Row:
        cells: list[Any] = [_name(obj)]
        for column, expression in usable:
            matches = expression.find(obj)
            value = matches[0].value if matches else None
            cells.append(_custom_cell(column.type, value, now) if matches else None)
        return Row(cells)

    return Printer((NAME, *(c for c, _ in usable)), row, [])


def _custom_cell(type_: str, value: Any, now: datetime) -> Any:
    """cellForJSONValue, and the JSONPath printer's text for string columns."""
    if value is None:
        return None
    if type_ == "string":
        if isinstance(value, (dict, list)):
            return json.dumps(value, separators=(",", ":"), sort_keys=True)
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)
    if type_ == "integer" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if type_ == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if type_ == "boolean" and isinstance(value, bool):
        return value
    if type_ == "date" and isinstance(value, str):
        if not value:
            return "<unknown>"
        moment = parse_time(value)
        return "<invalid>" if moment is None else human_duration((now - moment).total_seconds())
    return None
