"""Version gates: tests of behaviour a Kubernetes release introduced are skipped on older
servers (`@pytest.mark.since("1.29", "TokenRequest tokens carry a jti claim")`)."""

from __future__ import annotations

import pytest

from tests.kubesim.version import parse_release, release_text, server_release


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "since(release, why): behaviour introduced in that Kubernetes release; "
                   "skipped against older servers")


@pytest.fixture(autouse=True)
def _skip_before_the_release(request: pytest.FixtureRequest) -> None:
    marker = request.node.get_closest_marker("since")
    if marker is None:
        return
    wanted = parse_release(marker.args[0])
    assert wanted is not None, f"since({marker.args[0]!r}): not a release"
    release, how = server_release(request.getfixturevalue("home"))
    if release < wanted:
        pytest.skip(f"needs Kubernetes {release_text(wanted)} ({marker.args[1]}); the server is "
                    f"{release_text(release)} ({how})")
