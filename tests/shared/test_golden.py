"""Runs every golden case under tests/shared/golden (see golden.py for the format)."""

from pathlib import Path

import pytest

from tests.shared.golden import load_cases, run_case


@pytest.mark.parametrize("path", load_cases())
def test_golden_case(path: Path) -> None:
    run_case(path)
