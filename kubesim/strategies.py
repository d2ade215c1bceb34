"""Per-kind registry strategies: what create/update/status writes may change, defaults, validation.

Each class mirrors the kind's `strategy.go` in kubernetes/pkg/registry (PrepareForCreate,
PrepareForUpdate, the status strategy, Validate/ValidateUpdate) as far as controllers can notice.
"""

from __future__ import annotations

import base64
import copy
import ipaddress
import random
from collections.abc import Callable
from typing import Any

from kubesim import cel, names
from kubesim.errors import FieldCause, StatusError, forbidden, invalid
from kubesim.kinds import ResourceKind
from kubesim.quantity import parse_quantity

Obj = dict[str, Any]


def spec_view(obj: Obj) -> Any:
    """What a generation bump watches: spec, or for kinds without spec all but metadata/status."""
    if "spec" in obj:
        return obj["spec"]
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


# Built-in kinds whose PrepareForCreate sets metadata.generation = 1 (and whose PrepareForUpdate
# bumps it): the others (ConfigMap, Namespace, Service, Node, ...) carry no generation at all.
GENERATION_KINDS = frozenset({
    ("", "pods"), ("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets"),
    ("apps", "daemonsets"),
    ("networking.k8s.io", "ingresses"), ("discovery.k8s.io", "endpointslices"),
    ("policy", "poddisruptionbudgets"),
    ("apiextensions.k8s.io", "customresourcedefinitions"),
    ("admissionregistration.k8s.io", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"),
})


class Strategy:
    """The generic strategy: status lives in a status subresource when the kind declares one."""

    name_errors: Callable[[str], list[str]] = staticmethod(names.dns1123_subdomain_errors)
    return_deleted_object = False
    # the generic store's graceful deletion records deletionGracePeriodSeconds; namespace
    # storage's own Delete only sets deletionTimestamp and the Terminating phase
    records_deletion_grace = True

    def __init__(self, kind: ResourceKind) -> None:
        self.kind = kind
        self.tracks_generation = kind.custom or kind.storage_key in GENERATION_KINDS

    def default(self, obj: Obj) -> None:
        """Decode-time defaulting (SetDefaults_*): before admission sees the object."""

    def prepare_for_create(self, obj: Obj) -> None:
        if self.kind.has_status_subresource:
            obj["status"] = {}  # typed status structs reset to empty, still encoded

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        if self.kind.has_status_subresource:
            _keep(new, old, "status")

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        """Built-in status strategies: spec stays, metadata (labels, annotations) may change."""
        _keep(new, old, "spec")

    def validate(self, obj: Obj) -> list[FieldCause]:
        return []

    def generation_view(self, obj: Obj) -> Any:
        """The part of the object whose change bumps metadata.generation."""
        return spec_view(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        return self.validate(new)

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        return self.validate_update(new, old)

    def grace_period(self, obj: Obj, requested: int | None) -> int:
        """Seconds of graceful deletion (only pods have any)."""
        return 0

    def on_deletion_started(self, obj: Obj) -> None:
        """Changes made when deletion starts but the object must stay (finalizers, grace)."""

    def blocks_deletion(self, obj: Obj) -> bool:
        """True when the object cannot go yet for a reason other than metadata.finalizers."""
        return False


def _keep(new: Obj, old: Obj, key: str) -> None:
    if key in old:
        new[key] = old[key]
    else:
        new.pop(key, None)


class NamespaceStrategy(Strategy):
    name_errors = staticmethod(names.dns1123_label_errors)
    return_deleted_object = True
    records_deletion_grace = False

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        finalizers = spec.setdefault("finalizers", [])
        if "kubernetes" not in finalizers:
            finalizers.append("kubernetes")
        obj["status"] = {"phase": "Active"}
        labels = obj["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = obj["metadata"].get("name", "")

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "status")
        _keep(new, old, "spec")  # spec.finalizers only change through /finalize
        labels = new["metadata"].setdefault("labels", {})
        labels["kubernetes.io/metadata.name"] = new["metadata"]["name"]

    def prepare_for_finalize(self, new: Obj, old: Obj) -> None:
        finalizers = (new.get("spec") or {}).get("finalizers") or []
        result = {k: v for k, v in old.items() if k != "spec"}
        result["spec"] = {**(old.get("spec") or {}), "finalizers": list(finalizers)}
        new.clear()
        new.update(result)

    def on_deletion_started(self, obj: Obj) -> None:
        obj["status"] = {**(obj.get("status") or {}), "phase": "Terminating"}

    def blocks_deletion(self, obj: Obj) -> bool:
        return bool((obj.get("spec") or {}).get("finalizers"))


IMMUTABLE_POD_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)


class PodStrategy(Strategy):
    return_deleted_object = True

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        _default_pod_spec(spec)
        _default_requests_from_limits(spec)

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Pending", "qosClass": _qos_class(obj.get("spec") or {})}

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "status")

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "spec")
        # old kubelets corrupted ownerReferences through pods/status; the real server ignores them
        owners = old["metadata"].get("ownerReferences")
        if owners is None:
            new["metadata"].pop("ownerReferences", None)
        else:
            new["metadata"]["ownerReferences"] = owners

    def validate(self, obj: Obj) -> list[FieldCause]:
        errors = self._spec_errors(obj)
        if (obj.get("spec") or {}).get("ephemeralContainers"):  # ValidatePodCreate
            errors.append(FieldCause("spec.ephemeralContainers", "Forbidden",
                                     "cannot be set on create"))
        return errors

    @staticmethod
    def _spec_errors(obj: Obj) -> list[FieldCause]:
        spec = obj.get("spec") or {}
        if not spec.get("containers"):
            return [FieldCause("spec.containers", "Required value", "")]
        errors = [cause for key in ("containers", "initContainers")
                  for index, container in enumerate(spec.get(key) or [])
                  if isinstance(container, dict)
                  for cause in _extended_resource_causes(f"spec.{key}[{index}].resources",
                                                         container.get("resources") or {})]
        return errors + _ephemeral_container_causes(spec)

    def prepare_for_ephemeral_containers_update(self, new: Obj, old: Obj) -> None:
        """dropNonEphemeralContainerUpdates: the old pod with the new ephemeral containers
        (metadata as for a status write: labels, annotations, owners stay the old ones)."""
        ephemeral = (new.get("spec") or {}).get("ephemeralContainers")
        metadata = new["metadata"]
        new.clear()
        new.update(copy.deepcopy(old))
        new["metadata"] = {**old["metadata"], "resourceVersion": metadata.get(
            "resourceVersion", old["metadata"].get("resourceVersion"))}
        if ephemeral is None:
            new["spec"].pop("ephemeralContainers", None)
        else:
            new["spec"]["ephemeralContainers"] = ephemeral

    def validate_ephemeral_containers_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        """ValidatePodEphemeralContainersUpdate: the spec's checks, and no ephemeral container
        removed or changed once added."""
        errors = self._spec_errors(new)
        added = {c.get("name"): c for c in (new.get("spec") or {}).get("ephemeralContainers")
                 or [] if isinstance(c, dict)}
        for existing in (old.get("spec") or {}).get("ephemeralContainers") or []:
            name = existing.get("name")
            if name not in added:
                errors.append(FieldCause("spec.ephemeralContainers", "Forbidden",
                                         f'existing ephemeral containers "{name}" may not be '
                                         f"removed\n"))
            elif added[name] != existing:
                errors.append(FieldCause("spec.ephemeralContainers", "Forbidden",
                                         f'existing ephemeral containers "{name}" may not be '
                                         f"changed\n"))
        return errors

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        errors = self._spec_errors(new)
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        deadline_old = old_spec.get("activeDeadlineSeconds")
        deadline_new = new_spec.get("activeDeadlineSeconds")
        if deadline_old is not None and (deadline_new is None or deadline_new > deadline_old):
            errors.append(FieldCause(
                "spec.activeDeadlineSeconds", "Invalid value",
                "must be less than or equal to previous value", deadline_new))
        if _munged_pod_spec(new_spec, old_spec) != old_spec:
            errors.append(FieldCause("spec", "Forbidden", IMMUTABLE_POD_MESSAGE))
        return errors

    def grace_period(self, obj: Obj, requested: int | None) -> int:
        spec = obj.get("spec") or {}
        # CheckGracefulDelete: unscheduled or finished pods go at once
        if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in (
            "Failed", "Succeeded"
        ):
            return 0
        if requested is not None:
            return max(requested, 0)
        grace = spec.get("terminationGracePeriodSeconds", 30)
        return int(grace) if grace is not None else 30


# validateEphemeralContainers: what an ephemeral container may not have (fundamental pod
# services must not rely on it), by its JSON name.
EPHEMERAL_FORBIDDEN_FIELDS = ("lifecycle", "livenessProbe", "ports", "readinessProbe",
                              "resizePolicy", "resources", "restartPolicy", "startupProbe")


def _ephemeral_container_causes(spec: Obj) -> list[FieldCause]:
    """validateEphemeralContainers: unique names among all the pod's containers, the fields
    an ephemeral container may not set, a target container the pod has."""
    causes: list[FieldCause] = []
    names = {c.get("name") for key in ("containers", "initContainers")
             for c in spec.get(key) or [] if isinstance(c, dict)}
    targets = {c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)}
    for index, container in enumerate(spec.get("ephemeralContainers") or []):
        if not isinstance(container, dict):
            continue
        path = f"spec.ephemeralContainers[{index}]"
        name = container.get("name")
        if not name:
            causes.append(FieldCause(f"{path}.name", "Required value", ""))
        elif name in names:
            causes.append(FieldCause(f"{path}.name", "Duplicate value", "", name))
        names.add(name)
        for field in EPHEMERAL_FORBIDDEN_FIELDS:
            if container.get(field) not in (None, {}, []):
                causes.append(FieldCause(f"{path}.{field}", "Forbidden",
                                         "cannot be set for an Ephemeral Container"))
        target = container.get("targetContainerName")
        if target and target not in targets:
            causes.append(FieldCause(f"{path}.targetContainerName", "Not found", "", target))
    return causes


def _munged_pod_spec(new: Obj, old: Obj) -> Obj:
    """The new spec with the fields a pod update may change copied from the old one."""
    munged = dict(new)
    for key in ("containers", "initContainers"):
        new_list, old_list = new.get(key), old.get(key)
        if isinstance(new_list, list) and isinstance(old_list, list) and len(new_list) == len(
            old_list
        ):
            munged[key] = [
                {**n, "image": o.get("image")} if isinstance(n, dict) and isinstance(o, dict)
                else n
                for n, o in zip(new_list, old_list, strict=True)
            ]
    if "activeDeadlineSeconds" in old:
        munged["activeDeadlineSeconds"] = old["activeDeadlineSeconds"]
    else:
        munged.pop("activeDeadlineSeconds", None)
    old_tolerations = old.get("tolerations") or []
    new_tolerations = new.get("tolerations") or []
    if all(t in new_tolerations for t in old_tolerations):
        if "tolerations" in old:
            munged["tolerations"] = old["tolerations"]
        else:
            munged.pop("tolerations", None)
    return munged


def _qos_class(spec: Obj) -> str:
    requests_limits = [
        (c.get("resources") or {}) for c in spec.get("containers") or [] if isinstance(c, dict)
    ]
    if not any(r.get("requests") or r.get("limits") for r in requests_limits):
        return "BestEffort"
    guaranteed = all(
        (r.get("limits") or {}).get(res) is not None
        and (r.get("requests") or {}).get(res, (r.get("limits") or {}).get(res))
        == (r.get("limits") or {}).get(res)
        for r in requests_limits
        for res in ("cpu", "memory")
    )
    return "Guaranteed" if guaranteed else "Burstable"


def _is_extended_resource(name: str) -> bool:
    """IsExtendedResourceName: a `<domain>/<name>` outside kubernetes.io, not a quota's
    `requests.` name."""
    domain, slash, _ = name.partition("/")
    return (bool(slash) and not name.startswith("requests.") and domain != "kubernetes.io"
            and not domain.endswith(".kubernetes.io"))


def _extended_resource_causes(path: str, resources: Obj) -> list[FieldCause]:
    """ValidateResourceRequirements on what cannot be overcommitted (extended resources and
    huge pages): whole extended resources, a limit for every request, requests equal to it."""
    requests = resources.get("requests") or {}
    limits = resources.get("limits") or {}
    if not isinstance(requests, dict) or not isinstance(limits, dict):
        return []
    causes: list[FieldCause] = []
    for field_name, quantities in (("limits", limits), ("requests", requests)):
        for name, value in quantities.items():
            if not _is_extended_resource(name):
                continue
            try:
                whole = parse_quantity(value) == int(parse_quantity(value))
            except ValueError:
                continue  # the quantity's own error is reported by its parser
            if not whole:
                causes.append(FieldCause(f"{path}.{field_name}[{name}]", "Invalid value",
                                         "must be an integer", value))
    for name, value in requests.items():
        if not (_is_extended_resource(name) or name.startswith("hugepages-")):
            continue
        if name not in limits:
            causes.append(FieldCause(f"{path}.limits", "Required value",
                                     "Limit must be set for non overcommitable resources"))
            continue
        try:
            equal = parse_quantity(value) == parse_quantity(limits[name])
        except ValueError:
            continue
        if not equal:
            causes.append(FieldCause(f"{path}.requests", "Invalid value",
                                     f"must be equal to {name} limit of {limits[name]}", value))
    return causes


def _default_requests_from_limits(spec: Obj) -> None:
    """SetDefaults_Pod (pods only, not templates): a resource a container limits but does not
    request is requested at its limit, so the scheduler counts `limits: {nvidia.com/gpu: 1}`."""
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict) or not isinstance(resources.get("limits"), dict):
                continue
            requests = resources.setdefault("requests", {})
            if isinstance(requests, dict):
                for name, value in resources["limits"].items():
                    requests.setdefault(name, value)


def _default_pod_spec(spec: Obj) -> None:
    """The defaults SetDefaults_PodSpec/SetDefaults_Container apply (the ones clients read back)."""
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("enableServiceLinks", True)
    spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
    spec.setdefault("priority", 0)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            container.setdefault("resources", {})
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            image = str(container.get("image", ""))
            tagged = ":" in image.rsplit("/", 1)[-1] or "@" in image
            latest = not tagged or image.endswith(":latest")
            container.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")
            for port in container.get("ports") or []:
                if isinstance(port, dict):
                    port.setdefault("protocol", "TCP")


NODE_PORTS = range(30000, 32768)  # --service-node-port-range default
# ServiceNodePortStaticSubrange: automatic allocation prefers the ports above the lower band
# (min(max(16, size/32), 128) ports), which is left to ports users choose
NODE_PORT_STATIC_BAND = min(max(16, len(NODE_PORTS) // 32), 128)


def needs_node_ports(spec: Obj) -> bool:
    """NodePort Services, and LoadBalancers unless allocateLoadBalancerNodePorts is false."""
    kind = spec.get("type")
    return kind == "NodePort" or (kind == "LoadBalancer"
                                  and spec.get("allocateLoadBalancerNodePorts") is not False)


def externally_accessible(spec: Obj) -> bool:
    """service.ExternallyAccessible (pkg/api/v1/service/util.go): reached from outside the
    cluster, so an externalTrafficPolicy applies."""
    kind = spec.get("type")
    return kind in ("LoadBalancer", "NodePort") or (kind == "ClusterIP"
                                                    and bool(spec.get("externalIPs")))


def service_node_ports(spec: Obj) -> set[int]:
    return {p["nodePort"] for p in spec.get("ports") or []
            if isinstance(p, dict) and isinstance(p.get("nodePort"), int) and p["nodePort"]}


class ServiceStrategy(Strategy):
    """Defaults, ClusterIP allocation and node ports as the service registry's allocators give
    them: chosen ports are kept (422 when taken or out of range), missing ones allocated, and a
    port is free again once no stored Service holds it (deleted, or no longer a NodePort)."""

    name_errors = staticmethod(names.dns1035_label_errors)
    return_deleted_object = True

    def __init__(self, kind: ResourceKind, allocate_ip: Callable[[], str],
                 node_ports_in_use: Callable[[str, str], set[int]] = lambda _ns, _name: set()
                 ) -> None:
        super().__init__(kind)
        self.allocate_ip = allocate_ip
        # the node ports stored Services other than (namespace, name) hold
        self.node_ports_in_use = node_ports_in_use

    def _allocate_node_ports(self, obj: Obj, own: set[int]) -> None:
        """Keep the ports asked for (or already held: `own`), allocate the missing ones."""
        spec, meta = obj["spec"], obj["metadata"]
        if not needs_node_ports(spec):
            return
        taken = self.node_ports_in_use(meta.get("namespace", ""), meta.get("name", ""))
        ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
        for i, port in enumerate(ports):
            wanted = port.get("nodePort")
            if not isinstance(wanted, int) or not wanted:
                continue
            why = ("" if wanted in own else
                   f"provided port is not in the valid range. The range of valid ports is "
                   f"{NODE_PORTS.start}-{NODE_PORTS.stop - 1}" if wanted not in NODE_PORTS else
                   "provided port is already allocated" if wanted in taken else "")
            if why:
                raise invalid("Service", meta.get("name", ""), [FieldCause(
                    f"spec.ports[{i}].nodePort", "Invalid value", why, wanted)])
            taken.add(wanted)
        for port in ports:
            if not port.get("nodePort"):
                port["nodePort"] = _free_node_port(taken)
                taken.add(port["nodePort"])

    def default(self, obj: Obj) -> None:
        """SetDefaults_Service (pkg/apis/core/v1/defaults.go)."""
        spec = obj.setdefault("spec", {})
        spec.setdefault("type", "ClusterIP")
        affinity = spec.setdefault("sessionAffinity", "None")
        if affinity == "None":
            spec.pop("sessionAffinityConfig", None)
        elif affinity == "ClientIP" and not (
                (spec.get("sessionAffinityConfig") or {}).get("clientIP") or {}).get(
                "timeoutSeconds"):
            spec["sessionAffinityConfig"] = {"clientIP": {"timeoutSeconds": 10800}}
        if spec["type"] != "ExternalName":
            spec.setdefault("internalTrafficPolicy", "Cluster")
        for port in spec.get("ports") or []:
            if isinstance(port, dict):
                port.setdefault("protocol", "TCP")
                if port.get("targetPort") in (None, 0, ""):
                    port["targetPort"] = port.get("port")
        if externally_accessible(spec) and not spec.get("externalTrafficPolicy"):
            spec["externalTrafficPolicy"] = "Cluster"
        if spec["type"] == "LoadBalancer":
            spec.setdefault("allocateLoadBalancerNodePorts", True)
        if spec["type"] == "LoadBalancer":  # LoadBalancerIPMode, on by default since v1.30
            for ingress in ((obj.get("status") or {}).get("loadBalancer") or {}).get(
                    "ingress") or []:
                if isinstance(ingress, dict) and ingress.get("ip") and not ingress.get("ipMode"):
                    ingress["ipMode"] = "VIP"

    def prepare_for_create(self, obj: Obj) -> None:
        """The REST create allocates the ClusterIP and settles the IP families."""
        obj["status"] = {"loadBalancer": {}}
        spec = obj["spec"]
        if spec["type"] != "ExternalName":
            if not spec.get("clusterIP"):
                spec["clusterIP"] = self.allocate_ip()
            spec.setdefault("clusterIPs", [spec["clusterIP"]])  # ["None"] when headless
            spec.setdefault("ipFamilies", ["IPv4"])
            spec.setdefault("ipFamilyPolicy", "SingleStack")
        self._allocate_node_ports(obj, set())

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        spec, old_spec = new.setdefault("spec", {}), old.get("spec") or {}
        for key in ("clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"):
            if key in old_spec and not spec.get(key):
                spec[key] = old_spec[key]  # clients may omit allocated fields on update
        new_ports = [p for p in spec.get("ports") or [] if isinstance(p, dict)]
        old_ports = [p for p in old_spec.get("ports") or [] if isinstance(p, dict)]
        if needs_node_ports(old_spec) and not needs_node_ports(spec):
            # dropTypeDependentFields: leaving NodePort drops the ports the client left as
            # they were
            if [p.get("nodePort") for p in new_ports] == [p.get("nodePort") for p in old_ports]:
                for port in new_ports:
                    port.pop("nodePort", None)
        elif needs_node_ports(old_spec) and needs_node_ports(spec):
            # patchAllocatedValues: a port sent without its nodePort keeps the one its name had
            used = service_node_ports(old_spec) & service_node_ports(spec)
            by_name = {p.get("name", ""): p.get("nodePort") for p in old_ports}
            for port in new_ports:
                kept = by_name.get(port.get("name", ""))
                if not port.get("nodePort") and kept and kept not in used:
                    port["nodePort"] = kept
        # dropTypeDependentFields: what only the old type used goes when the client left it
        if (old_spec.get("type") == "LoadBalancer" and spec.get("type") != "LoadBalancer"
                and spec.get("allocateLoadBalancerNodePorts") is not None
                and spec.get("allocateLoadBalancerNodePorts")
                == old_spec.get("allocateLoadBalancerNodePorts")):
            spec.pop("allocateLoadBalancerNodePorts")
        if (externally_accessible(old_spec) and not externally_accessible(spec)
                and spec.get("externalTrafficPolicy") == old_spec.get("externalTrafficPolicy")):
            spec.pop("externalTrafficPolicy", None)
        self._allocate_node_ports(new, service_node_ports(old_spec))

    def validate(self, obj: Obj) -> list[FieldCause]:
        spec = obj.get("spec") or {}
        if spec.get("type") != "ClusterIP":
            return []
        return [FieldCause(f"spec.ports[{i}].nodePort", "Forbidden",
                           "may not be used when `type` is 'ClusterIP'")
                for i, port in enumerate(spec.get("ports") or [])
                if isinstance(port, dict) and port.get("nodePort")]

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        old_ip = (old.get("spec") or {}).get("clusterIP")
        new_ip = (new.get("spec") or {}).get("clusterIP")
        if old_ip and new_ip != old_ip:
            return [FieldCause("spec.clusterIPs[0]", "Invalid value",
                               "may not change once set", new_ip)]
        return self.validate(new) + _load_balancer_status_errors(new, old)


def _load_balancer_status_errors(new: Obj, old: Obj) -> list[FieldCause]:
    """ValidateLoadBalancerStatus (AllowServiceLBStatusOnNonLB off): a status write giving a
    Service that is not a LoadBalancer load-balancer ingress is refused."""
    def ingress(obj: Obj) -> Any:
        return ((obj.get("status") or {}).get("loadBalancer") or {}).get("ingress")

    if (new.get("spec") or {}).get("type") == "LoadBalancer" or not ingress(new) or (
            ingress(new) == ingress(old)):
        return []
    return [FieldCause("status.loadBalancer.ingress", "Forbidden",
                       "may only be used when `spec.type` is 'LoadBalancer'")]


def _free_node_port(taken: set[int]) -> int:
    """A random free port, above the static band first (portallocator's AllocateNext)."""
    upper = NODE_PORTS[NODE_PORT_STATIC_BAND:]
    lower = NODE_PORTS[:NODE_PORT_STATIC_BAND]
    for band in (upper, lower):
        free = [port for port in band if port not in taken]
        if free:
            return random.choice(free)
    raise StatusError(500, "InternalError", 'Internal error occurred: failed to allocate a '
                      'nodePort: range is full')


ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")


class EndpointSliceStrategy(Strategy):
    """ValidateEndpointSlice: a supported addressType, which stays, and addresses of that type,
    none of them unspecified, loopback or link-local (ValidateNonSpecialIP) but kubesim's own
    (`own_addresses`): it publishes its loopback address for the `kubernetes` Service, where
    kube-apiserver, advertising a loopback address, publishes none."""

    own_addresses: frozenset[str] = frozenset()

    def validate(self, obj: Obj) -> list[FieldCause]:
        causes: list[FieldCause] = []
        address_type = obj.get("addressType") or ""
        if not address_type:
            causes.append(FieldCause("addressType", "Required value", ""))
        elif address_type not in ADDRESS_TYPES:
            causes.append(FieldCause(
                "addressType", "Unsupported value",
                "supported values: " + ", ".join(names.go_quote(t) for t in ADDRESS_TYPES),
                address_type))
        for i, endpoint in enumerate(obj.get("endpoints") or []):
            path = f"endpoints[{i}].addresses"
            addresses = endpoint.get("addresses") or []
            if not addresses:
                causes.append(FieldCause(path, "Required value", "must contain at least 1 address"))
            for j, address in enumerate(addresses):
                causes.extend(_address_errors(f"{path}[{j}]", address, address_type))
                if address_type in ("IPv4", "IPv6") and address not in self.own_addresses:
                    causes.extend(_special_ip_errors(f"{path}[{j}]", str(address)))
        return causes

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        causes = self.validate(new)
        if new.get("addressType") != old.get("addressType"):
            causes.append(FieldCause("addressType", "Invalid value", "field is immutable",
                                     new.get("addressType")))
        return causes


def _address_errors(path: str, address: Any, address_type: str) -> list[FieldCause]:
    """Known address types only: an unknown type's addresses are not judged."""
    if address_type == "FQDN":
        return _fqdn_errors(path, str(address))
    versions = {"IPv4": ipaddress.IPv4Address, "IPv6": ipaddress.IPv6Address}
    if address_type not in versions:
        return []
    try:
        versions[address_type](str(address))
    except ValueError:
        return [FieldCause(path, "Invalid value",
                           f"must be a valid {address_type} address", address)]
    return []


LINK_LOCAL_MULTICAST = (ipaddress.ip_network("224.0.0.0/24"), ipaddress.ip_network("ff02::/16"))


def _special_ip_errors(path: str, address: str) -> list[FieldCause]:
    """ValidateNonSpecialIP (pkg/apis/core/validation): what no endpoint may be."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return [FieldCause(path, "Invalid value", "must be a valid IP address", address)]
    checks = (
        (ip.is_unspecified, f"may not be unspecified ({address})"),
        (ip.is_loopback, "may not be in the loopback range (127.0.0.0/8, ::1/128)"),
        (ip.is_link_local, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"),
        (any(ip in network for network in LINK_LOCAL_MULTICAST if network.version == ip.version),
         "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
    return [FieldCause(path, "Invalid value", message, address) for found, message in checks
            if found]


def _fqdn_errors(path: str, name: str) -> list[FieldCause]:
    """validation.IsFullyQualifiedDomainName."""
    if not name:
        return [FieldCause(path, "Required value", "")]
    name = name.removesuffix(".")
    if errors := names.dns1123_subdomain_errors(name):
        return [FieldCause(path, "Invalid value", ",".join(errors), name)]
    labels = name.split(".")
    if len(labels) < 2:
        return [FieldCause(path, "Invalid value",
                           "should be a domain with at least two segments separated by dots", name)]
    for label in labels:
        if errors := names.dns1123_label_errors(label):
            return [FieldCause(path, "Invalid value", ",".join(errors), label)]
    return []


class NodeStrategy(Strategy):
    """Kubelets register nodes with their status: create keeps it (nodeStrategy)."""

    def default(self, obj: Obj) -> None:
        # SetDefaults_NodeStatus: a node that states its capacity but no allocatable gets its
        # capacity as allocatable, on every write (create, update, status, patches)
        status = obj.get("status")
        if isinstance(status, dict) and status.get("capacity") is not None and \
                status.get("allocatable") is None:
            status["allocatable"] = dict(status["capacity"])

    def prepare_for_create(self, obj: Obj) -> None:
        obj.setdefault("spec", {})


StorageClassLookup = Callable[[str], "dict[str, Any] | None"]
PVC_PROTECTION_FINALIZER = "kubernetes.io/pvc-protection"
PV_PROTECTION_FINALIZER = "kubernetes.io/pv-protection"
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
# the PersistentVolume source types (exactly one per volume); CSI and local are what the
# simulated provisioners write, the others what static volumes use
PV_SOURCES = (
    "awsElasticBlockStore", "azureDisk", "azureFile", "cephfs", "cinder", "csi", "fc",
    "flexVolume", "flocker", "gcePersistentDisk", "glusterfs", "hostPath", "iscsi", "local",
    "nfs", "photonPersistentDisk", "portworxVolume", "quobyte", "rbd", "scaleIO", "storageos",
    "vsphereVolume",
)
PVC_IMMUTABLE_MESSAGE = ("spec is immutable after creation except resources.requests and "
                         "volumeAttributesClassName for bound claims")
RESIZE_FORBIDDEN_MESSAGE = ("only dynamically provisioned pvc can be resized and the "
                            "storageclass that provisions the pvc must support resize")
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def _access_mode_errors(path: str, modes: Any) -> list[FieldCause]:
    if not modes:
        return [FieldCause(path, "Required value", "at least 1 access mode is required")]
    return [FieldCause(path, "Unsupported value", "supported values: " + ", ".join(
        names.go_quote(m) for m in ACCESS_MODES), mode)
        for mode in modes if mode not in ACCESS_MODES]


def _storage_quantity(value: Any) -> Any:
    try:
        return parse_quantity(value)
    except (ValueError, TypeError):
        return None


class PersistentVolumeStrategy(Strategy):
    """persistentvolumeStrategy: cluster-scoped, Pending at creation (the PV controller makes it
    Available), a status subresource, the pv-protection finalizer (the
    StorageObjectInUseProtection admission plugin's), ValidatePersistentVolume(Update)."""

    return_deleted_object = True

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Pending"}
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if PV_PROTECTION_FINALIZER not in finalizers:
            finalizers.append(PV_PROTECTION_FINALIZER)

    def validate(self, obj: Obj) -> list[FieldCause]:
        spec = obj.get("spec") or {}
        errors = _access_mode_errors("spec.accessModes", spec.get("accessModes"))
        storage = (spec.get("capacity") or {}).get("storage")
        if storage is None:
            errors.append(FieldCause("spec.capacity", "Required value", ""))
        elif _storage_quantity(storage) is None:
            errors.append(FieldCause("spec.capacity.storage", "Invalid value",
                                     "must be a valid quantity", storage))
        sources = [key for key in PV_SOURCES if spec.get(key) is not None]
        if not sources:
            errors.append(FieldCause("spec", "Required value", "must specify a volume type"))
        elif len(sources) > 1:
            errors.append(FieldCause(f"spec.{sources[1]}", "Forbidden",
                                     "may not specify more than 1 volume type"))
        return errors

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        errors = self.validate(new)
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if {k: new_spec.get(k) for k in PV_SOURCES} != {k: old_spec.get(k) for k in PV_SOURCES}:
            errors.append(FieldCause("spec.persistentvolumesource", "Forbidden",
                                     "spec.persistentvolumesource is immutable after creation"))
        if new_spec.get("volumeMode") != old_spec.get("volumeMode"):
            errors.append(FieldCause("spec.volumeMode", "Invalid value", "field is immutable",
                                     new_spec.get("volumeMode")))
        if old_spec.get("nodeAffinity") is not None and (
                new_spec.get("nodeAffinity") != old_spec["nodeAffinity"]):
            errors.append(FieldCause("nodeAffinity", "Invalid value", "field is immutable",
                                     new_spec.get("nodeAffinity")))
        return errors


LEGACY_DATA_SOURCES = (("", "PersistentVolumeClaim"), ("snapshot.storage.k8s.io", "VolumeSnapshot"))
DATA_SOURCE_FIELDS = ("apiGroup", "kind", "name")


def _normalize_data_sources(spec: Obj) -> None:
    """EnforceDataSourceBackwardsCompatibility then NormalizeDataSources
    (pkg/api/persistentvolumeclaim, AnyVolumeDataSource on): without a dataSourceRef, a
    dataSource that is neither a claim nor a VolumeSnapshot is dropped, as before dataSourceRef
    existed; then either field, set alone, is copied to the other (a dataSourceRef naming a
    namespace is not)."""
    source, ref = spec.get("dataSource"), spec.get("dataSourceRef")
    if source and not ref and (source.get("apiGroup") or "",
                               source.get("kind")) not in LEGACY_DATA_SOURCES:
        spec.pop("dataSource")
        source = None
    if source and not ref:
        spec["dataSourceRef"] = {k: source[k] for k in DATA_SOURCE_FIELDS if k in source}
    elif ref and not source and not ref.get("namespace"):
        spec["dataSource"] = {k: ref[k] for k in DATA_SOURCE_FIELDS if k in ref}
    for field in ("dataSource", "dataSourceRef"):
        if spec.get(field):  # apiGroup has no omitempty: written as null when not given
            spec[field].setdefault("apiGroup", None)


class PersistentVolumeClaimStrategy(Strategy):
    """persistentvolumeclaimStrategy with the admission plugins that act on claims: the default
    storage class (DefaultStorageClass) and the pvc-protection finalizer
    (StorageObjectInUseProtection) at creation, and PersistentVolumeClaimResize's refusal of an
    expansion the claim's class does not allow."""

    return_deleted_object = True

    def __init__(self, kind: ResourceKind, storage_class: StorageClassLookup,
                 default_class: Callable[[], str | None]) -> None:
        super().__init__(kind)
        self.storage_class = storage_class
        self.default_class = default_class

    def default(self, obj: Obj) -> None:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")

    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {"phase": "Pending"}
        spec = obj["spec"]
        _normalize_data_sources(spec)
        if spec.get("storageClassName") is None:  # "" asks for no class at all
            default = self.default_class()
            if default is not None:
                spec["storageClassName"] = default
        finalizers = obj["metadata"].setdefault("finalizers", [])
        if PVC_PROTECTION_FINALIZER not in finalizers:
            finalizers.append(PVC_PROTECTION_FINALIZER)

    def validate(self, obj: Obj) -> list[FieldCause]:
        spec = obj.get("spec") or {}
        errors = _access_mode_errors("spec.accessModes", spec.get("accessModes"))
        storage = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
        if storage is None:
            errors.append(FieldCause("spec.resources[storage]", "Required value", ""))
        elif _storage_quantity(storage) is None or _storage_quantity(storage) <= 0:
            errors.append(FieldCause("spec.resources[storage]", "Invalid value",
                                     "must be greater than zero", storage))
        return errors

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        errors = self.validate(new)
        new_spec = dict(new.get("spec") or {})
        old_spec = dict(old.get("spec") or {})
        if not old_spec.get("volumeName"):  # the PV controller sets volumeName once
            old_spec["volumeName"] = new_spec.get("volumeName")
            if old_spec["volumeName"] is None:
                old_spec.pop("volumeName")
        bound = (new.get("status") or {}).get("phase") == "Bound"
        old_size = _requested_storage(old_spec)
        new_size = _requested_storage(new_spec)
        if bound:
            new_spec["resources"] = old_spec.get("resources")
            if new_spec["resources"] is None:
                new_spec.pop("resources")
        if new_spec != old_spec:
            errors.append(FieldCause("spec", "Forbidden", PVC_IMMUTABLE_MESSAGE))
        elif old_size is not None and new_size is not None:
            if new_size < old_size:
                errors.append(FieldCause("spec.resources.requests.storage", "Forbidden",
                                         "field can not be less than previous value"))
            elif new_size > old_size and not errors:
                self._admit_resize(new)
        return errors

    def _admit_resize(self, claim: Obj) -> None:
        """PersistentVolumeClaimResize: only a class with allowVolumeExpansion expands."""
        name = str((claim.get("spec") or {}).get("storageClassName") or "")
        storage_class = self.storage_class(name) if name else None
        if not (storage_class or {}).get("allowVolumeExpansion"):
            raise forbidden(self.kind.group_resource, claim["metadata"].get("name", ""),
                            RESIZE_FORBIDDEN_MESSAGE)


def _requested_storage(spec: Obj) -> Any:
    value = ((spec.get("resources") or {}).get("requests") or {}).get("storage")
    return None if value is None else _storage_quantity(value)


DEFAULT_INGRESS_CLASS_ANNOTATION = "ingressclass.kubernetes.io/is-default-class"
LEGACY_INGRESS_CLASS_ANNOTATION = "kubernetes.io/ingress.class"


class IngressStrategy(Strategy):
    """The DefaultIngressClass admission plugin (plugin/pkg/admission/network/
    defaultingressclass, on by default): an Ingress created naming no class, neither in
    spec.ingressClassName nor in the legacy annotation, gets the default IngressClass."""

    def __init__(self, kind: ResourceKind, default_class: Callable[[], str | None]) -> None:
        super().__init__(kind)
        self.default_class = default_class

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        annotations = obj["metadata"].get("annotations") or {}
        if spec.get("ingressClassName") or LEGACY_INGRESS_CLASS_ANNOTATION in annotations:
            return
        if (name := self.default_class()) is not None:
            spec["ingressClassName"] = name


class StorageClassStrategy(Strategy):
    """storageClassStrategy: defaults (reclaimPolicy Delete, volumeBindingMode Immediate), a
    provisioner required, provisioner and parameters fixed, and the modes immutable."""

    return_deleted_object = True

    def default(self, obj: Obj) -> None:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")

    def validate(self, obj: Obj) -> list[FieldCause]:
        errors: list[FieldCause] = []
        if not obj.get("provisioner"):
            errors.append(FieldCause("provisioner", "Required value", ""))
        if obj.get("reclaimPolicy") not in ("Delete", "Retain"):
            errors.append(FieldCause("reclaimPolicy", "Unsupported value",
                                     'supported values: "Delete", "Retain"',
                                     obj.get("reclaimPolicy")))
        if obj.get("volumeBindingMode") not in ("Immediate", "WaitForFirstConsumer"):
            errors.append(FieldCause("volumeBindingMode", "Unsupported value",
                                     'supported values: "Immediate", "WaitForFirstConsumer"',
                                     obj.get("volumeBindingMode")))
        return errors

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        errors = self.validate(new)
        for key in ("parameters", "provisioner"):
            if new.get(key) != old.get(key):
                errors.append(FieldCause(key, "Forbidden", f"updates to {key} are forbidden."))
        for key in ("reclaimPolicy", "volumeBindingMode"):
            if new.get(key) != old.get(key):
                errors.append(FieldCause(key, "Invalid value", "field is immutable",
                                         new.get(key)))
        return errors


# Length limits of pkg/apis/core/validation/events.go.
EVENT_REPORTING_INSTANCE_LIMIT = 128
EVENT_ACTION_LIMIT = 128
EVENT_REASON_LIMIT = 128
EVENT_NOTE_LIMIT = 1024


# What an update through events.k8s.io/v1 may not change (ValidateEventUpdate), as core v1
# names the fields, and how the validation names them (the internal type's field names)
EVENT_IMMUTABLE_FIELDS = (
    ("involvedObject", "involvedObject"), ("reason", "reason"), ("message", "message"),
    ("source", "source"), ("firstTimestamp", "firstTimestamp"),
    ("lastTimestamp", "lastTimestamp"), ("count", "count"), ("type", "type"),
    ("eventTime", "eventTime"), ("action", "action"), ("related", "related"),
    ("reportingComponent", "reportingController"), ("reportingInstance", "reportingInstance"))


def _event_series_causes(obj: Obj) -> list[FieldCause]:
    series = obj.get("series")
    if not isinstance(series, dict):
        return []
    causes = []
    if (series.get("count") or 0) < 2:
        causes.append(FieldCause("series.count", "Invalid value", "should be at least 2", ""))
    if not series.get("lastObservedTime"):
        causes.append(FieldCause("series.lastObservedTime", "Required value", ""))
    return causes


class EventStrategy(Strategy):
    """legacyValidateEvent, which every Event write passes whichever API group it came through:
    a namespaced involved object must be in the Event's namespace; an Event with eventTime set
    (the new API's) must name its reporting controller, instance, action and reason within their
    length limits. Writes through events.k8s.io/v1 are held to its stricter rules besides
    (`served_create_causes`, `served_update_causes`)."""

    @staticmethod
    def served_create_causes(obj: Obj) -> list[FieldCause]:
        """ValidateEventCreate's rules for a create through events.k8s.io/v1 (on the core
        form): eventTime is set, the type is Normal or Warning, the deprecated fields unset."""
        causes = _event_series_causes(obj)
        if not obj.get("eventTime"):
            causes.append(FieldCause("eventTime", "Required value", ""))
        if obj.get("type") not in ("Normal", "Warning"):
            causes.append(FieldCause("type", "Invalid value",
                                     f"has invalid value: {obj.get('type') or ''}", ""))
        for field in ("firstTimestamp", "lastTimestamp", "count"):
            if obj.get(field):
                causes.append(FieldCause(field, "Invalid value", "needs to be unset", ""))
        source = obj.get("source") or {}
        if isinstance(source, dict) and (source.get("component") or source.get("host")):
            causes.append(FieldCause("source", "Invalid value", "needs to be unset", ""))
        return causes

    @staticmethod
    def served_update_causes(new: Obj, old: Obj) -> list[FieldCause]:
        """ValidateEventUpdate's rules for an update through events.k8s.io/v1: a changed series
        is valid, and what the Event reports stays as it was (only metadata and series move)."""
        causes = _event_series_causes(new) if new.get("series") != old.get("series") else []
        for stored, path in EVENT_IMMUTABLE_FIELDS:
            if (new.get(stored) or None) != (old.get(stored) or None):
                value = new.get(stored)
                causes.append(FieldCause(path, "Invalid value", "field is immutable",
                                         value if isinstance(value, str | int) else ""))
        return causes

    def validate(self, obj: Obj) -> list[FieldCause]:
        namespace = str(obj["metadata"].get("namespace") or "")
        involved_namespace = str((obj.get("involvedObject") or {}).get("namespace") or "")
        mismatch = FieldCause("involvedObject.namespace", "Invalid value",
                              "does not match event.namespace", involved_namespace)
        errors: list[FieldCause] = []
        if not obj.get("eventTime"):
            if not involved_namespace:
                if namespace not in ("", "default"):
                    errors.append(mismatch)
            elif namespace != involved_namespace:
                errors.append(mismatch)
        else:
            if not involved_namespace and namespace not in ("default", "kube-system"):
                errors.append(mismatch)
            controller = str(obj.get("reportingComponent") or "")  # the core API's name
            if not controller:
                errors.append(FieldCause("reportingComponent", "Required value", ""))
            errors += [FieldCause("reportingComponent", "Invalid value", message, controller)
                       for message in names.label_key_errors(controller)]
            for path, value, limit in (
                ("reportingInstance", obj.get("reportingInstance"),
                 EVENT_REPORTING_INSTANCE_LIMIT),
                ("action", obj.get("action"), EVENT_ACTION_LIMIT),
                ("reason", obj.get("reason"), EVENT_REASON_LIMIT),
            ):
                if not value:
                    errors.append(FieldCause(path, "Required value", ""))
                elif len(str(value)) > limit:
                    errors.append(FieldCause(path, "Invalid value",
                                             f"can have at most {limit} characters", ""))
            if len(str(obj.get("message") or "")) > EVENT_NOTE_LIMIT:
                errors.append(FieldCause("message", "Invalid value",
                                         f"can have at most {EVENT_NOTE_LIMIT} characters", ""))
        errors += [FieldCause("namespace", "Invalid value", message, namespace)
                   for message in names.dns1123_subdomain_errors(namespace)]
        return errors


IMMUTABLE_SET = "field is immutable when `immutable` is set"
INT32_MAX = 2**31 - 1


class ConfigMapStrategy(Strategy):
    """ConfigMaps and Secrets marked `immutable` keep their data (ValidateConfigMapUpdate)."""

    data_fields: tuple[str, ...] = ("data", "binaryData")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        if not old.get("immutable"):
            return []
        errors = []
        if not new.get("immutable"):
            errors.append(FieldCause("immutable", "Forbidden", IMMUTABLE_SET))
        for key in self.data_fields:
            if new.get(key) != old.get(key):
                errors.append(FieldCause(key, "Forbidden", IMMUTABLE_SET))
        return errors


class SecretStrategy(ConfigMapStrategy):
    """Secrets: type defaults to Opaque and may not change; stringData is folded into data."""

    data_fields = ("data",)

    def default(self, obj: Obj) -> None:
        obj.setdefault("type", "Opaque")
        _fold_string_data(obj)  # the v1 -> internal conversion

    def validate_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        errors = super().validate_update(new, old)
        if new.get("type") != old.get("type"):
            errors.append(FieldCause("type", "Invalid value", "field is immutable",
                                     new.get("type")))
        return errors


def _fold_string_data(secret: Obj) -> None:
    """The v1 -> internal conversion: stringData entries overwrite data, base64-encoded."""
    string_data = secret.pop("stringData", None)
    if string_data:
        data = secret.setdefault("data", {})
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()


class ServiceAccountStrategy(Strategy):
    return_deleted_object = True


class ResourceQuotaStrategy(Strategy):
    return_deleted_object = True  # resourcequota storage sets ReturnDeletedObject


SIDE_EFFECT_CLASSES = ("None", "NoneOnDryRun")  # the only ones admissionregistration/v1 takes


def match_condition_errors(holder: Obj, path: str) -> list[FieldCause]:
    """Each of `holder`'s matchConditions has an expression that compiles to bool."""
    causes = []
    for index, condition in enumerate(holder.get("matchConditions") or []):
        expression = (condition or {}).get("expression") if isinstance(condition, dict) else None
        field = f"{path}.matchConditions[{index}].expression"
        if not expression:
            causes.append(FieldCause(field, "Required value", ""))
        elif problem := cel.bool_result_error(str(expression)):
            causes.append(FieldCause(field, "Invalid value", problem, expression))
    return causes


class WebhookConfigurationStrategy(Strategy):
    """ValidateValidatingWebhookConfiguration / ValidateMutatingWebhookConfiguration, as far as
    kubesim reads them: each webhook's sideEffects is None or NoneOnDryRun (v1), so every
    webhook may be called on a dry run; its matchConditions compile to bool."""

    def validate(self, obj: Obj) -> list[FieldCause]:
        causes = []
        for index, hook in enumerate(obj.get("webhooks") or []):
            if isinstance(hook, dict):
                causes += match_condition_errors(hook, f"webhooks[{index}]")
            path = f"webhooks[{index}].sideEffects"
            side_effects = hook.get("sideEffects") if isinstance(hook, dict) else None
            if not side_effects:
                causes.append(FieldCause(path, "Required value", ""))
            elif side_effects not in SIDE_EFFECT_CLASSES:
                supported = ", ".join(names.go_quote(c) for c in SIDE_EFFECT_CLASSES)
                causes.append(FieldCause(path, "Unsupported value",
                                         f"supported values: {supported}", side_effects))
        return causes


class RbacStrategy(Strategy):
    name_errors = staticmethod(names.path_segment_errors)


class ValidatingAdmissionPolicyStrategy(Strategy):
    """ValidateValidatingAdmissionPolicy, as far as a policy that cannot run is refused: its
    expressions compile (CEL syntax; kubesim types only the result of a match condition)."""

    def validate(self, obj: Obj) -> list[FieldCause]:
        spec = obj.get("spec") or {}
        causes = match_condition_errors(spec, "spec")
        for field, keys in (("validations", ("expression", "messageExpression")),
                            ("variables", ("expression",))):
            for index, item in enumerate(spec.get(field) or []):
                for key in keys:
                    expression = (item or {}).get(key)
                    if key == "expression" and not expression:
                        causes.append(FieldCause(f"spec.{field}[{index}].{key}",
                                                 "Required value", ""))
                    elif expression and (problem := cel.compile_error(str(expression))):
                        causes.append(FieldCause(f"spec.{field}[{index}].{key}",
                                                 "Invalid value", problem, expression))
        if not spec.get("validations") and not spec.get("auditAnnotations"):
            causes.append(FieldCause("spec.validations", "Required value",
                                     "validations or auditAnnotations must contain at least one "
                                     "item"))
        return causes


class ValidatingAdmissionPolicyBindingStrategy(Strategy):
    def validate(self, obj: Obj) -> list[FieldCause]:
        spec = obj.get("spec") or {}
        causes = []
        if not spec.get("policyName"):
            causes.append(FieldCause("spec.policyName", "Required value", ""))
        if not spec.get("validationActions"):
            causes.append(FieldCause("spec.validationActions", "Required value",
                                     "at least one validation action is required"))
        return causes


class DeploymentStrategy(Strategy):
    def default(self, obj: Obj) -> None:
        _default_workload(obj)

    def prepare_for_create(self, obj: Obj) -> None:
        # the reset typed status still encodes its fields without omitempty: ReplicaSetStatus'
        # and StatefulSetStatus' `replicas` (clients such as the official python one require it)
        obj["status"] = {"replicas": 0} if obj.get("kind") in ("ReplicaSet", "StatefulSet") \
            else {}


TEMPLATE_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
"""apps/v1 DaemonSets' template generation (the internal type's TemplateGeneration, converted)."""


class DaemonSetStrategy(DeploymentStrategy):
    """pkg/registry/apps/daemonset/strategy.go: a new set's template generation is 1, and each
    change of its template adds one."""

    def prepare_for_create(self, obj: Obj) -> None:
        # DaemonSetStatus' counts are encoded without omitempty
        obj["status"] = {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                         "desiredNumberScheduled": 0, "numberReady": 0}
        obj["metadata"].setdefault("annotations", {})[TEMPLATE_GENERATION_ANNOTATION] = "1"

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        generation = (old["metadata"].get("annotations") or {}).get(
            TEMPLATE_GENERATION_ANNOTATION, "1")
        changed = (new.get("spec") or {}).get("template") != (old.get("spec") or {}).get(
            "template")
        new["metadata"].setdefault("annotations", {})[TEMPLATE_GENERATION_ANNOTATION] = (
            str(int(generation) + 1) if changed and generation.isdigit() else generation)


def _default_workload(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    if obj.get("kind") != "DaemonSet":
        spec.setdefault("replicas", 1)
    if obj.get("kind") == "DaemonSet":
        spec.setdefault("updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": 1, "maxSurge": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
    if obj.get("kind") == "Deployment":
        spec.setdefault("strategy", {"type": "RollingUpdate", "rollingUpdate": {
            "maxUnavailable": "25%", "maxSurge": "25%"}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)
    if obj.get("kind") == "StatefulSet":
        spec.setdefault("podManagementPolicy", "OrderedReady")
        spec.setdefault("updateStrategy", {"type": "RollingUpdate",
                                           "rollingUpdate": {"partition": 0}})
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("persistentVolumeClaimRetentionPolicy", {
            "whenDeleted": "Retain", "whenScaled": "Retain"})
        for claim in spec.get("volumeClaimTemplates") or []:
            if isinstance(claim, dict):
                claim.setdefault("apiVersion", "v1")
                claim.setdefault("kind", "PersistentVolumeClaim")
                claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
                claim.setdefault("status", {"phase": "Pending"})
    template_spec = (spec.get("template") or {}).get("spec")
    if isinstance(template_spec, dict):
        _default_pod_spec(template_spec)


class ServiceIPAllocator:
    """Hands out ClusterIPs from the service CIDR in order (the repair loop is not simulated)."""

    def __init__(self, cidr: str = "10.96.0.0/12") -> None:
        self._network = ipaddress.ip_network(cidr)
        self._next = 10  # .1 is the kubernetes service

    def allocate(self) -> str:
        address = self._network.network_address + self._next
        self._next += 1
        return str(address)


class CustomResourceStrategy(Strategy):
    """Custom resources: schema defaulting, pruning and validation; /status changes only status."""

    def prepare_for_create(self, obj: Obj) -> None:
        if self.kind.has_status_subresource:
            obj.pop("status", None)  # create cannot set status
        self._conform(obj)

    def prepare_for_update(self, new: Obj, old: Obj) -> None:
        super().prepare_for_update(new, old)
        self._conform(new)

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        status_present, status = "status" in new, new.get("status")
        new.clear()
        new.update({k: v for k, v in old.items() if k != "status"})
        new["metadata"] = dict(old["metadata"])
        if status_present:
            new["status"] = status
        self._conform(new)

    def generation_view(self, obj: Obj) -> Any:
        # copyNonMetadata: any change outside metadata (status included when it is not a
        # subresource) bumps the generation
        return {k: v for k, v in obj.items() if k != "metadata"}

    def _conform(self, obj: Obj) -> None:
        from kubesim import schema  # B's pure module; imported lazily to keep import order simple

        if self.kind.schema is not None:
            schema_dict = dict(self.kind.schema)
            metadata = obj.get("metadata")
            conformed = schema.prune(schema.apply_defaults(obj, schema_dict), schema_dict)
            obj.clear()
            obj.update(conformed)
            obj["metadata"] = metadata  # metadata is never pruned (ObjectMeta is validated apart)

    def validate(self, obj: Obj) -> list[FieldCause]:
        return self._schema_causes(obj) + self._scale_causes(obj, "specReplicasPath",
                                                             "statusReplicasPath")

    def validate_status_update(self, new: Obj, old: Obj) -> list[FieldCause]:
        return self._schema_causes(new) + self._scale_causes(new, "statusReplicasPath")

    def _schema_causes(self, obj: Obj) -> list[FieldCause]:
        from kubesim import schema

        if self.kind.schema is None:
            return []
        return [_RawCause(str(e)) for e in schema.validate(obj, dict(self.kind.schema))]

    def _scale_causes(self, obj: Obj, *paths: str) -> list[FieldCause]:
        """customResourceValidator.ValidateScaleSpec / ValidateScaleStatus: the replicas the
        scale subresource reads are within int32 and not negative (when set)."""
        causes = []
        for key in paths:
            path = str((self.kind.scale or {}).get(key) or "")
            value: Any = obj
            for part in path.removeprefix(".").split(".") if path else []:
                value = value.get(part) if isinstance(value, dict) else None
            if not path or not isinstance(value, int) or isinstance(value, bool):
                continue
            if value < 0:
                causes.append(FieldCause(path, "Invalid value", "should be a non-negative integer",
                                         value))
            elif value > INT32_MAX:
                causes.append(FieldCause(path, "Invalid value",
                                         f"should be less than or equal to {INT32_MAX}", value))
        return causes


class CustomResourceDefinitionStrategy(Strategy):
    def prepare_for_create(self, obj: Obj) -> None:
        obj["status"] = {}

    def prepare_for_status_update(self, new: Obj, old: Obj) -> None:
        _keep(new, old, "spec")
        new["metadata"] = dict(old["metadata"])  # ResetObjectMetaForStatus

    def validate(self, obj: Obj) -> list[FieldCause]:
        from kubesim import schema

        spec = obj.get("spec") or {}
        group = spec.get("group", "")
        plural = (spec.get("names") or {}).get("plural", "")
        errors: list[FieldCause] = []
        name = obj["metadata"].get("name", "")
        if name != f"{plural}.{group}":
            errors.append(FieldCause("metadata.name", "Invalid value",
                                     'must be spec.names.plural+"."+spec.group', name))
        versions = spec.get("versions") or []
        if not versions:
            errors.append(FieldCause("spec.versions", "Invalid value",
                                     "must have exactly one version marked as storage version",
                                     versions))
        elif sum(1 for v in versions if v.get("storage")) != 1:
            errors.append(FieldCause("spec.versions", "Invalid value",
                                     "must have exactly one version marked as storage version",
                                     [v.get("name") for v in versions]))
        schemas = [(version.get("schema") or {}).get("openAPIV3Schema") for version in versions]
        if schemas and schemas[0] is not None and all(s == schemas[0] for s in schemas):
            # converted to the internal version, identical per-version schemas become one,
            # spec.validation, which is what the errors name
            return errors + [_RawCause(p) for p in schema.structural_errors(
                schemas[0], "spec.validation.openAPIV3Schema")]
        for index, version in enumerate(versions):
            version_schema = (version.get("schema") or {}).get("openAPIV3Schema")
            path = f"spec.versions[{index}].schema.openAPIV3Schema"
            if version_schema is None:
                errors.append(FieldCause(path, "Required value",
                                         "schemas are required"))
                continue
            errors += [_RawCause(p) for p in schema.structural_errors(version_schema, path)]
        return errors


class _RawCause(FieldCause):
    """A cause already rendered as a field error (schema.structural_errors gives strings)."""

    def __init__(self, text: str) -> None:
        path, _, rest = text.partition(": ")
        error_type, _, detail = rest.partition(": ")
        super().__init__(path, error_type, detail)
        self.text = text

    def __str__(self) -> str:
        return self.text
