"""What a provider lets a consumer run: the offloading allow-list re-applied on the provider side
and the Pod Security Standards level the provider chooses per consumer (issue: a consumer, or
anyone holding its kubeconfig, must not get privileged, host-namespace or hostPath pods through
the enforcer, which may create pods cluster-wide).

The home agent already forges an allow-listed spec (shared.forge.pod), but the provider cannot
trust the consumer's side: the ShadowPod admission and the enforcer check every `spec.pod`
again here. The level checks follow the Pod Security Standards as the built-in PodSecurity
admission plugin implements them (k8s.io/pod-security-admission, version "latest"), with its
reasons and details, so that a refusal reads like the one a user knows; twin namespaces also
carry the `pod-security.kubernetes.io/enforce` label of the same level, so the provider's API
server refuses such pods even if this code were bypassed.

Beyond the Pod Security Standards, the fields that place, prioritise or mount on the provider's
nodes must be granted by the consumer's policy, whatever the level: tolerations, the node labels
of nodeSelector and node affinity (never `matchFields`), priority and runtime classes,
schedulers and volume types. Each refusal names the field and the policy rule.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shared.api.quota import PodPolicy, PodSecurityLevel, Toleration

POD_SECURITY_ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
POD_SECURITY_ENFORCE_VERSION_LABEL = "pod-security.kubernetes.io/enforce-version"
POD_SECURITY_VERSION = "latest"

# Pod Security Standards, baseline: capabilities a container may add.
BASELINE_CAPABILITIES = frozenset({
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})
# restricted: the only capability a container may add.
RESTRICTED_CAPABILITIES = frozenset({"NET_BIND_SERVICE"})
# baseline: the sysctls known to be namespaced and safe.
SAFE_SYSCTLS = frozenset({
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t",
                           "container_engine_t"})
APPARMOR_ANNOTATION_PREFIX = "container.apparmor.security.beta.kubernetes.io/"
# restricted: the only volume sources allowed.
RESTRICTED_VOLUME_SOURCES = frozenset({
    "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
    "projected", "secret"})
VOLUME_NAME_KEYS = frozenset({"name"})

Containers = list[Mapping[str, Any]]
Check = Callable[[Mapping[str, Any], Mapping[str, str], Containers], "str | None"]


def twin_namespace_labels(policy: PodPolicy) -> dict[str, str]:
    """The Pod Security labels of a consumer's twin namespaces."""
    return {POD_SECURITY_ENFORCE_LABEL: policy.pod_security.value,
            POD_SECURITY_ENFORCE_VERSION_LABEL: POD_SECURITY_VERSION}


def _all_containers(spec: Mapping[str, Any]) -> Containers:
    return [c for field in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(field) or []]


def _context(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("securityContext") or {}


def _quoted(names: Iterable[Any]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _containers_phrase(names: list[str]) -> str:
    return f"container {_quoted(names)}" if len(names) == 1 else f"containers {_quoted(names)}"


def _volume_sources(volume: Mapping[str, Any]) -> list[str]:
    return [key for key in volume if key not in VOLUME_NAME_KEYS]


def _container_names(containers: Containers, bad: Callable[[Mapping[str, Any]], bool]
                     ) -> list[str]:
    return [str(c.get("name")) for c in containers if bad(c)]


# --- baseline ---------------------------------------------------------------------------------

def _host_namespaces(spec: Mapping[str, Any], _a: Mapping[str, str], _c: Containers
                     ) -> str | None:
    on = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    return f"host namespaces ({', '.join(on)})" if on else None


def _privileged(_s: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                ) -> str | None:
    names = _container_names(containers, lambda c: bool(_context(c).get("privileged")))
    return (f"privileged ({_containers_phrase(names)} must not set "
            "securityContext.privileged=true)") if names else None


def _added_capabilities(container: Mapping[str, Any]) -> list[str]:
    return list((_context(container).get("capabilities") or {}).get("add") or [])


def _container_details(containers: Containers,
                       detail: Callable[[Mapping[str, Any]], str | None]) -> list[str]:
    """`container "name" <detail>` for each container that has a detail."""
    return [f'container "{c.get("name")}" {found}' for c in containers
            if (found := detail(c)) is not None]


def _capabilities_added_beyond(allowed: frozenset[str]
                               ) -> Callable[[Mapping[str, Any]], str | None]:
    def detail(container: Mapping[str, Any]) -> str | None:
        extra = [c for c in _added_capabilities(container) if c not in allowed]
        return (f"must not include {_quoted(extra)} in securityContext.capabilities.add"
                if extra else None)
    return detail


def _baseline_capabilities(_s: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                           ) -> str | None:
    details = _container_details(containers, _capabilities_added_beyond(BASELINE_CAPABILITIES))
    return f"non-default capabilities ({'; '.join(details)})" if details else None


def _host_path_volumes(spec: Mapping[str, Any], _a: Mapping[str, str], _c: Containers
                       ) -> str | None:
    names = [str(v.get("name")) for v in spec.get("volumes") or [] if "hostPath" in v]
    if not names:
        return None
    return f"hostPath volumes ({'volume' if len(names) == 1 else 'volumes'} {_quoted(names)})"


def _host_ports(_s: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                ) -> str | None:
    def detail(container: Mapping[str, Any]) -> str | None:
        ports = [str(p.get("hostPort")) for p in container.get("ports") or [] if p.get("hostPort")]
        return (f"uses {'hostPort' if len(ports) == 1 else 'hostPorts'} {', '.join(ports)}"
                if ports else None)
    details = _container_details(containers, detail)
    return f"hostPort ({'; '.join(details)})" if details else None


def _host_process(spec: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                  ) -> str | None:
    def host_process(obj: Mapping[str, Any]) -> bool:
        return bool((_context(obj).get("windowsOptions") or {}).get("hostProcess"))
    names = _container_names(containers, host_process)
    if not names and not host_process(spec):
        return None
    return ("hostProcess (pod or containers must not set "
            "securityContext.windowsOptions.hostProcess=true)")


def _apparmor(spec: Mapping[str, Any], annotations: Mapping[str, str], containers: Containers
              ) -> str | None:
    bad = [f'{key}="{value}"' for key, value in sorted(annotations.items())
           if key.startswith(APPARMOR_ANNOTATION_PREFIX)
           and value not in ("runtime/default",) and not value.startswith("localhost/")]
    for obj, where in [(spec, "pod"), *((c, f'container "{c.get("name")}"') for c in containers)]:
        profile = (_context(obj).get("appArmorProfile") or {}).get("type")
        if profile not in (None, "RuntimeDefault", "Localhost"):
            bad.append(f'{where} must not set securityContext.appArmorProfile.type to '
                       f'"{profile}"')
    return f"forbidden AppArmor profiles ({', '.join(bad)})" if bad else None


def _proc_mount(_s: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                ) -> str | None:
    names = _container_names(
        containers, lambda c: _context(c).get("procMount") not in (None, "Default"))
    return (f'procMount ({_containers_phrase(names)} must not set securityContext.procMount to '
            '"Unmasked")') if names else None


def _selinux(spec: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
             ) -> str | None:
    def forbidden(obj: Mapping[str, Any]) -> bool:
        options = _context(obj).get("seLinuxOptions") or {}
        return (options.get("type") or "") not in SELINUX_TYPES or bool(
            options.get("user")) or bool(options.get("role"))
    names = _container_names(containers, forbidden)
    if not names and not forbidden(spec):
        return None
    return ("seLinuxOptions (pod or containers must not set forbidden "
            "securityContext.seLinuxOptions: type, user or role)")


def _seccomp_type(obj: Mapping[str, Any]) -> Any:
    return (_context(obj).get("seccompProfile") or {}).get("type")


def _seccomp_baseline(spec: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                      ) -> str | None:
    where = (["pod"] if _seccomp_type(spec) == "Unconfined" else []) + [
        f'container "{c.get("name")}"' for c in containers if _seccomp_type(c) == "Unconfined"]
    return (f'seccompProfile ({", ".join(where)} must not set securityContext.seccompProfile.type '
            'to "Unconfined")') if where else None


def _sysctls(spec: Mapping[str, Any], _a: Mapping[str, str], _c: Containers) -> str | None:
    names = [str(s.get("name")) for s in _context(spec).get("sysctls") or []
             if s.get("name") not in SAFE_SYSCTLS]
    return f"forbidden sysctls ({', '.join(names)})" if names else None


# --- restricted -------------------------------------------------------------------------------

def _privilege_escalation(_s: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                          ) -> str | None:
    names = _container_names(
        containers, lambda c: _context(c).get("allowPrivilegeEscalation") is not False)
    return (f"allowPrivilegeEscalation != false ({_containers_phrase(names)} must set "
            "securityContext.allowPrivilegeEscalation=false)") if names else None


def _restricted_capabilities(_s: Mapping[str, Any], _a: Mapping[str, str],
                             containers: Containers) -> str | None:
    no_drop = _container_names(containers, lambda c: "ALL" not in (
        (_context(c).get("capabilities") or {}).get("drop") or []))
    details = [f'{_containers_phrase(no_drop)} must set securityContext.capabilities.drop=["ALL"]'
               ] if no_drop else []
    details += _container_details(containers,
                                  _capabilities_added_beyond(RESTRICTED_CAPABILITIES))
    return f"unrestricted capabilities ({'; '.join(details)})" if details else None


def _restricted_volumes(spec: Mapping[str, Any], _a: Mapping[str, str], _c: Containers
                        ) -> str | None:
    details = []
    for volume in spec.get("volumes") or []:
        bad = [s for s in _volume_sources(volume) if s not in RESTRICTED_VOLUME_SOURCES]
        if bad:
            details.append(f'volume "{volume.get("name")}" uses restricted volume type '
                           f'"{bad[0]}"')
    return f"restricted volume types ({', '.join(details)})" if details else None


def _run_as_non_root(spec: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                     ) -> str | None:
    pod_value = _context(spec).get("runAsNonRoot")
    if pod_value is False:
        return "runAsNonRoot != true (pod must not set securityContext.runAsNonRoot=false)"
    names = _container_names(containers, lambda c: _context(c).get("runAsNonRoot") is False or (
        pod_value is not True and _context(c).get("runAsNonRoot") is not True))
    return (f"runAsNonRoot != true (pod or {_containers_phrase(names)} must set "
            "securityContext.runAsNonRoot=true)") if names else None


def _run_as_user(spec: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                 ) -> str | None:
    where = (["pod"] if _context(spec).get("runAsUser") == 0 else []) + [
        f'container "{c.get("name")}"' for c in containers if _context(c).get("runAsUser") == 0]
    return f"runAsUser=0 ({', '.join(where)} must not set runAsUser=0)" if where else None


def _seccomp_restricted(spec: Mapping[str, Any], _a: Mapping[str, str], containers: Containers
                        ) -> str | None:
    allowed = ("RuntimeDefault", "Localhost")
    pod_ok = _seccomp_type(spec) in allowed
    names = _container_names(containers, lambda c: _seccomp_type(c) not in allowed and not (
        pod_ok and _seccomp_type(c) is None))
    return (f"seccompProfile (pod or {_containers_phrase(names)} must set "
            'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")'
            ) if names else None


BASELINE_CHECKS: tuple[Check, ...] = (
    _apparmor, _baseline_capabilities, _host_namespaces, _host_path_volumes, _host_ports,
    _host_process, _privileged, _proc_mount, _selinux, _seccomp_baseline, _sysctls)
# restricted replaces baseline's seccomp rule with its own (Unconfined fails both).
RESTRICTED_CHECKS: tuple[Check, ...] = (
    _privilege_escalation, *(c for c in BASELINE_CHECKS if c is not _seccomp_baseline),
    _restricted_capabilities, _restricted_volumes, _run_as_non_root, _run_as_user,
    _seccomp_restricted)
CHECKS: Mapping[PodSecurityLevel, tuple[Check, ...]] = {
    PodSecurityLevel.PRIVILEGED: (),
    PodSecurityLevel.BASELINE: BASELINE_CHECKS,
    PodSecurityLevel.RESTRICTED: RESTRICTED_CHECKS,
}


def pod_security_violations(level: PodSecurityLevel, spec: Mapping[str, Any],
                            annotations: Mapping[str, str] | None = None) -> list[str]:
    """What in a PodSpec (and its pod's annotations) the Pod Security Standards `level` forbids,
    as the PodSecurity admission plugin words it; empty when the pod fits."""
    containers = _all_containers(spec)
    found = (check(spec, annotations or {}, containers) for check in CHECKS[level])
    return [violation for violation in found if violation is not None]


def _allowed_phrase(rule: str, allowed: str) -> str:
    """What `rule` (a field of the consumer's podPolicy) allows, as a refusal ends."""
    return f"(podPolicy.{rule}: {allowed or 'none'})"


def _refused(field: str, what: str, rule: str, allowed: str) -> str:
    return (f"{field}: Forbidden: {what} is not allowed for this consumer "
            f"{_allowed_phrase(rule, allowed)}")


# --- placement and priority -------------------------------------------------------------------

TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")


def _toleration_text(toleration: Mapping[str, Any]) -> str:
    shown = {k: toleration[k] for k in TOLERATION_FIELDS if toleration.get(k) not in (None, "")}
    return json.dumps(shown)


def _tolerates_all(key: str, operator: str) -> bool:
    return not key and operator == "Exists"


def _covers(allowed: Toleration, toleration: Mapping[str, Any]) -> bool:
    """Whether the allowed toleration covers the pod's: the same key (an allowed tolerate-all
    covers every key, and only it covers a tolerate-all), an effect the allowed one names (an
    empty one: every effect) and, unless the allowed one is `Exists`, the same value."""
    key = str(toleration.get("key") or "")
    operator = str(toleration.get("operator") or "Equal")
    if allowed.effect and toleration.get("effect") != allowed.effect:
        return False
    if _tolerates_all(allowed.key, allowed.operator):
        return True
    if _tolerates_all(key, operator) or key != allowed.key:
        return False
    return allowed.operator == "Exists" or (
        operator == "Equal" and str(toleration.get("value") or "") == allowed.value)


def _toleration_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    allowed = ", ".join(_toleration_text(t.model_dump(by_alias=True))
                        for t in policy.allowed_tolerations)
    found = []
    for index, toleration in enumerate(spec.get("tolerations") or []):
        if any(_covers(a, toleration) for a in policy.allowed_tolerations):
            continue
        what = f"toleration {_toleration_text(toleration)}"
        if _tolerates_all(str(toleration.get("key") or ""), str(toleration.get("operator"))):
            what += " (it tolerates every taint)"
        found.append(_refused(f"spec.tolerations[{index}]", what, "allowedTolerations", allowed))
    return found


NODE_AFFINITY_FIELD = "spec.affinity.nodeAffinity"
REQUIRED_TERMS_FIELD = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED_TERMS_FIELD = "preferredDuringSchedulingIgnoredDuringExecution"


def _node_selector_terms(spec: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """The node affinity's terms, required and preferred, each with its field path."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = (affinity.get(REQUIRED_TERMS_FIELD) or {}).get("nodeSelectorTerms") or []
    preferred = affinity.get(PREFERRED_TERMS_FIELD) or []
    return [
        *((f"{NODE_AFFINITY_FIELD}.{REQUIRED_TERMS_FIELD}.nodeSelectorTerms[{i}]", term or {})
          for i, term in enumerate(required)),
        *((f"{NODE_AFFINITY_FIELD}.{PREFERRED_TERMS_FIELD}[{i}].preference",
           (weighted or {}).get("preference") or {}) for i, weighted in enumerate(preferred))]


def _node_label_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    allowed = policy.allowed_node_labels

    def refused(field: str, key: Any) -> str:
        return _refused(field, f'node label "{key}"', "allowedNodeLabels", _quoted(allowed))
    found = [refused(f"spec.nodeSelector[{key}]", key)
             for key in spec.get("nodeSelector") or {} if key not in allowed]
    for field, term in _node_selector_terms(spec):
        found += [refused(f"{field}.matchExpressions[{i}].key", expression.get("key"))
                  for i, expression in enumerate(term.get("matchExpressions") or [])
                  if expression.get("key") not in allowed]
        if term.get("matchFields"):
            found.append(f"{field}.matchFields: Forbidden: offloaded pods select nodes by "
                         "labels only, never by node fields (the provider's scheduler chooses "
                         "the node)")
    return found


def _named_class_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    """priorityClassName, runtimeClassName and schedulerName against their allow-lists."""
    found = []
    for field, what, rule, allowed in (
            ("priorityClassName", "priority class", "allowedPriorityClasses",
             policy.allowed_priority_classes),
            ("runtimeClassName", "runtime class", "allowedRuntimeClasses",
             policy.allowed_runtime_classes),
            ("schedulerName", "scheduler", "allowedSchedulerNames",
             policy.allowed_scheduler_names)):
        name = spec.get(field)
        if name and name not in allowed:
            found.append(_refused(f"spec.{field}", f'{what} "{name}"', rule, _quoted(allowed)))
    # The Priority admission plugin computes spec.priority from the class: a value set without
    # a class is a priority the provider did not grant (a class not allowed is refused above).
    classes = policy.allowed_priority_classes
    if spec.get("priority") is not None and not spec.get("priorityClassName"):
        found.append("spec.priority: Forbidden: a priority is set only through an allowed "
                     "priority class "
                     + _allowed_phrase("allowedPriorityClasses", _quoted(classes)))
    return found


def _volume_type_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    allowed = policy.allowed_volume_types
    return [_refused(f"spec.volumes[{index}]",
                     f'volume "{volume.get("name")}" of type "{source}"', "allowedVolumeTypes",
                     _quoted(allowed))
            for index, volume in enumerate(spec.get("volumes") or [])
            for source in _volume_sources(volume) if source not in allowed]


def allow_list_violations(policy: PodPolicy, spec: Mapping[str, Any]) -> list[str]:
    """What the offloading allow-list forbids whatever the level: host namespaces, a node chosen
    by the consumer, host ports unless the provider allows them, and tolerations, node labels,
    priority, runtime and scheduler classes and volume types the provider's policy does not
    list."""
    found = [f"spec.{field}: Forbidden: offloaded pods do not share the node's namespaces"
             for field in ("hostNetwork", "hostPID", "hostIPC") if spec.get(field)]
    if spec.get("nodeName"):
        found.append("spec.nodeName: Forbidden: the provider's scheduler places offloaded pods")
    if not policy.allow_host_ports:
        ports = sorted({int(p["hostPort"]) for c in _all_containers(spec)
                        for p in c.get("ports") or [] if p.get("hostPort")})
        if ports:
            found.append(f"hostPort {', '.join(map(str, ports))}: Forbidden: the provider does "
                         "not allow host ports for this consumer")
    return [*found, *_toleration_violations(policy, spec), *_node_label_violations(policy, spec),
            *_named_class_violations(policy, spec), *_volume_type_violations(policy, spec)]


def _unindexed(violation: str) -> str:
    """A violation without its list indices: the same one wherever an update moved it."""
    return re.sub(r"\[\d+\]", "[]", violation)


def _added(found: list[str], before: list[str]) -> list[str]:
    had = {_unindexed(v) for v in before}
    return [v for v in found if _unindexed(v) not in had]


def policy_problem(policy: PodPolicy, spec: Mapping[str, Any],
                   annotations: Mapping[str, str] | None = None, *,
                   old_spec: Mapping[str, Any] | None = None,
                   old_annotations: Mapping[str, str] | None = None) -> str | None:
    """Why the provider refuses a pod of this spec for a consumer with `policy`, or None. For an
    update (`old_spec`, `old_annotations`: the version it replaces) only what the old version
    did not break already: a pod admitted under a looser policy may still change what a pod
    update may change after the provider tightened it (as the PodSecurity plugin exempts such
    updates)."""
    problems = allow_list_violations(policy, spec)
    level = pod_security_violations(policy.pod_security, spec, annotations)
    if old_spec is not None:
        problems = _added(problems, allow_list_violations(policy, old_spec))
        level = _added(level, pod_security_violations(policy.pod_security, old_spec,
                                                      old_annotations))
    if level:
        problems.append(f'violates PodSecurity "{policy.pod_security.value}:'
                        f'{POD_SECURITY_VERSION}": {", ".join(level)}')
    return "; ".join(problems) if problems else None
