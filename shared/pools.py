"""Node pools: a provider's offer split by node selector (a GPU pool and a general one, one pool
per zone), each offered on its own, each the consumer's own virtual node. Pure: the enforcer
feeds in its `--offer-pool` flags, nodes and ShadowPods.

A pod of a pool runs on that pool's nodes only: the enforcer ANDs the pool's node selector into
the remote pod's required node affinity (`placed`), whatever the ShadowPod asks. Nothing the
consumer sends widens it: its own affinity is kept and narrowed, never replaced, and once the
provider declares pools a ShadowPod naming none runs on some pool's nodes, never elsewhere.
A provider may lend a consumer only some of its pools (its Quota's `pools`): that consumer's
offer lists those, and its ShadowPods run in those only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
NAME_MAX = 20
"""A pool's name goes into its virtual node's name (`liqo-<provider>-<pool>`): kept short."""


@dataclass(frozen=True)
class Pool:
    """The nodes whose labels hold every pair of `selector`."""

    name: str
    selector: tuple[tuple[str, str], ...]

    def holds(self, node: Mapping[str, Any]) -> bool:
        labels = (node.get("metadata") or {}).get("labels") or {}
        return all(labels.get(key) == value for key, value in self.selector)

    def nodes(self, nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [node for node in nodes if self.holds(node)]

    def term(self) -> dict[str, Any]:
        """The pool as one nodeSelectorTerm (requirements ANDed)."""
        return {"matchExpressions": [{"key": key, "operator": "In", "values": [value]}
                                     for key, value in self.selector]}


def is_pool_name(name: str) -> bool:
    """Whether `name` may name a pool: lower-case letters, digits and '-', at most NAME_MAX."""
    return bool(_NAME.fullmatch(name)) and len(name) <= NAME_MAX


def parse_pool(text: str) -> Pool:
    """`NAME=KEY=VALUE[,KEY=VALUE...]`, e.g. `gpu=nvidia.com/gpu.present=true`."""
    name, _, selector = text.partition("=")
    if not is_pool_name(name):
        raise ValueError(f"pool name {name!r}: lower-case letters, digits and '-', at most "
                         f"{NAME_MAX} characters")
    pairs = []
    for item in selector.split(","):
        key, equals, value = item.partition("=")
        if not equals or not key:
            raise ValueError(f"pool {name}: {item!r} is not KEY=VALUE")
        pairs.append((key, value))
    return Pool(name, tuple(pairs))


def flag_pool_names(args: Sequence[str]) -> list[str]:
    """The names of the pools a command line declares (`--offer-pool NAME=...` or
    `--offer-pool=NAME=...`, as the remote-enforcer chart writes them)."""
    texts = [arg.removeprefix("--offer-pool=") for arg in args
             if arg.startswith("--offer-pool=")]
    texts += [value for flag, value in zip(args, args[1:], strict=False)
              if flag == "--offer-pool"]
    return [text.partition("=")[0] for text in texts]


def check_pools(pools: Sequence[Pool]) -> None:
    names = [pool.name for pool in pools]
    if len(set(names)) != len(names):
        raise ValueError(f"pool names repeat: {', '.join(names)}")


def lent_pools(pools: Sequence[Pool], lent: Sequence[str] | None) -> list[Pool]:
    """The pools a consumer is lent: those of `pools` its Quota's `pools` names (None: every
    pool)."""
    return list(pools) if lent is None else [pool for pool in pools if pool.name in lent]


def undeclared_pools(pools: Sequence[Pool], lent: Sequence[str] | None) -> list[str]:
    """The names of a Quota's `pools` that are no pool of the provider's: they lend nothing."""
    declared = {pool.name for pool in pools}
    return [name for name in lent or () if name not in declared]


def pool_problem(pools: Sequence[Pool], shadowpod: Mapping[str, Any],
                 old: Mapping[str, Any] | None = None,
                 lent: Sequence[str] | None = None) -> str | None:
    """Why the ShadowPod's `spec.pool` is refused, or None: a new ShadowPod names a pool
    declared and lent to its consumer (`lent`, its Quota's `pools`; None: every pool), or none
    while the consumer is lent some pool; an update keeps the pool it had (a pod's affinity
    cannot change), even one the provider no longer declares or lends, so that its labels and
    images still follow."""
    name = (shadowpod.get("spec") or {}).get("pool")
    if old is not None:
        if name != (old.get("spec") or {}).get("pool"):
            return "spec.pool: Forbidden: the pool of a ShadowPod cannot change"
        return None
    lent_names = [pool.name for pool in lent_pools(pools, lent)]
    if pools and not lent_names:  # with no pool to put it in, a pod would run anywhere
        return (f"spec.pool: Forbidden: this consumer is lent none of this provider's pools "
                f"(its Quota's spec.pools: {', '.join(lent or ())})")
    if name is None or name in lent_names:
        return None
    if any(pool.name == name for pool in pools):
        return (f"spec.pool: Forbidden: pool {name!r} is not lent to this consumer (its "
                f"Quota's spec.pools: {', '.join(lent_names)})")
    declared = ", ".join(pool.name for pool in pools) or "none"
    return f"spec.pool: Unsupported value {name!r}: this provider's pools are {declared}"


def placement(pools: Sequence[Pool], name: str | None) -> list[Pool]:
    """The pools a ShadowPod's pod may run in: the one it names, else every declared pool (a
    name no longer declared too: never wider than the pools); none declared: anywhere, an empty
    list."""
    named = [pool for pool in pools if pool.name == name]
    return named or list(pools)


def placed(pod_spec: Mapping[str, Any], pools: Sequence[Pool]) -> dict[str, Any]:
    """`pod_spec` whose required node affinity is its own ANDed with "in one of `pools`": each
    of its terms (ORed) gains each pool's requirements, one term per (term, pool). No pools:
    the spec unchanged. A new spec, sharing with `pod_spec` the parts it leaves as they were."""
    spec = dict(pod_spec)
    if not pools:
        return spec
    affinity = spec["affinity"] = dict(spec.get("affinity") or {})
    node_affinity = affinity["nodeAffinity"] = dict(affinity.get("nodeAffinity") or {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = required.get("nodeSelectorTerms") or [{}]
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [_and(term, pool.term()) for term in terms for pool in pools]}
    return spec


def _and(term: Mapping[str, Any], pool_term: Mapping[str, Any]) -> dict[str, Any]:
    both = dict(term)
    both["matchExpressions"] = [*(term.get("matchExpressions") or []),
                                *pool_term["matchExpressions"]]
    return both
