"""``annex-demo`` / ``python -m annex_demo``: annex on two simulated clusters in under a minute.

Everything it starts (two simulated clusters in this process, the remote enforcer and the home
agent as child processes, a temporary directory) is stopped and removed at the end, on Ctrl-C
and on SIGTERM.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from types import FrameType

from rich.text import Text

from annex_demo.narrator import DemoTimeout, Narrator

try:
    from annex_demo.charts import CHARTS
    from annex_demo.story import Story, Timings, workdir
except ModuleNotFoundError as missing:  # the demo extra renders the charts with Helm
    if missing.name != "helm_python":
        raise
    sys.exit("annex-demo renders the Helm charts with helm-python-sdk: "
             "pip install -e '.[demo]' in the repository")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="annex-demo",
        description="Two simulated clusters, the annex components as processes, an offloaded "
                    "namespace, a cut between the clusters and the recovery.")
    parser.add_argument("--keep", action="store_true",
                        help="keep the clusters and components running at the end, until Ctrl-C")
    parser.add_argument("--fast", action="store_true",
                        help="shorter health-check thresholds (used by the tests)")
    return parser


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the same orderly cleanup as Ctrl-C


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if not CHARTS.is_dir():
        sys.exit(f"annex-demo renders the charts of a repository checkout ({CHARTS} is missing): "
                 "install it with pip install -e '.[demo]'")
    signal.signal(signal.SIGTERM, _terminate)
    narrator = Narrator.create()
    code = 0
    with workdir() as directory:
        narrator.say(f"work directory (kubeconfigs, logs): {directory}")
        story = Story(narrator, directory, Timings.of(args.fast))
        try:
            with contextlib.ExitStack() as stack:
                try:
                    story.tell(stack, keep=args.keep)
                except Exception as error:  # noqa: BLE001 - told, with the components' logs
                    code = 1
                    if not isinstance(error, DemoTimeout):
                        narrator.console.print_exception()
                    narrator.console.print(Text(f"✗ {error}", style="bold red"))
                    for process in story.processes:
                        narrator.say(f"--- last lines of the {process.name}'s log ---")
                        narrator.console.print(process.tail(), markup=False)
                finally:
                    narrator.step("Clean up")  # then the stack stops what was started
        except KeyboardInterrupt:
            code = 130
        narrator.say(f"removed {directory}")
    narrator.say("nothing left running" if code != 1 else "nothing left running (demo failed)")
    return code


if __name__ == "__main__":
    sys.exit(main())
