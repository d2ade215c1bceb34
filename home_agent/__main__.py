"""Entry point: `python -m home_agent --remote-kubeconfig PATH --cluster-id HOME_ID
--remote-cluster-id REMOTE_ID [...]` (see `--help`)."""

from __future__ import annotations

import logging
import sys

from annex import eventloop
from annex.logs import configure_logging
from home_agent.config import parse_config


def main(argv: list[str] | None = None) -> int:
    config = parse_config(argv)
    configure_logging("json" if config.log_format == "json" else "text", config.log_level)
    # kopf reports every successful event handler at INFO: one line per watch event.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    eventloop.install()
    from home_agent.runner import run  # after logging is set up: kopf logs at import

    return run(config)


if __name__ == "__main__":
    sys.exit(main())
