"""``python -m annexctl`` runs the console script."""

from annexctl.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
