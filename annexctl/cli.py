"""Command-line entry point (being written: issue 9)."""


def main(argv: list[str] | None = None) -> int:
    return 0
