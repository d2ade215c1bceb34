"""Entry point: `python -m kubesim up --dir DIR NAME [NAME ...]` (being implemented)."""

import sys


def main(argv: list[str] | None = None) -> int:
    print("usage: python -m kubesim up --dir DIR NAME [NAME ...]", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
