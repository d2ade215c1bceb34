"""The Pod Security Standards as the built-in PodSecurity admission plugin checks them
(k8s.io/pod-security-admission, version "latest"), with its reasons and details, so that a
provider's refusal of a consumer's pod reads like the one a user knows; and the
`pod-security.kubernetes.io/enforce` labels of a consumer's twin namespaces, so that the
provider's API server refuses such pods even if the enforcer were bypassed."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from shared.api.quota import PodPolicy, PodSecurityLevel

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


def all_containers(spec: Mapping[str, Any]) -> Containers:
    return [c for field in ("initContainers", "containers", "ephemeralContainers")
            for c in spec.get(field) or []]


def _context(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("securityContext") or {}


def quoted(names: Iterable[Any]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _containers_phrase(names: list[str]) -> str:
    return f"container {quoted(names)}" if len(names) == 1 else f"containers {quoted(names)}"


def volume_sources(volume: Mapping[str, Any]) -> list[str]:
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
        return (f"must not include {quoted(extra)} in securityContext.capabilities.add"
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
    return f"hostPath volumes ({'volume' if len(names) == 1 else 'volumes'} {quoted(names)})"


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
        bad = [s for s in volume_sources(volume) if s not in RESTRICTED_VOLUME_SOURCES]
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
    containers = all_containers(spec)
    found = (check(spec, annotations or {}, containers) for check in CHECKS[level])
    return [violation for violation in found if violation is not None]
