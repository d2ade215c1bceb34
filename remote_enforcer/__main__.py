"""Entry point: `python -m remote_enforcer --kubeconfig PATH --cluster-id ID [flags]`."""

from __future__ import annotations

import asyncio
import sys

from annex import collector, eventloop, tracing
from annex.kube import name_component
from annex.logs import configure_logging
from remote_enforcer.operator import run
from remote_enforcer.settings import parse


def main(argv: list[str] | None = None) -> int:
    settings = parse(argv)
    configure_logging(settings.log_format, settings.log_level)
    name_component("annex-remote-enforcer")  # its User-Agent and fieldManager
    tracing.enable(settings.otlp_endpoint, "annex-remote-enforcer")  # before anything is built
    eventloop.install()
    collector.tune()
    return asyncio.run(run(settings))


if __name__ == "__main__":
    sys.exit(main())
