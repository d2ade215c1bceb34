"""Entry point: `python -m remote_enforcer` (not implemented yet: see its issue)."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("usage: python -m remote_enforcer --help  (this component is not implemented yet)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
