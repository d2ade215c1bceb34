"""The Pod Security Standards as kube-apiserver's built-in PodSecurity admission plugin applies
them (k8s.io/pod-security-admission): pure functions, no I/O.

- `policy_from_labels`: a namespace's `pod-security.kubernetes.io/*` labels -> the enforce,
  audit and warn level:version, and the label errors (api.PolicyToEvaluate);
- `evaluate`: the checks of one level:version against a pod's metadata and spec, failures in
  the registry's order (policy/registry.go: baseline check IDs sorted, then restricted ones;
  a restricted check replaces the baseline checks it overrides), with the check's own reason
  and detail wording (policy/check_*.go);
- `pod_decision` / `controller_warnings` / `namespace_warnings`: what admission.Validate*
  answers (the refusal message, the Warning texts).

Checks are versioned: `v1.N` evaluates the checks as they were in policy version 1.N, `latest`
the newest the server knows (its own minor version: an emulated server caps it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.errors import FieldCause

PRIVILEGED, BASELINE, RESTRICTED = "privileged", "baseline", "restricted"
LEVELS = (PRIVILEGED, BASELINE, RESTRICTED)
LABEL_PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
NEWEST_POLICY = 35  # the newest policy version these checks describe

Obj = Mapping[str, Any]
CheckFn = Callable[[Obj, Obj], "tuple[str, str] | None"]  # (metadata, spec) -> (reason, detail)


@dataclass(frozen=True)
class LevelVersion:
    level: str
    minor: int | None = None  # None: latest

    def __str__(self) -> str:
        return f"{self.level}:{'latest' if self.minor is None else f'v1.{self.minor}'}"


@dataclass(frozen=True)
class Policy:
    enforce: LevelVersion
    audit: LevelVersion
    warn: LevelVersion


DEFAULT_POLICY = Policy(*(LevelVersion(PRIVILEGED),) * 3)  # the plugin's default configuration
_VERSION = re.compile(r"^v1\.([0-9]|[1-9][0-9]*)$")


def policy_from_labels(labels: Mapping[str, str] | None) -> tuple[Policy, list[FieldCause]]:
    """api.PolicyToEvaluate: a bad enforce level fails closed (restricted), a bad audit or warn
    level fails open (privileged), a bad version means latest; each bad label is one error."""
    labels = labels or {}
    errors: list[FieldCause] = []
    modes: dict[str, LevelVersion] = {}
    for mode in MODES:
        level, minor = DEFAULT_POLICY.enforce.level, None
        key = LABEL_PREFIX + mode
        if key in labels:
            level = labels[key]
            if level not in LEVELS:
                errors.append(FieldCause(f"metadata.labels[{key}]", "Invalid value",
                                         "must be one of " + ", ".join(LEVELS), labels[key]))
                level = RESTRICTED if mode == "enforce" else PRIVILEGED
        key = f"{LABEL_PREFIX}{mode}-version"
        if key in labels and labels[key] != "latest":
            match = _VERSION.match(labels[key])
            if match is None:
                errors.append(FieldCause(f"metadata.labels[{key}]", "Invalid value",
                                         'must be "latest" or "v1.x"', labels[key]))
            else:
                minor = int(match.group(1))
        modes[mode] = LevelVersion(level, minor)
    return Policy(**modes), errors


# ---------------------------------------------------------------------------------- helpers

def _join_quote(items: Iterable[str]) -> str:
    items = list(items)
    return '"' + '", "'.join(items) + '"' if items else ""


def _plural(singular: str, plural: str, count: int) -> str:
    return singular if count == 1 else plural


def _go_quote(text: str) -> str:
    """Go's %q for the strings met here."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + '"'


def _containers(spec: Obj) -> Iterator[Obj]:
    """visitContainers: init containers, containers, then ephemeral containers."""
    for field in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(field) or []


def _context(container_or_spec: Obj, field: str = "securityContext") -> Obj:
    return container_or_spec.get(field) or {}


def _named(kind: str, names: list[str]) -> str:
    return f"{_plural(kind, kind + 's', len(names))} {_join_quote(names)}"


def _setters(pod_bad: bool, containers: list[str]) -> list[str]:
    """`pod` and/or `container(s) "a", "b"`: who set a forbidden value."""
    return (["pod"] if pod_bad else []) + ([_named("container", containers)] if containers else [])


def _windows(spec: Obj) -> bool:
    return (spec.get("os") or {}).get("name") == "windows"


def _user_namespaced(spec: Obj) -> bool:
    return spec.get("hostUsers") is False


def _unless(skip: Callable[[Obj], bool], check: CheckFn) -> CheckFn:
    """A later policy version of `check` that admits the pods `skip` selects."""
    def versioned(meta: Obj, spec: Obj) -> tuple[str, str] | None:
        return None if skip(spec) else check(meta, spec)
    return versioned


# --------------------------------------------------------------------------- baseline checks

def _app_armor(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    allowed = ("RuntimeDefault", "Localhost")
    bad_values: set[str] = set()
    pod_type = (_context(spec).get("appArmorProfile") or {}).get("type")
    pod_bad = _context(spec).get("appArmorProfile") is not None and pod_type not in allowed
    if pod_bad:
        bad_values.add(str(pod_type or ""))
    containers = []
    for container in _containers(spec):
        profile = _context(container).get("appArmorProfile")
        if profile is not None and profile.get("type") not in allowed:
            containers.append(container.get("name", ""))
            bad_values.add(str(profile.get("type") or ""))
    setters = _setters(pod_bad, containers)
    values = sorted(bad_values)
    annotations = sorted(
        f"{key}={_go_quote(value)}" for key, value in (meta.get("annotations") or {}).items()
        if key.startswith("container.apparmor.security.beta.kubernetes.io/")
        and value and value != "runtime/default" and not value.startswith("localhost/"))
    if annotations:
        values += annotations
        setters.append(_plural("annotation", "annotations", len(annotations)))
    if not setters:
        return None
    return (_plural("forbidden AppArmor profile", "forbidden AppArmor profiles", len(values)),
            f"{' and '.join(setters)} must not set AppArmor profile type to "
            f"{_join_quote(values)}")


_DEFAULT_CAPABILITIES = frozenset((
    "AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
    "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"))


def _capabilities_baseline(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    containers, added = [], set()
    for container in _containers(spec):
        extra = [c for c in (_context(container).get("capabilities") or {}).get("add") or []
                 if c not in _DEFAULT_CAPABILITIES]
        if extra:
            containers.append(container.get("name", ""))
            added.update(extra)
    if not containers:
        return None
    return ("non-default capabilities", f"{_named('container', containers)} must not include "
            f"{_join_quote(sorted(added))} in securityContext.capabilities.add")


def _host_namespaces(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    shared = [f"{field}=true" for field in ("hostNetwork", "hostPID", "hostIPC")
              if spec.get(field) is True]
    return ("host namespaces", ", ".join(sorted(shared))) if shared else None


def _host_path_volumes(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    volumes = [v.get("name", "") for v in spec.get("volumes") or []
               if v.get("hostPath") is not None]
    return ("hostPath volumes", _named("volume", volumes)) if volumes else None


def _host_ports(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    containers, ports = [], set()
    for container in _containers(spec):
        used = [str(p["hostPort"]) for p in container.get("ports") or [] if p.get("hostPort")]
        if used:
            containers.append(container.get("name", ""))
            ports.update(used)
    if not containers:
        return None
    return ("hostPort", f"{_named('container', containers)} "
            f"{_plural('uses', 'use', len(containers))} "
            f"{_plural('hostPort', 'hostPorts', len(ports))} {', '.join(sorted(ports))}")


def _probe_hosts(handler: Obj | None) -> list[str]:
    handler = handler or {}
    return [str(action["host"]) for action in (handler.get("httpGet"), handler.get("tcpSocket"))
            if action and action.get("host")]


def _host_probes(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    containers: set[str] = set()
    hosts: set[str] = set()
    for container in _containers(spec):
        lifecycle = container.get("lifecycle") or {}
        found = [host for handler in (container.get("livenessProbe"),
                                      container.get("readinessProbe"),
                                      container.get("startupProbe"),
                                      lifecycle.get("postStart"), lifecycle.get("preStop"))
                 for host in _probe_hosts(handler)]
        if found:
            containers.add(container.get("name", ""))
            hosts.update(found)
    if not containers:
        return None
    return ("probe or lifecycle host",
            f"{_named('container', sorted(containers))} {_plural('uses', 'use', len(containers))}"
            f" {_plural('probe or lifecycle host', 'probe or lifecycle hosts', len(hosts))} "
            f"{_join_quote(sorted(hosts))}")


def _privileged(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    containers = [c.get("name", "") for c in _containers(spec)
                  if _context(c).get("privileged") is True]
    if not containers:
        return None
    return ("privileged",
            f"{_named('container', containers)} must not set securityContext.privileged=true")


def _proc_mount(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    containers, types = [], set()
    for container in _containers(spec):
        mount = _context(container).get("procMount")
        if mount is not None and mount != "Default":
            containers.append(container.get("name", ""))
            types.add(str(mount))
    if not containers:
        return None
    return ("procMount", f"{_named('container', containers)} must not set "
            f"securityContext.procMount to {_join_quote(sorted(types))}")


def _se_linux(allowed_types: frozenset[str]) -> CheckFn:
    def check(meta: Obj, spec: Obj) -> tuple[str, str] | None:
        bad_types: set[str] = set()
        user = role = False

        def bad(options: Obj) -> bool:
            nonlocal user, role
            wrong = False
            if (options.get("type") or "") not in allowed_types:
                bad_types.add(options.get("type") or "")
                wrong = True
            if options.get("user"):
                user = wrong = True
            if options.get("role"):
                role = wrong = True
            return wrong

        pod_options = _context(spec).get("seLinuxOptions")
        pod_bad = pod_options is not None and bad(pod_options)
        containers = [c.get("name", "") for c in _containers(spec)
                      if _context(c).get("seLinuxOptions") is not None
                      and bad(_context(c)["seLinuxOptions"])]
        setters = _setters(pod_bad, containers)
        if not setters:
            return None
        data = []
        if bad_types:  # as upstream, user/role are only named alongside a bad type
            data.append(f"{_plural('type', 'types', len(bad_types))} "
                        f"{_join_quote(sorted(bad_types))}")
            data += ["user may not be set"] * user + ["role may not be set"] * role
        return ("seLinuxOptions", f"{' and '.join(setters)} set forbidden "
                f"securityContext.seLinuxOptions: {'; '.join(data)}")
    return check


_SECCOMP_POD = "seccomp.security.alpha.kubernetes.io/pod"
_SECCOMP_CONTAINER = "container.seccomp.security.alpha.kubernetes.io/"
_GOOD_SECCOMP = ("RuntimeDefault", "Localhost")


def _seccomp_annotations(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    """Policy versions before 1.19 checked the alpha annotations."""
    annotations = meta.get("annotations") or {}
    keys = [_SECCOMP_POD] + [_SECCOMP_CONTAINER + c.get("name", "") for c in _containers(spec)]
    bad = sorted({f"{key}={_go_quote(annotations[key])}" for key in keys
                  if key in annotations and not (
                      annotations[key] in ("runtime/default", "docker/default")
                      or annotations[key].startswith("localhost/"))})
    if not bad:
        return None
    return ("seccompProfile",
            f"forbidden {_plural('annotation', 'annotations', len(bad))} {', '.join(bad)}")


def _seccomp(required: bool) -> CheckFn:
    """seccompProfile_baseline (a set type must be allowed) and, `required`, its restricted
    version (every container must have an allowed type, its own or the pod's)."""
    def check(meta: Obj, spec: Obj) -> tuple[str, str] | None:
        bad_values: set[str] = set()
        pod_profile = _context(spec).get("seccompProfile")
        pod_bad = pod_profile is not None and pod_profile.get("type") not in _GOOD_SECCOMP
        if pod_bad:
            bad_values.add(str(pod_profile.get("type") or ""))  # type: ignore[union-attr]
        explicit, implicit = [], []
        for container in _containers(spec):
            profile = _context(container).get("seccompProfile")
            if profile is not None:
                if profile.get("type") not in _GOOD_SECCOMP:
                    explicit.append(container.get("name", ""))
                    bad_values.add(str(profile.get("type") or ""))
            elif pod_profile is None or pod_bad:
                implicit.append(container.get("name", ""))
        setters = _setters(pod_bad, explicit)
        if setters:
            return ("seccompProfile", f"{' and '.join(setters)} must not set "
                    f"securityContext.seccompProfile.type to {_join_quote(sorted(bad_values))}")
        if required and implicit:
            return ("seccompProfile", f"pod or {_named('container', implicit)} must set "
                    'securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"')
        return None
    return check


_SAFE_SYSCTLS = {
    0: ("kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
        "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"),
    27: ("net.ipv4.ip_local_reserved_ports",),
    29: ("net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
         "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"),
    32: ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"),
}


def _sysctls(since: int) -> CheckFn:
    allowed = frozenset(name for minor, names in _SAFE_SYSCTLS.items() if minor <= since
                        for name in names)

    def check(meta: Obj, spec: Obj) -> tuple[str, str] | None:
        bad = [str(s.get("name", "")) for s in _context(spec).get("sysctls") or []
               if s.get("name") not in allowed]
        return ("forbidden sysctls", ", ".join(bad)) if bad else None
    return check


def _windows_host_process(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    def host_process(context: Obj) -> bool:
        return (context.get("windowsOptions") or {}).get("hostProcess") is True

    setters = _setters(host_process(_context(spec)),
                       [c.get("name", "") for c in _containers(spec)
                        if host_process(_context(c))])
    if not setters:
        return None
    return ("hostProcess", f"{' and '.join(setters)} must not set "
            "securityContext.windowsOptions.hostProcess=true")


# ------------------------------------------------------------------------- restricted checks

def _allow_privilege_escalation(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    containers = [c.get("name", "") for c in _containers(spec)
                  if _context(c).get("allowPrivilegeEscalation") is not False]
    if not containers:
        return None
    return ("allowPrivilegeEscalation != false", f"{_named('container', containers)} must set "
            "securityContext.allowPrivilegeEscalation=false")


def _capabilities_restricted(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    missing_drop, adding, added = [], [], set()
    for container in _containers(spec):
        capabilities = _context(container).get("capabilities")
        if capabilities is None:
            missing_drop.append(container.get("name", ""))
            continue
        if "ALL" not in (capabilities.get("drop") or []):
            missing_drop.append(container.get("name", ""))
        extra = [c for c in capabilities.get("add") or [] if c != "NET_BIND_SERVICE"]
        if extra:
            adding.append(container.get("name", ""))
            added.update(extra)
    details = []
    if missing_drop:
        details.append(f"{_named('container', missing_drop)} must set "
                       'securityContext.capabilities.drop=["ALL"]')
    if adding:
        details.append(f"{_named('container', adding)} must not include "
                       f"{_join_quote(sorted(added))} in securityContext.capabilities.add")
    return ("unrestricted capabilities", "; ".join(details)) if details else None


_ALLOWED_VOLUMES = ("configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                    "persistentVolumeClaim", "projected", "secret")
_RESTRICTED_VOLUMES = (  # in the order upstream names a volume's type
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "gitRepo", "nfs", "iscsi",
    "glusterfs", "rbd", "flexVolume", "cinder", "cephfs", "flocker", "fc", "azureFile",
    "vsphereVolume", "quobyte", "azureDisk", "photonPersistentDisk", "portworxVolume", "scaleIO",
    "storageos")


def _restricted_volumes(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    volumes, types = [], set()
    for volume in spec.get("volumes") or []:
        if any(volume.get(source) is not None for source in _ALLOWED_VOLUMES):
            continue
        volumes.append(volume.get("name", ""))
        types.add(next((t for t in _RESTRICTED_VOLUMES if volume.get(t) is not None),
                       "unknown"))
    if not volumes:
        return None
    return ("restricted volume types",
            f"{_named('volume', volumes)} {_plural('uses', 'use', len(volumes))} "
            f"{_plural('restricted volume type', 'restricted volume types', len(types))} "
            f"{_join_quote(sorted(types))}")


def _run_as_non_root(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    pod_value = _context(spec).get("runAsNonRoot")
    explicit, implicit = [], []
    for container in _containers(spec):
        value = _context(container).get("runAsNonRoot")
        if value is False:
            explicit.append(container.get("name", ""))
        elif value is None and pod_value is not True:
            implicit.append(container.get("name", ""))
    setters = _setters(pod_value is False, explicit)
    if setters:
        return ("runAsNonRoot != true",
                f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false")
    if implicit:
        return ("runAsNonRoot != true", f"pod or {_named('container', implicit)} must set "
                "securityContext.runAsNonRoot=true")
    return None


def _run_as_user(meta: Obj, spec: Obj) -> tuple[str, str] | None:
    setters = _setters(_context(spec).get("runAsUser") == 0,
                       [c.get("name", "") for c in _containers(spec)
                        if _context(c).get("runAsUser") == 0])
    if not setters:
        return None
    return ("runAsUser=0", f"{' and '.join(setters)} must not set runAsUser=0")


# -------------------------------------------------------------------------------- registry

@dataclass(frozen=True)
class Version:
    since: int  # the first policy version (1.N) this form of the check applies to
    check: CheckFn
    overrides: tuple[str, ...] = ()  # baseline checks it replaces (restricted checks only)


_SE_LINUX_TYPES = frozenset(("", "container_t", "container_init_t", "container_kvm_t"))

CHECKS: dict[str, tuple[str, tuple[Version, ...]]] = {  # ID -> (level, versions)
    "appArmorProfile": (BASELINE, (Version(0, _app_armor),)),
    "capabilities_baseline": (BASELINE, (Version(0, _capabilities_baseline),)),
    "hostNamespaces": (BASELINE, (Version(0, _host_namespaces),)),
    "hostPathVolumes": (BASELINE, (Version(0, _host_path_volumes),)),
    "hostPorts": (BASELINE, (Version(0, _host_ports),)),
    "hostProbesAndHostLifecycle": (BASELINE, (Version(34, _host_probes),)),
    "privileged": (BASELINE, (Version(0, _privileged),)),
    "procMount": (BASELINE, (Version(0, _proc_mount),
                             Version(35, _unless(_user_namespaced, _proc_mount)))),
    "seLinuxOptions": (BASELINE, (
        Version(0, _se_linux(_SE_LINUX_TYPES)),
        Version(31, _se_linux(_SE_LINUX_TYPES | {"container_engine_t"})))),
    "seccompProfile_baseline": (BASELINE, (Version(0, _seccomp_annotations),
                                           Version(19, _seccomp(required=False)))),
    "sysctls": (BASELINE, tuple(Version(minor, _sysctls(minor)) for minor in _SAFE_SYSCTLS)),
    "windowsHostProcess": (BASELINE, (Version(0, _windows_host_process),)),
    "allowPrivilegeEscalation": (RESTRICTED, (
        Version(8, _allow_privilege_escalation),
        Version(25, _unless(_windows, _allow_privilege_escalation)))),
    "capabilities_restricted": (RESTRICTED, (
        Version(22, _capabilities_restricted, ("capabilities_baseline",)),
        Version(25, _unless(_windows, _capabilities_restricted), ("capabilities_baseline",)))),
    "procMount_restricted": (RESTRICTED, (Version(35, _proc_mount, ("procMount",)),)),
    "restrictedVolumes": (RESTRICTED, (Version(0, _restricted_volumes, ("hostPathVolumes",)),)),
    "runAsNonRoot": (RESTRICTED, (Version(0, _run_as_non_root),
                                  Version(35, _unless(_user_namespaced, _run_as_non_root)))),
    "runAsUser": (RESTRICTED, (Version(23, _run_as_user),
                               Version(35, _unless(_user_namespaced, _run_as_user)))),
    "seccompProfile_restricted": (RESTRICTED, (
        Version(19, _seccomp(required=True), ("seccompProfile_baseline",)),
        Version(25, _unless(_windows, _seccomp(required=True)), ("seccompProfile_baseline",)))),
}


def _at(versions: tuple[Version, ...], minor: int) -> Version | None:
    return next((v for v in reversed(versions) if v.since <= minor), None)


def evaluate(level_version: LevelVersion, meta: Obj, spec: Obj,
             newest: int = NEWEST_POLICY) -> list[tuple[str, str]]:
    """The (reason, detail) of each failed check, in the order messages list them. `newest`
    is the policy version `latest` means (and the cap of any later one)."""
    if level_version.level == PRIVILEGED:
        return []
    minor = newest if level_version.minor is None else min(level_version.minor, newest)
    chosen = {check_id: version for check_id, (level, versions) in CHECKS.items()
              if (level == BASELINE or level_version.level == RESTRICTED)
              and (version := _at(versions, minor)) is not None}
    overridden = {o for version in chosen.values() for o in version.overrides}
    ordered = sorted(i for i in chosen if CHECKS[i][0] == BASELINE and i not in overridden)
    ordered += sorted(i for i in chosen if CHECKS[i][0] == RESTRICTED)
    return [failure for check_id in ordered
            if (failure := chosen[check_id].check(meta, spec)) is not None]


def detail(failures: list[tuple[str, str]]) -> str:
    """AggregateCheckResult.ForbiddenDetail: `reason (detail), reason, ...`."""
    return ", ".join(f"{reason} ({text})" if text else reason for reason, text in failures)


# ------------------------------------------------------------------------------- decisions

# Pod subresources whose requests carry no pod spec to judge (ignoredPodSubresources)
IGNORED_POD_SUBRESOURCES = frozenset((
    "exec", "attach", "binding", "eviction", "log", "portforward", "proxy", "status"))


def pod_template(group: str, plural: str, obj: Obj) -> Obj | None:
    """DefaultPodSpecExtractor: the pod template of a workload; None when `plural` names no
    workload or the object has no template."""
    spec = obj.get("spec") or {}
    if (group, plural) == ("", "podtemplates"):
        return obj.get("template")
    if (group, plural) == ("batch", "cronjobs"):
        return ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template")
    if (group, plural) in WORKLOADS:
        return spec.get("template")
    return None


WORKLOADS = frozenset((("", "replicationcontrollers"), ("", "podtemplates"),
                       ("apps", "replicasets"), ("apps", "deployments"),
                       ("apps", "statefulsets"), ("apps", "daemonsets"),
                       ("batch", "jobs"), ("batch", "cronjobs")))


def significant_pod_update(new: Obj, old: Obj) -> bool:
    """isSignificantPodUpdate: only images and seccomp annotations of an existing pod can
    change what the checks see; other updates are not judged again."""
    annotations = (new.get("metadata") or {}).get("annotations") or {}
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    if annotations.get(_SECCOMP_POD) != old_annotations.get(_SECCOMP_POD):
        return True
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}

    def changed(container: Obj, before: Obj) -> bool:
        key = _SECCOMP_CONTAINER + container.get("name", "")
        return (container.get("image") != before.get("image")
                or annotations.get(key) != old_annotations.get(key))

    for field in ("containers", "initContainers"):
        containers, before = spec.get(field) or [], old_spec.get(field) or []
        if len(containers) != len(before) or any(map(changed, containers, before)):
            return True
    old_ephemeral = {c.get("name"): c for c in old_spec.get("ephemeralContainers") or []}
    return any(c.get("name") not in old_ephemeral or changed(c, old_ephemeral[c.get("name")])
               for c in spec.get("ephemeralContainers") or [])


def _evaluate_modes(policy: Policy, meta: Obj, spec: Obj, modes: tuple[str, ...],
                    newest: int) -> dict[str, list[tuple[str, str]]]:
    cache: dict[LevelVersion, list[tuple[str, str]]] = {}
    results = {}
    for mode in modes:
        level_version = getattr(policy, mode)
        if level_version not in cache:
            cache[level_version] = evaluate(level_version, meta, spec, newest)
        results[mode] = cache[level_version]
    return results


def pod_decision(policy: Policy, pod: Obj, newest: int = NEWEST_POLICY
                 ) -> tuple[str | None, list[str]]:
    """(why the pod is refused or None, the Warning texts) for a pod create or significant
    update (EvaluatePod with enforce): no warnings on a request that is refused."""
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    results = _evaluate_modes(policy, meta, spec, ("enforce", "warn"), newest)
    if results["enforce"]:
        return f'violates PodSecurity "{policy.enforce}": {detail(results["enforce"])}', []
    return None, _warnings(policy, results["warn"])


def controller_warnings(policy: Policy, template: Obj, newest: int = NEWEST_POLICY) -> list[str]:
    """A workload's pod template is never refused, only warned about (warn mode)."""
    failures = evaluate(policy.warn, template.get("metadata") or {}, template.get("spec") or {},
                        newest)
    return _warnings(policy, failures)


def _warnings(policy: Policy, failures: list[tuple[str, str]]) -> list[str]:
    return [f'would violate PodSecurity "{policy.warn}": {detail(failures)}'] if failures else []


def namespace_warnings(namespace: str, old: Policy, new: Policy, pods: Iterable[Obj],
                       newest: int = NEWEST_POLICY) -> list[str]:
    """ValidateNamespace on update: when the enforce level tightens, which existing pods
    would now be refused (EvaluatePodsInNamespace; pods sharing reasons are counted)."""
    if (new.enforce == old.enforce or new.enforce.level == PRIVILEGED
            or (new.enforce.minor == old.enforce.minor
                and LEVELS.index(new.enforce.level) <= LEVELS.index(old.enforce.level))):
        return []
    by_reasons: dict[str, list[str]] = {}
    for pod in pods:
        failures = evaluate(new.enforce, pod.get("metadata") or {}, pod.get("spec") or {},
                            newest)
        if failures:
            reasons = ", ".join(reason for reason, _ in failures)
            by_reasons.setdefault(reasons, []).append((pod.get("metadata") or {}).get("name", ""))
    if not by_reasons:
        return []
    warnings = []
    for reasons, names in by_reasons.items():
        others = len(names) - 1
        suffix = "" if not others else f" (and {others} other pod{'s' * (others > 1)})"
        warnings.append(f"{min(names)}{suffix}: {reasons}")
    return [f'existing pods in namespace "{namespace}" violate the new PodSecurity enforce '
            f'level "{new.enforce}"', *sorted(warnings)]
