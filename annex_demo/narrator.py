"""How the demo talks: numbered steps, waits with live progress, tables.

On a terminal a spinner shows what is being waited for and what is seen meanwhile; without one
(CI, a pipe, a test) every step and every finished wait is one plain line, so the output reads
the same in a log.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

# What a wait polls: (done, what is seen right now).
Probe = Callable[[], tuple[bool, str]]


class DemoTimeout(Exception):
    """Something the story waits for did not happen in time."""


@dataclass
class Narrator:
    console: Console
    started: float = 0.0
    step_number: int = 0

    @classmethod
    def create(cls) -> Narrator:
        console = Console(highlight=False)
        if not console.is_terminal:
            # A log is read by grep and by people: one line per message, never wrapped.
            console = Console(highlight=False, width=200, no_color=True, soft_wrap=True)
        return cls(console, time.monotonic())

    def _clock(self) -> str:
        return f"[{time.monotonic() - self.started:5.1f}s]"

    def step(self, title: str) -> None:
        self.step_number += 1
        self.console.print()
        self.console.print(f"[bold cyan]{self._clock()} Step {self.step_number}: {title}[/]")

    def say(self, text: str) -> None:
        self.console.print(f"  {text}")

    def ok(self, text: str) -> None:
        self.console.print(f"  [green]✓[/] {text}")

    def wait(self, description: str, probe: Probe, timeout: float,
             interval: float = 0.2) -> str:
        """Poll `probe` until done (returns what it saw last) or raise DemoTimeout."""
        begin = time.monotonic()
        seen = ""
        with self.console.status(description) as status:
            while True:
                try:
                    done, seen = probe()
                except Exception as error:  # noqa: BLE001 - "not yet": APIs settle meanwhile
                    done, seen = False, f"{type(error).__name__}: {error}"[:100]
                if done:
                    break
                if time.monotonic() - begin > timeout:
                    raise DemoTimeout(f"{description}: not within {timeout:.0f}s (last seen: "
                                      f"{seen})")
                status.update(f"{description} [dim]({time.monotonic() - begin:.1f}s) {seen}[/]")
                time.sleep(interval)
        took = time.monotonic() - begin
        self.ok(f"{description} ({took:.1f}s){': ' + seen if seen else ''}")
        return seen

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        table = Table(title=title, title_justify="left", show_lines=False)
        for column in columns:
            table.add_column(column)
        for row in rows:
            table.add_row(*row)
        if not rows:
            table.add_row(*(["(none)"] + [""] * (len(columns) - 1)))
        self.console.print(table)
