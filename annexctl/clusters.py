"""Connections to the home and provider clusters, and the few generic operations the commands
share (get, list, create-or-patch, delete), with every failure turned into a `CliError` whose
message says which cluster and what went wrong (a CLI prints it; it never shows a traceback).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.config.config_exception import ConfigException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ResourceNotFoundError
from kubernetes.dynamic.resource import Resource

from annex.kube import user_agent
from shared.api.resource import ResourceDefinition

# A CLI waits a bounded time on a cluster that does not answer, and does not retry for long.
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0
FIELD_MANAGER = "annexctl"

# Exit codes: 1 for a failed operation, 2 for a usage error (argparse's), and these two so that
# scripts can tell "try again later" from "fix your setup".
EXIT_FAILED = 1
EXIT_UNREACHABLE = 3
EXIT_NOT_INSTALLED = 4


class CliError(Exception):
    """A failure to report in one line, with the process exit code."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _server_message(error: client.ApiException) -> str:
    """The API server's own message from its Status body (what kubectl shows)."""
    try:
        status = json.loads(error.body or "{}")
    except (TypeError, ValueError):
        status = {}
    message = status.get("message") if isinstance(status, dict) else None
    return str(message or error.reason or error)


def discovered(api_client: client.ApiClient) -> DynamicClient:
    """The cluster's APIs as this process discovers them. Not through the client library's
    default cache, a file per server address shared by every process: a cluster made again at
    the same address (a kind or test cluster) would be read as the one before it, with its
    CRDs, and a write to one it lacks would fail as "could not find the requested resource"
    instead of saying what is not installed."""
    directory = tempfile.mkdtemp(prefix="annex-discovery-")
    dynamic = DynamicClient(  # type: ignore[no-untyped-call]
        api_client, cache_file=os.path.join(directory, "discovery.json"))
    weakref.finalize(dynamic, shutil.rmtree, directory, True)
    return dynamic


@dataclass
class Cluster:
    """One cluster, reached through a kubeconfig and context; `role` names it in messages."""

    role: str
    kubeconfig: str
    context: str | None
    configuration: client.Configuration
    api_client: client.ApiClient
    _dynamic: DynamicClient | None = None

    @property
    def where(self) -> str:
        context = f" (context {self.context})" if self.context else ""
        return f"{self.role} cluster {self.configuration.host}{context}"

    @contextmanager
    def talking(self, doing: str) -> Iterator[None]:
        """Translate what can go wrong while `doing` something into a CliError."""
        try:
            yield
        except CliError:
            raise
        except ResourceNotFoundError as error:
            raise CliError(
                f"{self.where}: {doing}: the API is not served ({error}); "
                "are annex's CRDs installed (the charts install them)?",
                EXIT_NOT_INSTALLED,
            ) from None
        except client.ApiException as error:
            if error.status in (401, 403):
                hint = " (is the kubeconfig's user allowed to do this?)"
            else:
                hint = ""
            raise CliError(f"{self.where}: {doing}: {_server_message(error)}{hint}") from None
        except (urllib3.exceptions.HTTPError, OSError) as error:
            reason = getattr(error, "reason", None) or error
            raise CliError(
                f"{self.where} is unreachable: {doing}: {reason}", EXIT_UNREACHABLE
            ) from None

    @property
    def dynamic(self) -> DynamicClient:
        """The cluster's APIs as this run discovers them (`discovered`)."""
        if self._dynamic is None:
            with self.talking("reading the served APIs"):
                self._dynamic = discovered(self.api_client)
        return self._dynamic

    def resource(self, api_version: str, kind: str) -> Resource:
        with self.talking(f"finding {kind} ({api_version})"):
            found: Resource = self.dynamic.resources.get(api_version=api_version, kind=kind)
        return found

    def custom(self, definition: ResourceDefinition) -> Resource:
        return self.resource(definition.api_version, definition.kind)

    # --- reads ------------------------------------------------------------------------------

    def get(self, api_version: str, kind: str, name: str,
            namespace: str | None = None) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        resource = self.resource(api_version, kind)
        with self.talking(f"reading {kind} {_ref(namespace, name)}"):
            try:
                return dict(resource.get(name=name, namespace=namespace).to_dict())
            except client.ApiException as error:
                if error.status == 404:
                    return None
                raise

    def list(self, api_version: str, kind: str, namespace: str | None = None,
             **selectors: str) -> list[dict[str, Any]]:
        resource = self.resource(api_version, kind)
        with self.talking(f"listing {resource.name}"):
            items = resource.get(namespace=namespace, **selectors).to_dict().get("items") or []
        return [dict(item) for item in items]

    # --- writes -----------------------------------------------------------------------------

    def ensure(self, manifest: dict[str, Any]) -> str:
        """Create the object, or patch the fields `manifest` sets where they differ; returns
        "created", "configured" or "unchanged" (kubectl apply's words). No write when nothing
        differs."""
        kind, metadata = manifest["kind"], manifest["metadata"]
        namespace = metadata.get("namespace")
        resource = self.resource(manifest["apiVersion"], kind)
        what = f"{kind} {_ref(namespace, metadata['name'])}"
        with self.talking(f"creating {what}"):
            try:
                resource.create(body=manifest, namespace=namespace,
                                field_manager=FIELD_MANAGER)
                return "created"
            except client.ApiException as error:
                if error.status != 409:
                    raise
        current = self.get(manifest["apiVersion"], kind, metadata["name"], namespace)
        patch = merge_patch(current or {}, manifest)
        if not patch:
            return "unchanged"
        with self.talking(f"updating {what}"):
            resource.patch(body=patch, name=metadata["name"], namespace=namespace,
                           content_type="application/merge-patch+json",
                           field_manager=FIELD_MANAGER)
        return "configured"

    def patch(self, api_version: str, kind: str, name: str, namespace: str | None,
              body: dict[str, Any]) -> None:
        """A JSON merge patch of the object (a resourceVersion in `body` guards it)."""
        resource = self.resource(api_version, kind)
        with self.talking(f"updating {kind} {_ref(namespace, name)}"):
            resource.patch(body=body, name=name, namespace=namespace,
                           content_type="application/merge-patch+json",
                           field_manager=FIELD_MANAGER)

    def delete(self, api_version: str, kind: str, name: str,
               namespace: str | None = None) -> bool:
        """Delete the object; False when it was not there."""
        resource = self.resource(api_version, kind)
        with self.talking(f"deleting {kind} {_ref(namespace, name)}"):
            try:
                resource.delete(name=name, namespace=namespace)
                return True
            except client.ApiException as error:
                if error.status == 404:
                    return False
                raise

    def close(self) -> None:
        self.api_client.close()  # type: ignore[no-untyped-call]


_SAME = object()


def _absent(value: Any) -> bool:
    return value is None or value == {} or value == []  # the wire omits empty maps and lists


def _diff(have: Any, wanted: Any, exact: bool) -> Any:
    """The merge patch turning `have` into `wanted` (_SAME when equal). Exact: keys `wanted`
    lacks are removed (null); otherwise they are left alone."""
    if not (isinstance(have, dict) and isinstance(wanted, dict)):
        return _SAME if have == wanted else wanted
    patch: dict[str, Any] = {}
    for key, value in wanted.items():
        if key not in have:
            if not _absent(value):
                patch[key] = value
            continue
        nested = _diff(have[key], value, exact)
        if nested is not _SAME:
            patch[key] = nested
    if exact:
        patch.update({key: None for key in have.keys() - wanted.keys()})
    return patch or _SAME


def merge_patch(current: dict[str, Any], desired: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch (RFC 7386) that makes `current` what `desired` says, empty when
    nothing differs. Metadata is merged (labels and annotations others set are kept); every
    other field of `desired` (spec, rules, subjects, data...) is ours and set exactly."""
    patch: dict[str, Any] = {}
    for key, wanted in desired.items():
        if key in ("apiVersion", "kind", "status") or (key not in current and _absent(wanted)):
            continue
        nested = _diff(current.get(key), wanted, exact=key != "metadata")
        if nested is not _SAME:
            patch[key] = nested
    return patch


def _ref(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def default_kubeconfig() -> str:
    """kubectl's choice: the first file of $KUBECONFIG, else ~/.kube/config."""
    paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return paths[0] if paths else os.path.expanduser(config.KUBE_CONFIG_DEFAULT_LOCATION)


def connect(role: str, kubeconfig: str | None, context: str | None = None, *,
            contents: dict[str, Any] | None = None) -> Cluster:
    """A client for the cluster `kubeconfig`/`context` names (or the kubeconfig `contents`);
    CliError when the file is missing or unusable (no request is made yet: an unreachable
    server shows on first use)."""
    path = kubeconfig or ("<secret>" if contents is not None else default_kubeconfig())
    if kubeconfig is None and contents is None and not os.path.exists(path) and (
            os.environ.get("KUBERNETES_SERVICE_HOST")):
        return _in_cluster(role)
    if contents is None and not os.path.exists(path):
        raise CliError(f"{role} kubeconfig {path}: no such file")
    configuration = client.Configuration()
    try:
        if contents is not None:
            config.load_kube_config_from_dict(  # type: ignore[no-untyped-call]
                contents, context=context, client_configuration=configuration,
                persist_config=False)
        else:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context, client_configuration=configuration,
                persist_config=False)
    except FileNotFoundError:
        raise CliError(f"{role} kubeconfig {path}: no such file") from None
    except (ConfigException, yaml.YAMLError, ValueError, TypeError, KeyError,
            AttributeError) as error:
        raise CliError(f"{role} kubeconfig {path}: {error}") from None
    return _client(role, path, context, configuration)


def _in_cluster(role: str) -> Cluster:
    """In a pod without a kubeconfig (a chart's hook Job): its ServiceAccount, as kubectl
    does."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(  # type: ignore[no-untyped-call]
            client_configuration=configuration)
    except ConfigException as error:
        raise CliError(f"{role}: no kubeconfig and no in-cluster service account: {error}"
                       ) from None
    return _client(role, "<in-cluster>", None, configuration)


def _client(role: str, path: str, context: str | None,
            configuration: client.Configuration) -> Cluster:
    configuration.retries = 1
    api_client = client.ApiClient(configuration)
    api_client.user_agent = user_agent(FIELD_MANAGER)  # client-go's form, as kubectl sends
    # The generated client sets no default timeout: a silent server would hang the CLI.
    api_client.rest_client.pool_manager.connection_pool_kw["timeout"] = urllib3.Timeout(
        connect=CONNECT_TIMEOUT_SECONDS, read=READ_TIMEOUT_SECONDS)
    return Cluster(role, path, context, configuration, api_client)
