"""Runs every golden case under tests/shared/golden (see golden.py for the format)."""

import re
from pathlib import Path

import pytest
import yaml

from tests.shared.golden import call, load_cases


@pytest.mark.parametrize("path", load_cases())
def test_golden_case(path: Path) -> None:
    """The case's function returns its `expected`, or raises its `raises` matching `match`."""
    case = yaml.safe_load(path.read_text())
    if "raises" not in case:
        assert call(case) == case["expected"], case.get("description", path.name)
        return
    with pytest.raises(Exception) as raised:
        call(case)
    assert type(raised.value).__name__ == case["raises"], raised.value
    assert re.search(case.get("match", ""), str(raised.value)), str(raised.value)
