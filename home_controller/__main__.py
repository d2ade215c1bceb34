"""Entry point: `python -m home_controller [--kubeconfig PATH] [--discover-mdns] ...`."""

from __future__ import annotations

import asyncio
import signal
import sys

from annex import collector, eventloop, tracing
from annex.kube import name_component
from annex.logs import configure_logging
from home_controller.runner import run
from home_controller.settings import Settings, parse


async def _until_signalled(settings: Settings) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    return await run(settings, stop)


def main(argv: list[str] | None = None) -> int:
    settings = parse(argv)
    configure_logging(settings.log_format, settings.log_level)
    name_component("annex-home-controller")  # its User-Agent and fieldManager
    tracing.enable(settings.otlp_endpoint, "annex-home-controller")  # before anything is built
    eventloop.install()
    collector.tune()
    return asyncio.run(_until_signalled(settings))


if __name__ == "__main__":
    sys.exit(main())
