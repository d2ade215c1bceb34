"""How tests find the Kubernetes release under test (the `since` gates rely on it)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kubesim.version import IMITATED_RELEASE
from tests.kubesim.version import OLDEST_SUPPORTED, parse_release, server_release


@pytest.mark.parametrize(("text", "release"), [
    ("v1.24.17", (1, 24)), ("v1.31.0-kubesim", (1, 31)), ("v1.29.3+k3s1", (1, 29)),
    ("v0.0.0-master+$Format:%H$", None), ("", None), ("unknown", None)])
def test_a_git_version_names_its_release(text: str, release: tuple[int, int] | None) -> None:
    assert parse_release(text) == release


def test_kubesim_is_the_release_it_imitates(home) -> None:
    if home.sim is None:
        pytest.skip("kubesim only: a real server is what its /version says")
    assert server_release(home)[0] == IMITATED_RELEASE


def test_a_server_without_a_version_is_taken_as_the_oldest_supported(monkeypatch) -> None:
    import tests.kubesim.version as version

    monkeypatch.setattr(version, "call", lambda *_: (200, {"gitVersion": "v0.0.0-master"}))
    monkeypatch.setattr(version, "_known", {})
    release, how = server_release(SimpleNamespace(name="dev", sim=None))
    assert release == OLDEST_SUPPORTED and "v0.0.0-master" in how
