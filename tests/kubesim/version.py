"""Which Kubernetes release the cluster under test is, for tests of behaviour that only newer
releases have: `@pytest.mark.since("1.29", "why")` skips a test on older servers."""

from __future__ import annotations

import re
from typing import Any

from tests.kubesim.rest import call

# The oldest release annex is tested against; a server that does not say its version (a
# development build answers v0.0.0) is taken to be that old, so gated tests are skipped there.
OLDEST_SUPPORTED = (1, 24)
_RELEASE = re.compile(r"^v?(\d+)\.(\d+)")
_known: dict[str, tuple[tuple[int, int], str]] = {}


def parse_release(text: str) -> tuple[int, int] | None:
    match = _RELEASE.match(text)
    if match is None or match.group(1) == "0":
        return None
    return int(match.group(1)), int(match.group(2))


def server_release(cluster: Any) -> tuple[tuple[int, int], str]:
    """(major, minor) of the cluster, and how it was found."""
    if cluster.name in _known:
        return _known[cluster.name]
    if cluster.sim is not None:
        from kubesim.version import IMITATED_RELEASE

        found = IMITATED_RELEASE, "the release kubesim imitates"
    else:
        status, info = call(cluster, "GET", "/version")
        text = info.get("gitVersion", "") if status == 200 and isinstance(info, dict) else ""
        release = parse_release(text)
        found = ((release, f"/version says {text}") if release else
                 (OLDEST_SUPPORTED, f"/version says {text or 'nothing'}: taken as the oldest "
                                    "supported release"))
    _known[cluster.name] = found
    return found


def release_text(release: tuple[int, int]) -> str:
    return f"v{release[0]}.{release[1]}"


def at_least(cluster: Any, release: tuple[int, int]) -> bool:
    """Whether the cluster is that release or newer (for an assertion whose wording changed)."""
    return server_release(cluster)[0] >= release
