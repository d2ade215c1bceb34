"""The README's commands keep working: every command of its shell blocks (and the commands it
quotes inline) is checked against what it runs — annexctl's, the components', kubesim's and the
demo's argument parsers accept the documented flags, the pip extras exist, the helm commands
name existing charts with values their schema accepts and that render, upgrades and uninstalls
name the releases installed, the image tag is the charts' image, and the CRDs kubectl deletes
are annex's. The demo itself runs in tests/demo/test_demo.py."""

from __future__ import annotations

import argparse
import re
import shlex
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.charts.helm import render, schema_error

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# What a command can be checked against here; kind and a shell assignment cannot.
UNCHECKED = {"kind"}


def parsers() -> dict[str, Callable[[], argparse.ArgumentParser]]:
    from annex_demo.__main__ import build_parser as demo_parser
    from annexctl.cli import build_parser as annexctl_parser
    from home_agent.config import build_parser as home_agent_parser
    from home_controller.settings import parser as home_controller_parser
    from remote_enforcer.settings import parser as remote_enforcer_parser

    return {"annexctl": annexctl_parser, "annex-demo": demo_parser,
            "home_agent": home_agent_parser, "home_controller": home_controller_parser,
            "remote_enforcer": remote_enforcer_parser}


def commands() -> Iterator[list[str]]:
    """Each command of the README's shell blocks and inline code, split as a shell would
    (placeholders such as `<a web pod>` become one word)."""
    blocks = re.findall(r"```sh\n(.*?)```", README, re.DOTALL)
    inline = re.findall(r"`((?:annexctl|annex-demo|python -m) [^`\n]*)`", README)
    for text in [*blocks, *inline]:
        for line in text.replace("\\\n", " ").splitlines():
            words = shlex.split(re.sub(r"<[^>]+>", "PLACEHOLDER", line), comments=True)
            while words:
                command = words[:words.index("&&")] if "&&" in words else words
                words = words[len(command) + 1:]
                if command:
                    yield command


def option(words: list[str], *names: str) -> str | None:
    for number, word in enumerate(words):
        if word in names and number + 1 < len(words):
            return words[number + 1]
    return None


def set_values(words: list[str]) -> dict[str, Any]:
    """`--set a.b[0].c=v` as helm reads it (true/false and integers typed)."""
    values: dict[str, Any] = {}
    for number, word in enumerate(words[:-1]):
        if word != "--set":
            continue
        path, _, text = words[number + 1].partition("=")
        value: Any = {"true": True, "false": False}.get(text, int(text) if text.isdigit()
                                                       else text)
        keys: list[str | int] = [int(k) if k.isdigit() else k
                                 for k in re.findall(r"[^.\[\]]+", path)]
        node: Any = values
        for key, following in zip(keys, keys[1:], strict=False):
            empty: Any = [] if isinstance(following, int) else {}
            if isinstance(key, int):
                while len(node) <= key:
                    node.append(empty)
                node = node[key]
            else:
                node = node.setdefault(key, empty)
        if isinstance(keys[-1], int):
            node.append(value)
        else:
            node[keys[-1]] = value
    return values


def test_the_readme_has_the_commands_checked_here() -> None:
    tools = {command[0] for command in commands()}
    assert {"pip", "annexctl", "helm", "kubectl", "docker", "python", "annex-demo"} <= tools


def test_every_annexctl_component_and_demo_command_parses() -> None:
    known = parsers()
    refused = []
    for command in commands():
        name = command[2] if command[:2] == ["python", "-m"] else command[0]
        args = command[3:] if command[:2] == ["python", "-m"] else command[1:]
        if name == "kubesim":
            from kubesim.__main__ import UsageError, parse
            try:
                parse(args)
            except UsageError as error:
                refused.append(f"{shlex.join(command)}: {error}")
            continue
        if name not in known:
            continue
        try:
            known[name]().parse_args(args)
        except SystemExit:
            refused.append(shlex.join(command))
    assert not refused, "the README documents commands their parsers refuse:\n" + \
        "\n".join(refused)


def test_every_pip_install_names_existing_extras() -> None:
    extras = set(PYPROJECT["project"]["optional-dependencies"])
    installs = [command for command in commands() if command[:2] == ["pip", "install"]]
    assert installs
    for command in installs:
        for word in command[2:]:
            if word.startswith("."):
                asked = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", word)
                assert asked, word
                assert set(filter(None, (asked[1] or "").split(","))) <= extras, word


def test_the_image_built_is_the_charts_image() -> None:
    images = {option(c, "-t") for c in commands() if c[:2] == ["docker", "build"]}
    images |= {c[3] for c in commands() if c[:3] == ["kind", "load", "docker-image"]}
    for chart in ("home-agent", "remote-enforcer"):
        values = yaml.safe_load((ROOT / "charts" / chart / "values.yaml").read_text())
        version = yaml.safe_load((ROOT / "charts" / chart / "Chart.yaml").read_text())[
            "appVersion"]
        assert images == {f"{values['image']['repository']}:{version}"}


def helm_commands(verb: str) -> list[list[str]]:
    return [c for c in commands() if c[:2] == ["helm", verb]]


def release(command: list[str]) -> tuple[str, str | None, str | None]:
    return (command[2], option(command, "--kube-context"), option(command, "-n", "--namespace"))


@pytest.mark.parametrize("command", helm_commands("install"), ids=shlex.join)
def test_each_helm_install_renders_with_the_values_it_sets(command: list[str]) -> None:
    chart = ROOT / command[3]
    assert (chart / "Chart.yaml").exists(), command[3]
    values = set_values(command)
    assert schema_error(chart, values) is None
    assert render(chart, values, release=command[2],
                  namespace=option(command, "-n", "--namespace") or "default")


def test_upgrades_and_uninstalls_name_the_releases_installed() -> None:
    installed = {release(c): c[3] for c in helm_commands("install")}
    upgrades, uninstalls = helm_commands("upgrade"), helm_commands("uninstall")
    assert upgrades and uninstalls
    for command in upgrades:
        assert installed.get(release(command)) == command[3], shlex.join(command)
    assert {release(c) for c in uninstalls} == set(installed)


def test_the_crds_kubectl_deletes_are_those_the_chart_of_that_cluster_installs() -> None:
    chart_of = {option(c, "--kube-context"): c[3] for c in helm_commands("install")}
    deletes = [c for c in commands() if c[0] == "kubectl" and "delete" in c and "crd" in c]
    assert {option(c, "--context") for c in deletes} == set(chart_of)
    for command in deletes:
        chart = ROOT / chart_of[option(command, "--context")]
        installed = {yaml.safe_load(path.read_text())["metadata"]["name"]
                     for path in (chart / "files" / "crds").glob("*.yaml")}
        assert sorted(command[command.index("crd") + 1:]) == sorted(installed), \
            shlex.join(command)


def test_only_tools_outside_the_repository_are_left_unchecked() -> None:
    checked = {"pip", "annexctl", "annex-demo", "python", "helm", "kubectl", "docker"}
    for command in commands():
        if "=" in command[0]:  # a shell assignment
            continue
        assert command[0] in checked | UNCHECKED, f"add a check for {shlex.join(command)}"
