"""The distribution, the three `python -m` entry points, the README's two commands
and what `.ci/run` runs. (No cluster involved: these hold whatever backend the suite targets.)"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()
TEST_COMMAND = 'pip install -e ".[test]" && python -m pytest -n 2 --dist loadfile'


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].lower() for r in requirements}


def test_one_distribution_with_the_four_packages_and_runtime_dependencies() -> None:
    project = PYPROJECT["project"]
    assert project["name"] == "kube-annex"
    assert project["requires-python"] == ">=3.11"
    assert {"kubernetes", "kopf", "pydantic", "msgpack", "redis"} <= requirement_names(
        project["dependencies"])
    assert "pytest" in requirement_names(project["optional-dependencies"]["test"])
    included = PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
    for package in ("shared", "home_agent", "remote_enforcer", "kubesim"):
        assert f"{package}*" in included


@pytest.mark.parametrize("module", ["home_agent", "remote_enforcer", "kubesim"])
def test_each_component_runs_with_python_dash_m_and_prints_its_usage(module: str) -> None:
    done = subprocess.run([sys.executable, "-m", module, "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert f"python -m {module}" in done.stdout + done.stderr


def test_the_readme_gives_the_demo_and_the_test_command() -> None:
    blocks = re.findall(r"```sh\n(.*?)```", README, re.S)
    # the first command installs annex and runs the local demo on simulated clusters
    assert blocks[0].strip() == 'pip install -e ".[demo]" && annex-demo'
    assert "annex-demo" in PYPROJECT["project"]["scripts"]
    assert any(b.strip() == TEST_COMMAND for b in blocks)


def test_ci_installs_then_runs_the_readme_test_command_and_the_static_checks() -> None:
    assert CI.startswith("#!/usr/bin/env bash") and "set -euo pipefail" in CI
    assert TEST_COMMAND in CI.splitlines()
    for check in ("ruff check .", "mypy", "lint-imports"):
        assert any(line.rstrip().endswith(check) for line in CI.splitlines()), check
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111  # executable


def test_mypy_is_strict_on_shared_and_shared_imports_no_io_library() -> None:
    overrides = PYPROJECT["tool"]["mypy"]["overrides"]
    assert any("shared.*" in ([o["module"]] if isinstance(o["module"], str) else o["module"])
               and o.get("strict") for o in overrides)
    contracts = PYPROJECT["tool"]["importlinter"]["contracts"]
    forbidden = {m for c in contracts if c["type"] == "forbidden"
                 and c["source_modules"] == ["shared"] for m in c["forbidden_modules"]}
    assert {"kopf", "kubernetes", "redis", "aiohttp"} <= forbidden
