"""``annex-demo`` / ``python -m annex_demo``."""


def main() -> None:
    raise SystemExit("annex-demo: not implemented yet")


if __name__ == "__main__":
    main()
