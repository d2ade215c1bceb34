"""The admission chain: built-in plugins (ServiceAccount, DefaultTolerationSeconds, PodSecurity)
and webhooks, AdmissionReview v1 over HTTPS, as the real server's webhook dispatchers call them.

Matching follows k8s.io/apiserver/pkg/admission/plugin/webhook/predicates (rules, scope,
namespaceSelector, objectSelector); denials become `admission webhook "x" denied the request: msg`
with the webhook's status code (400 when it sets none), as webhook/errors.ToStatusErr does; a
webhook that cannot be called fails the request (failurePolicy Fail, the v1 default) or is
skipped (Ignore). A webhook's matchConditions (CEL over `object`, `oldObject`, `request`; no
`authorizer`) decide after its rules and selectors: one false skips it, an error fails the
request under failurePolicy Fail (webhook/matchconditions). Mutating webhooks run one after
another in name order, each seeing the previous one's patch; validating webhooks all see the
final object. Subresource creates (serviceaccounts/token) are admitted with the object they
take (a TokenRequest), as the real server's create handler admits it.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import dataclasses
import json
import random
import secrets
import ssl
import uuid
from collections.abc import Mapping
from typing import Any

import aiohttp
import jsonpatch

from kubesim import cel, podsecurity
from kubesim.errors import StatusError, forbidden, invalid
from kubesim.kinds import SUBRESOURCE_KINDS
from kubesim.quota import ResourceQuotaPlugin
from kubesim.selectors import label_selector_from_object
from kubesim.store import Store, Stored
from kubesim.version import VERSION
from kubesim.warning import add_warning

ADMISSION_GROUP = "admissionregistration.k8s.io"
MUTATING = "mutatingwebhookconfigurations"
VALIDATING = "validatingwebhookconfigurations"
POLICIES = "validatingadmissionpolicies"
POLICY_BINDINGS = "validatingadmissionpolicybindings"
# Admission configurations are never admitted by webhooks or policies
# (IsExemptAdmissionConfigurationResource).
_EXEMPT = {(ADMISSION_GROUP, MUTATING), (ADMISSION_GROUP, VALIDATING),
           (ADMISSION_GROUP, POLICIES), (ADMISSION_GROUP, POLICY_BINDINGS)}
_OPTIONS_KINDS = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


def _any_or(items: Any, wanted: str) -> bool:
    return "*" in (items or []) or wanted in (items or [])


def rule_matches(
    rule: Mapping[str, Any], operation: str, group: str, version: str, resource: str,
    subresource: str, namespace: str,
) -> bool:
    """predicates/rules.Matcher.Matches: scope, operation, group, version, resource[/sub]."""
    scope = rule.get("scope") or "*"
    if scope == "Cluster" and not (namespace == "" or resource == "namespaces"):
        return False
    if scope == "Namespaced" and (namespace == "" or resource == "namespaces"):
        return False
    if not _any_or(rule.get("operations"), operation):
        return False
    if not _any_or(rule.get("apiGroups"), group) or not _any_or(rule.get("apiVersions"), version):
        return False
    for candidate in rule.get("resources") or []:
        wanted_resource, _, wanted_sub = candidate.partition("/")
        if wanted_resource in ("*", resource) and wanted_sub in ("*", subresource):
            return True
    return False


def object_selector_matches(webhook: Mapping[str, Any], obj: Any, old: Any) -> bool:
    """The objectSelector matches if the new or the old object's labels match."""
    selector = label_selector_from_object(webhook.get("objectSelector"))
    if selector.empty:
        return True
    return any(
        isinstance(candidate, dict)
        and selector.matches((candidate.get("metadata") or {}).get("labels") or {})
        for candidate in (obj, old)
    )


def namespace_selector_matches(
    webhook: Mapping[str, Any], namespace_labels: Mapping[str, str] | None
) -> bool:
    """`namespace_labels` is None for cluster-scoped requests other than on namespaces."""
    selector = label_selector_from_object(webhook.get("namespaceSelector"))
    if selector.empty or namespace_labels is None:
        return True
    return selector.matches(namespace_labels)


def request_namespace_labels(store: Store, request: Any, obj: Any) -> Mapping[str, str] | None:
    """What a namespaceSelector matches: a namespace's own labels, a namespaced request's
    namespace's; None for other cluster-scoped requests."""
    if request.kind.group == "" and request.kind.plural == "namespaces":
        source = obj or request.old_object or {}
        return (source.get("metadata") or {}).get("labels") or {}
    if not request.namespace:
        return None
    stored = store.get(("", "namespaces"), "", request.namespace)
    return (stored.obj["metadata"].get("labels") or {}) if stored else {}


def denial(webhook_name: str, result: Mapping[str, Any] | None) -> StatusError:
    """webhook/errors.ToStatusErr."""
    result = dict(result or {})
    code = int(result.get("code") or 0)
    denied_by = f'admission webhook "{webhook_name}" denied the request'
    if result.get("message"):
        message = f"{denied_by}: {result['message']}"
    elif result.get("reason"):
        message = f"{denied_by}: {result['reason']}"
    else:
        message = f"{denied_by} without explanation"
    return StatusError(max(code, 400), str(result.get("reason") or ""), message,
                       result.get("details"))


def call_failure(webhook_name: str, why: str) -> StatusError:
    """What a failing call of a failurePolicy=Fail webhook gives (apierrors.NewInternalError)."""
    message = f'failed calling webhook "{webhook_name}": {why}'
    return StatusError(500, "InternalError", f"Internal error occurred: {message}",
                       {"causes": [{"message": message}]})


def _ssl_context(client_config: Mapping[str, Any]) -> ssl.SSLContext:
    bundle = client_config.get("caBundle")
    if bundle:
        return ssl.create_default_context(cadata=base64.b64decode(bundle).decode())
    return ssl.create_default_context()


def admission_review(request: Any, obj: Any) -> dict[str, Any]:
    """The AdmissionReview v1 request a webhook receives."""
    kind = request.kind
    user = request.user
    group_version_kind = {"group": kind.group, "version": kind.version, "kind": kind.kind}
    if request.operation == "CREATE" and request.subresource in SUBRESOURCE_KINDS:
        # the object the subresource takes (a TokenRequest, an Eviction), not its parent
        group, version, sub_kind = SUBRESOURCE_KINDS[request.subresource]
        group_version_kind = {"group": group, "version": version, "kind": sub_kind}
    resource = {"group": kind.group, "version": kind.version, "resource": kind.plural}
    body: dict[str, Any] = {
        "uid": str(uuid.uuid4()),
        "kind": group_version_kind,
        "resource": resource,
        "requestKind": group_version_kind,
        "requestResource": resource,
        "name": request.name,
        "namespace": request.namespace,
        "operation": request.operation,
        "userInfo": {"username": user.name, "uid": user.uid, "groups": list(user.groups),
                     **({"extra": {k: list(v) for k, v in user.extra.items()}}
                        if user.extra else {})},
        "object": obj,
        "oldObject": request.old_object,
        "dryRun": bool(request.dry_run),
    }
    if request.subresource:
        body["subResource"] = body["requestSubResource"] = request.subresource
    options_kind = _OPTIONS_KINDS.get(request.operation)
    if options_kind:
        body["options"] = {"apiVersion": "meta.k8s.io/v1", "kind": options_kind,
                           **(request.options or {})}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


class WebhookAdmission:
    """The ApiServer's admission chain, driven by the cluster's webhook configurations."""

    def __init__(self, store: Store) -> None:
        self._store = store
        # One client per CA bundle, its connections kept alive between calls, as
        # kube-apiserver's webhook ClientManager caches its clients.
        self._clients: dict[str, aiohttp.ClientSession] = {}

    def _client(self, client_config: Mapping[str, Any]) -> aiohttp.ClientSession:
        bundle = str(client_config.get("caBundle") or "")
        client = self._clients.get(bundle)
        if client is None or client.closed:
            client = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=_ssl_context(client_config)))
            self._clients[bundle] = client
        return client

    async def close(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    def _webhooks(self, plural: str) -> list[dict[str, Any]]:
        configurations = sorted(self._store.list((ADMISSION_GROUP, plural)),
                                key=lambda stored: stored.name)
        return [hook for stored in configurations for hook in stored.obj.get("webhooks") or []]

    def _matching(self, plural: str, request: Any, obj: Any) -> list[dict[str, Any]]:
        kind = request.kind
        if (kind.group, kind.plural) in _EXEMPT:
            return []
        namespace_labels = request_namespace_labels(self._store, request, obj)
        selected = [
            hook for hook in self._webhooks(plural)
            if any(
                rule_matches(rule, request.operation, kind.group, kind.version, kind.plural,
                             request.subresource, request.namespace)
                for rule in hook.get("rules") or []
            )
            and namespace_selector_matches(hook, namespace_labels)
            and object_selector_matches(hook, obj, request.old_object)
        ]
        if not any(hook.get("matchConditions") for hook in selected):
            return selected
        activation = cel_activation(request, obj)
        return [hook for hook in selected if _conditions_match(hook, activation, request)]

    async def _call(self, hook: Mapping[str, Any], request: Any, obj: Any
                    ) -> dict[str, Any] | None:
        """The webhook's AdmissionResponse; None when it failed and failurePolicy is Ignore."""
        name = hook.get("name", "")
        review = admission_review(request, obj)
        client_config = hook.get("clientConfig") or {}
        try:
            url = client_config.get("url")
            if not url:
                raise ValueError("webhooks by service reference are not supported by kubesim")
            timeout = aiohttp.ClientTimeout(total=float(hook.get("timeoutSeconds") or 10))
            async with self._client(client_config).post(url, json=review,
                                                        timeout=timeout) as reply:
                if reply.status != 200:
                    raise ValueError(f"expected response code 200, got {reply.status}")
                answer = await reply.json(content_type=None)
            response = answer.get("response") or {}
            if response.get("uid") != review["request"]["uid"]:
                raise ValueError(
                    f"expected response.uid={review['request']['uid']!r}, "
                    f"got {response.get('uid')!r}"
                )
            return dict(response)
        except (TimeoutError, aiohttp.ClientError, ValueError, ssl.SSLError) as error:
            detail = "context deadline exceeded" if isinstance(error, TimeoutError) else error
            why = f'failed to call webhook: Post "{client_config.get("url", "")}": {detail}'

            if (hook.get("failurePolicy") or "Fail") == "Ignore":
                return None
            raise call_failure(name, why) from error

    async def mutate(self, request: Any) -> dict[str, Any] | None:
        obj = request.object
        for hook in self._matching(MUTATING, request, obj):
            response = await self._call(hook, request, obj)
            if response is None:
                continue
            if not response.get("allowed"):
                raise denial(hook.get("name", ""), response.get("status"))
            if response.get("patch"):
                if response.get("patchType", "JSONPatch") != "JSONPatch":
                    raise call_failure(hook.get("name", ""),
                                       f"unsupported patch type {response.get('patchType')!r}")
                operations = json.loads(base64.b64decode(response["patch"]))
                try:
                    obj = jsonpatch.apply_patch(copy.deepcopy(obj), operations)
                except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
                    raise call_failure(hook.get("name", ""), str(error)) from error
        return obj  # type: ignore[no-any-return]

    async def validate(self, request: Any) -> None:
        hooks = self._matching(VALIDATING, request, request.object)
        responses = await asyncio.gather(
            *(self._call(hook, request, request.object) for hook in hooks)
        )
        for hook, response in zip(hooks, responses, strict=True):
            if response is not None and not response.get("allowed"):
                raise denial(hook.get("name", ""), response.get("status"))


def cel_activation(request: Any, obj: Any, namespace_object: Any = None) -> dict[str, Any]:
    """The variables admission CEL expressions see: `object`, `oldObject`, `request` (the
    AdmissionReview's request without uid and objects), `params` (null), `namespaceObject`."""
    review = admission_review(request, obj)["request"]
    for key in ("uid", "object", "oldObject"):
        review.pop(key, None)
    return {"object": cel.value(obj), "oldObject": cel.value(request.old_object),
            "request": cel.value(review), "params": cel.value(None),
            "namespaceObject": cel.value(namespace_object)}


def _conditions_match(hook: Mapping[str, Any], activation: Mapping[str, Any],
                      request: Any) -> bool:
    """matchconditions.Matcher.Match: every condition true; a false one skips the webhook even
    when another failed to evaluate; errors fail the request as Forbidden, aggregated
    (failurePolicy Fail), or skip the webhook (Ignore)."""
    failures: list[str] = []
    for condition in hook.get("matchConditions") or []:
        expression = condition["expression"]
        try:
            if not cel.evaluate_bool(expression, activation):
                return False
        except cel.CelError as error:
            failures.append(f"expression '{expression}' resulted in error: {error}")
    if failures and (hook.get("failurePolicy") or "Fail") == "Fail":
        why = failures[0] if len(failures) == 1 else f"[{', '.join(failures)}]"
        raise forbidden(request.kind.group_resource, request.name, why)
    return not failures


# ---------------------------------------------------------------------------------------------
# ValidatingAdmissionPolicy (k8s.io/apiserver/pkg/admission/plugin/policy/validating)

def _policy_rule_matches(rule: Mapping[str, Any], request: Any) -> bool:
    """A NamedRuleWithOperations: a webhook rule narrowed to resourceNames."""
    kind = request.kind
    names = rule.get("resourceNames") or []
    return rule_matches(rule, request.operation, kind.group, kind.version, kind.plural,
                        request.subresource, request.namespace) and (
        not names or request.name in names)


def _resources_match(match: Mapping[str, Any], request: Any,
                     namespace_labels: Mapping[str, str] | None, binding: bool = False) -> bool:
    """MatchResources (matching.Matches): a resource rule, no exclude rule, both selectors. A
    binding's matchResources without resourceRules does not constrain resources."""
    rules = match.get("resourceRules") or []
    return (
        ((binding and not rules) or any(_policy_rule_matches(rule, request) for rule in rules))
        and not any(_policy_rule_matches(rule, request)
                    for rule in match.get("excludeResourceRules") or [])
        and namespace_selector_matches(match, namespace_labels)
        and object_selector_matches(match, request.object, request.old_object)
    )


@dataclasses.dataclass(frozen=True)
class PolicyDenial:
    message: str
    reason: str = ""


def policy_denied(policy: str, binding: str, kind: Any, name: str,
                  denial: PolicyDenial) -> StatusError:
    """The dispatcher's refusal: admission.NewForbidden's message, the validation's reason
    (Invalid when it sets none) and the code that reason has (reasonToCode)."""
    message = (f"ValidatingAdmissionPolicy '{policy}' with binding '{binding}' denied request: "
               f"{denial.message}")
    error = forbidden(kind.group_resource, name, message)
    reason = denial.reason or "Invalid"
    code = {"Forbidden": 403, "Unauthorized": 401, "RequestEntityTooLarge": 413}.get(reason, 422)
    details = dict(error.details or {})
    details["causes"] = [*details.get("causes", []), {"message": message}]
    return StatusError(code, reason, error.message, details)


class PolicyAdmission:
    """ValidatingAdmissionPolicies and their bindings, evaluated in-process with CEL: variables
    `object`, `oldObject` (null on CREATE; `object` is null on DELETE), `request`,
    `namespaceObject`, `variables`; `params` is always null and `authorizer` is not offered
    (kubesim does not support paramKind: such a policy fails as a configuration error)."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _bound(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        policies = {stored.name: stored.obj for stored in
                    self._store.list((ADMISSION_GROUP, POLICIES))}
        bindings = sorted(self._store.list((ADMISSION_GROUP, POLICY_BINDINGS)),
                          key=lambda stored: (stored.obj.get("spec", {}).get("policyName", ""),
                                              stored.name))
        return [(policies[name], stored.obj) for stored in bindings
                if (name := (stored.obj.get("spec") or {}).get("policyName")) in policies]

    def _namespace_object(self, request: Any) -> Any:
        if not request.namespace or not request.kind.namespaced:
            return None
        stored = self._store.get(("", "namespaces"), "", request.namespace)
        return stored.obj if stored else None

    def _activation(self, request: Any) -> dict[str, Any]:
        return cel_activation(request, request.object, self._namespace_object(request))

    def validate(self, request: Any) -> None:
        kind = request.kind
        if (kind.group, kind.plural) in _EXEMPT or request.operation == "CONNECT":
            return
        bound = self._bound()
        if not bound:
            return
        namespace_labels = request_namespace_labels(self._store, request, request.object)
        activation: dict[str, Any] | None = None
        for policy, binding in bound:
            spec, binding_spec = policy.get("spec") or {}, binding.get("spec") or {}
            if not _resources_match(spec.get("matchConstraints") or {}, request,
                                    namespace_labels):
                continue
            if binding_spec.get("matchResources") and not _resources_match(
                    binding_spec["matchResources"], request, namespace_labels, binding=True):
                continue
            activation = activation or self._activation(request)
            denial = self._evaluate(spec, activation)
            if denial is None:
                continue
            policy_name = policy["metadata"]["name"]
            binding_name = binding["metadata"]["name"]
            actions = binding_spec.get("validationActions") or []
            if "Warn" in actions:
                add_warning(f"Validation failed for ValidatingAdmissionPolicy '{policy_name}' "
                            f"with binding '{binding_name}': {denial.message}")
            if "Deny" in actions:  # (Audit: kubesim keeps no audit log)
                raise policy_denied(policy_name, binding_name, kind, request.name, denial)

    def _evaluate(self, spec: Mapping[str, Any], activation: dict[str, Any]
                  ) -> PolicyDenial | None:
        """The first failed validation of the policy, None when it admits the request (or
        does not apply to it, by its matchConditions)."""
        fail = (spec.get("failurePolicy") or "Fail") == "Fail"
        if spec.get("paramKind"):
            return PolicyDenial("failed to configure policy: paramKind is not supported by "
                                "kubesim") if fail else None
        values: dict[str, Any] = {}
        activation = {**activation, "variables": cel.variables(values)}
        for variable in spec.get("variables") or []:
            values[variable["name"]] = cel.variable(variable["expression"], activation)
            activation["variables"] = cel.variables(values)
        matched_errors: list[str] = []
        for condition in spec.get("matchConditions") or []:
            try:
                if not cel.evaluate_bool(condition["expression"], activation):
                    return None  # a false condition skips the policy, errors or not
            except cel.CelError as error:
                matched_errors.append(f"failed to evaluate matchCondition "
                                      f"'{condition.get('name', '')}': {error}")
        if matched_errors:
            return PolicyDenial(matched_errors[0]) if fail else None
        for validation in spec.get("validations") or []:
            expression = validation["expression"]
            try:
                if cel.evaluate_bool(expression, activation):
                    continue
            except cel.CelError as error:
                if fail:
                    return PolicyDenial(f"expression '{expression}' resulted in error: {error}")
                continue
            return PolicyDenial(self._message(validation, activation),
                                str(validation.get("reason") or ""))
        return None

    @staticmethod
    def _message(validation: Mapping[str, Any], activation: Mapping[str, Any]) -> str:
        """messageExpression's string when it yields a non-empty one, else message, else
        `failed expression: <expression>` (validating/validator.go)."""
        if validation.get("messageExpression"):
            try:
                message = cel.evaluate_string(validation["messageExpression"], activation)
            except cel.CelError:
                message = ""
            if message.strip():
                return message
        return str(validation.get("message") or
                   f"failed expression: {validation['expression'].strip()}")


# ---------------------------------------------------------------------------------------------
# Built-in admission plugins that run before the webhooks, as in kube-apiserver's default chain

SERVICE_ACCOUNT_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
TOKEN_EXPIRATION = 3607  # kube-apiserver's default for the projected token (1 h + 7 s)
_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def service_account_volume(name: str) -> dict[str, Any]:
    """The `kube-api-access-*` projected volume the ServiceAccount plugin adds to pods."""
    return {"name": name, "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt",
                       "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
    ]}}


class ServiceAccountPlugin:
    """plugin/pkg/admission/serviceaccount on pod creation: the default service account, and
    its token mounted through a projected volume unless automounting is switched off."""

    # getServiceAccount: the default account, created asynchronously by the serviceaccount
    # controller, is looked up 10 times 100-200 ms apart before the pod is refused; others once
    DEFAULT_ACCOUNT_ATTEMPTS = 10

    def __init__(self, store: Store) -> None:
        self._store = store

    async def _service_account(self, namespace: str, name: str) -> Stored | None:
        attempts = self.DEFAULT_ACCOUNT_ATTEMPTS if name == "default" else 1
        interval = random.uniform(0.1, 0.2)
        for attempt in range(attempts):
            if attempt:
                await asyncio.sleep(interval)
            stored = self._store.get(("", "serviceaccounts"), namespace, name)
            if stored is not None:
                return stored
        return None

    async def mutate(self, request: Any, obj: Any) -> Any:
        if not _is_pod_creation(request) or not isinstance(obj, dict):
            return obj
        spec = obj.setdefault("spec", {})
        account = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = spec["serviceAccount"] = account
        stored = await self._service_account(request.namespace, account)
        if stored is None:
            name = (obj.get("metadata") or {}).get("name") or request.name
            raise forbidden("pods", name, f"error looking up service account {request.namespace}/"
                            f'{account}: serviceaccount "{account}" not found')
        automount = spec.get("automountServiceAccountToken")
        if automount is None:
            automount = stored.obj.get("automountServiceAccountToken")
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        already = any(m.get("mountPath") == SERVICE_ACCOUNT_MOUNT
                      for c in containers for m in c.get("volumeMounts") or [])
        if automount is False or already:
            return obj
        suffix = "".join(secrets.choice(_SUFFIX_ALPHABET) for _ in range(5))
        volume_name = f"kube-api-access-{suffix}"
        spec.setdefault("volumes", []).append(service_account_volume(volume_name))
        for container in containers:
            container.setdefault("volumeMounts", []).append(
                {"name": volume_name, "readOnly": True, "mountPath": SERVICE_ACCOUNT_MOUNT})
        return obj


RUNTIME_CLASSES = ("node.k8s.io", "runtimeclasses")


class RuntimeClassPlugin:
    """plugin/pkg/admission/runtimeclass on pod creation: the RuntimeClass a pod names must
    exist; its `overhead.podFixed` becomes the pod's overhead (a different one set by the pod is
    refused) and its `scheduling` is merged into the pod's nodeSelector (a conflicting value is
    refused) and tolerations. A pod naming no class may set no overhead."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def mutate(self, request: Any, obj: Any) -> Any:
        if not _is_pod_creation(request) or not isinstance(obj, dict):
            return obj
        spec = obj.setdefault("spec", {})
        name = (obj.get("metadata") or {}).get("name") or request.name
        wanted = spec.get("runtimeClassName")
        if not wanted:
            if spec.get("overhead"):
                raise forbidden("pods", name, "pod rejected: Pod Overhead set without "
                                              "corresponding RuntimeClass defined Overhead")
            return obj
        stored = self._store.get(RUNTIME_CLASSES, "", wanted)
        if stored is None:
            raise forbidden("pods", name, f'pod rejected: RuntimeClass "{wanted}" not found')
        runtime_class = stored.obj
        overhead = (runtime_class.get("overhead") or {}).get("podFixed")
        if overhead:
            if spec.get("overhead") and spec["overhead"] != overhead:
                raise forbidden("pods", name, "pod rejected: Pod's Overhead doesn't match "
                                              "RuntimeClass's defined Overhead")
            spec["overhead"] = dict(overhead)
        elif spec.get("overhead"):
            raise forbidden("pods", name, "pod rejected: Pod Overhead set without corresponding "
                                          "RuntimeClass defined Overhead")
        scheduling = runtime_class.get("scheduling") or {}
        for key, value in (scheduling.get("nodeSelector") or {}).items():
            selector = spec.setdefault("nodeSelector", {})
            if key in selector and selector[key] != value:
                raise forbidden("pods", name, f"conflict: runtimeClass.scheduling.nodeSelector"
                                              f"[{key}] = {value}; pod.spec.nodeSelector[{key}] "
                                              f"= {selector[key]}")
            selector[key] = value
        for toleration in scheduling.get("tolerations") or []:
            tolerations = spec.setdefault("tolerations", [])
            if toleration not in tolerations:
                tolerations.append(dict(toleration))
        return obj


NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


class DefaultTolerationSecondsPlugin:
    """plugin/pkg/admission/defaulttolerationseconds on pod creation: a pod that does not
    tolerate the not-ready / unreachable NoExecute taints (a toleration with that key or no key,
    and effect NoExecute or none) gets `{key, operator: Exists, effect: NoExecute,
    tolerationSeconds}` for each, not-ready first (kube-apiserver's
    --default-not-ready-toleration-seconds / --default-unreachable-toleration-seconds, 300)."""

    def __init__(self, not_ready_seconds: int = 300, unreachable_seconds: int = 300) -> None:
        self.seconds = {NOT_READY_TAINT: not_ready_seconds, UNREACHABLE_TAINT: unreachable_seconds}

    def mutate(self, request: Any, obj: Any) -> Any:
        if not _is_pod_creation(request) or not isinstance(obj, dict):
            return obj
        spec = obj.setdefault("spec", {})
        tolerations = spec.get("tolerations") or []
        for key, seconds in self.seconds.items():
            if not any(t.get("key") in (key, "", None)
                       and t.get("effect") in ("NoExecute", "", None) for t in tolerations):
                tolerations.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                                    "tolerationSeconds": seconds})
        if tolerations:
            spec["tolerations"] = tolerations
        return obj


def _is_pod_creation(request: Any) -> bool:
    return ((request.kind.group, request.kind.plural) == ("", "pods")
            and not request.subresource and request.operation == "CREATE")


class PodSecurityPlugin:
    """plugin/pkg/admission/security/podsecurity with its default configuration (every level
    privileged:latest, no exemptions): namespaces' pod-security.kubernetes.io labels are
    validated; pods are judged on creation and on updates that change what the checks see,
    whoever creates them (controllers included); workloads' pod templates only get warnings.
    `latest` means the server's own minor version."""

    def __init__(self, store: Store, server_minor: int) -> None:
        self._store = store
        self.newest = min(server_minor, podsecurity.NEWEST_POLICY)

    def _policy(self, namespace: str) -> tuple[podsecurity.Policy, bool]:
        """The namespace's policy, and whether its labels parsed."""
        stored = self._store.get(("", "namespaces"), "", namespace)
        labels = (stored.obj["metadata"].get("labels") or {}) if stored else {}
        policy, errors = podsecurity.policy_from_labels(labels)
        return policy, not errors

    def validate(self, request: Any) -> None:
        if request.operation not in ("CREATE", "UPDATE"):
            return
        resource = (request.kind.group, request.kind.plural)
        if resource == ("", "namespaces"):
            self._namespace(request)
        elif resource == ("", "pods"):
            self._pod(request)
        elif resource in podsecurity.WORKLOADS and not request.subresource:
            self._workload(request, resource)

    def _namespace(self, request: Any) -> None:
        if request.subresource:
            return
        name = request.object["metadata"].get("name", "")
        new, errors = podsecurity.policy_from_labels(request.object["metadata"].get("labels"))
        if request.operation == "CREATE":
            if errors:
                raise invalid("Namespace", name, errors)
            return
        old, old_errors = podsecurity.policy_from_labels(
            request.old_object["metadata"].get("labels"))
        if errors and [str(e) for e in errors] != [str(e) for e in old_errors]:
            raise invalid("Namespace", name, errors)
        pods = (stored.obj for stored in self._store.list(("", "pods"), name))
        for text in podsecurity.namespace_warnings(name, old, new, pods, self.newest):
            add_warning(text)

    def _pod(self, request: Any) -> None:
        if request.subresource in podsecurity.IGNORED_POD_SUBRESOURCES:
            return
        policy, parsed = self._policy(request.namespace)
        if parsed and policy == podsecurity.DEFAULT_POLICY:
            return
        if request.operation == "UPDATE" and not podsecurity.significant_pod_update(
                request.object, request.old_object):
            return
        why, warnings = podsecurity.pod_decision(policy, request.object, self.newest)
        if why is not None:
            raise forbidden("pods", request.object["metadata"].get("name", ""), why)
        for text in warnings:
            add_warning(text)

    def _workload(self, request: Any, resource: tuple[str, str]) -> None:
        policy, parsed = self._policy(request.namespace)
        if parsed and policy.warn.level == podsecurity.PRIVILEGED:
            return  # (and audit privileged: audit annotations are not kept here)
        template = podsecurity.pod_template(*resource, request.object)
        if template is not None:
            for text in podsecurity.controller_warnings(policy, template, self.newest):
                add_warning(text)


class AdmissionPlugins:
    """The cluster's admission chain in kube-apiserver's order: the built-in mutating plugins
    (ServiceAccount, DefaultTolerationSeconds, RuntimeClass), the mutating webhooks, then the
    validating
    plugins (PodSecurity, ValidatingAdmissionPolicy) before the validating webhooks, and
    ResourceQuota last."""

    def __init__(self, store: Store, default_not_ready_toleration_seconds: int = 300,
                 default_unreachable_toleration_seconds: int = 300,
                 server_minor: int = int(VERSION["minor"])) -> None:
        self.service_accounts = ServiceAccountPlugin(store)
        self.default_tolerations = DefaultTolerationSecondsPlugin(
            default_not_ready_toleration_seconds, default_unreachable_toleration_seconds)
        self.runtime_classes = RuntimeClassPlugin(store)
        self.pod_security = PodSecurityPlugin(store, server_minor)
        self.webhooks = WebhookAdmission(store)
        self.policies = PolicyAdmission(store)
        self.resource_quota = ResourceQuotaPlugin(store)

    async def mutate(self, request: Any) -> dict[str, Any] | None:
        obj = await self.service_accounts.mutate(request, request.object)
        obj = self.default_tolerations.mutate(request, obj)
        obj = self.runtime_classes.mutate(request, obj)
        if obj is not request.object:
            request = dataclasses.replace(request, object=obj)
        return await self.webhooks.mutate(request)

    async def validate(self, request: Any) -> None:
        self.pod_security.validate(request)
        self.policies.validate(request)
        await self.webhooks.validate(request)
        self.resource_quota.validate(request)

    async def close(self) -> None:
        await self.webhooks.close()
