"""The twin namespaces as this consumer's NamespaceMap says them: which home namespace has which
twin, asked for (where its ShadowPods and copies may be) or accepted by the enforcer (where
they are made)."""

from __future__ import annotations

from annex.mirror import Mirror
from shared.api.namespace_map import MappingPhase, NamespaceMap


class TwinNamespaces:
    """A view of the NamespaceMap `map_name` in `tenant_namespace`, as `namespace_maps` (the
    agent's mirror) holds it, parsed once per change of that mirror: every reconcile asks it."""

    def __init__(self, namespace_maps: Mirror, tenant_namespace: str, map_name: str) -> None:
        self._namespace_maps = namespace_maps
        self._key = (tenant_namespace, map_name)
        self._parsed: tuple[int, NamespaceMap | None] | None = None

    def namespace_map(self) -> NamespaceMap | None:
        # The version is read before the mirror: a map parsed from an older mirror is never used.
        version = self._namespace_maps.version
        if self._parsed is None or self._parsed[0] != version:
            obj = self._namespace_maps.get(self._key)
            self._parsed = (version,
                            NamespaceMap.model_validate(obj) if obj is not None else None)
        return self._parsed[1]

    def accepted(self, namespace: str) -> str | None:
        """The twin namespace of `namespace` once the enforcer accepted it, else None."""
        namespace_map = self.namespace_map()
        if namespace_map is None:
            return None
        desired = namespace_map.spec.desired_mapping.get(namespace)
        current = namespace_map.status.current_mapping.get(namespace)
        if desired is None or current is None:
            return None
        if current.phase != MappingPhase.ACCEPTED or current.remote_namespace != desired:
            return None
        return desired

    def mapped(self, namespace: str) -> str | None:
        """The twin namespace requested for `namespace`, accepted or not (where its
        ShadowPods may be)."""
        return self._desired_mapping().get(namespace)

    def _desired_mapping(self) -> dict[str, str]:
        namespace_map = self.namespace_map()
        return namespace_map.spec.desired_mapping if namespace_map is not None else {}

    def accepted_twins(self) -> frozenset[str]:
        """The twin namespaces the enforcer accepted: where our ShadowPods live."""
        return frozenset(namespace for home in self._desired_mapping()
                         if (namespace := self.accepted(home)) is not None)

    def home_of(self, remote_namespace: str) -> str | None:
        """The home namespace whose twin `remote_namespace` is requested to be."""
        return next((home for home, remote in self._desired_mapping().items()
                     if remote == remote_namespace), None)
