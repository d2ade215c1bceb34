"""Entry point: `python -m home_agent` (not implemented yet: see its issue)."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("usage: python -m home_agent --help  (this component is not implemented yet)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
