"""Entry point: `python -m home_agent --remote-kubeconfig PATH --cluster-id HOME_ID
--remote-cluster-id REMOTE_ID [...]` (see `--help`)."""

from __future__ import annotations

import sys

from annex import collector, eventloop, tracing
from annex.kube import name_component
from annex.logs import configure_logging
from home_agent.config import parse_config
from home_agent.runner import run


def main(argv: list[str] | None = None) -> int:
    config = parse_config(argv)
    configure_logging("json" if config.log_format == "json" else "text", config.log_level,
                      cluster=config.remote_cluster_id)  # the peering this agent serves
    name_component("annex-home-agent")  # its User-Agent and fieldManager
    tracing.enable(config.otlp_endpoint, "annex-home-agent")  # before anything is built
    eventloop.install()
    collector.tune()
    return run(config)


if __name__ == "__main__":
    sys.exit(main())
