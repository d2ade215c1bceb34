"""docs/configuration.md is exactly what scripts/generate_config_reference.py generates from
the components' argument parsers and the charts' values, and it names every flag and value."""

from __future__ import annotations

import argparse
import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

ROOT = Path(__file__).resolve().parents[2]
REGENERATE = "stale: run `python scripts/generate_config_reference.py` and commit the page"


@functools.cache
def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "generate_config_reference", ROOT / "scripts" / "generate_config_reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_committed_reference_is_what_the_generator_writes() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == generator().reference(), f"docs/configuration.md is {REGENERATE}"


def help_options(parser: argparse.ArgumentParser) -> set[str]:
    """The options `--help` lists (each on a line of its own: `  -h, --help  ...`,
    `  --workers WORKERS`), but --help."""
    options = set()
    for line in parser.format_help().splitlines():
        if line.startswith("  -"):
            names = line.strip().split("  ")[0]
            options |= {name.split(" ")[0] for name in names.split(", ")}
    return options - {"-h", "--help"}


def test_every_flag_of_the_components_is_documented() -> None:
    """Every option `--help` lists is in the page, and the generator read each of them from the
    parser's declarations (none it declares some other way is left out)."""
    from home_agent.config import build_parser
    from home_controller.settings import parser as home_controller_parser
    from remote_enforcer.settings import parser

    reference = generator().reference()
    for build in (build_parser, home_controller_parser, parser):
        component, flags = generator().declared_flags(build)
        listed = help_options(component)
        assert "--log-level" in listed
        assert listed == {option for flag in flags for option in flag.action.option_strings}
        for option in listed:
            assert f"`{option}`" in reference, f"{component.prog} {option} missing"


def test_every_chart_value_is_documented_with_its_default() -> None:
    reference = generator().reference()

    def leaves(node: dict[str, object], prefix: str = "") -> list[tuple[str, object]]:
        found: list[tuple[str, object]] = []
        for key, value in node.items():
            if isinstance(value, dict) and value:
                found += leaves(value, f"{prefix}{key}.")
            else:
                found.append((f"{prefix}{key}", value))
        return found

    for chart in ("home-agent", "remote-enforcer"):
        values = yaml.safe_load((ROOT / "charts" / chart / "values.yaml").read_text())
        for key, _ in leaves(values):
            assert f"| `{key}` |" in reference, f"{chart}: {key} missing"
    assert "| `remotes[].kubeconfigSecret` | string |" in reference
    assert "| `webhook.failurePolicy` | `Ignore` \\| `Fail` | `\"Ignore\"` |" in reference


def test_a_comment_block_above_a_nested_key_describes_it_not_the_key_before() -> None:
    comments = generator().value_comments(
        "quota:\n"
        "  cordoned: false\n"
        "  # What the pods may do.\n"
        "  podPolicy:\n"
        "    podSecurity: baseline\n"
        "consumers: []\n"
        "#  - clusterId: home-1\n"
        "\n"
        "resources: {}\n")
    assert comments["quota.cordoned"].example == ""
    assert comments["quota.podPolicy"].text == "What the pods may do."
    assert comments["consumers"].example == "  - clusterId: home-1"
