"""What commands print: readable tables for people, or the same data as JSON/YAML for scripts
(`-o json|yaml`). A command builds a `Report` (data + tables + notes) and `emit` prints it."""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import dataclass, field
from typing import Any, TextIO

import yaml
from rich.console import Console
from rich.table import Table as RichTable

FORMATS = ("table", "json", "yaml")
NONE = "<none>"  # kubectl's placeholder for an empty cell


@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]] = field(default_factory=list)
    empty: str = "none"  # said instead of an empty table


@dataclass
class Report:
    """`data` is what -o json|yaml prints; `tables` and `notes` are the human view of it."""

    data: Any
    tables: list[Table] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    lead: list[str] = field(default_factory=list)
    """Lines printed before the tables."""


def _console(stream: TextIO) -> Console:
    # Not a terminal (a pipe, a test): wide enough that tables are not cut, and no colours.
    width = None if stream.isatty() else max(shutil.get_terminal_size((160, 24)).columns, 160)
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def emit(report: Report, output: str = "table", stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    if output == "json":
        stream.write(json.dumps(report.data, indent=2, default=str) + "\n")
        return
    if output == "yaml":
        stream.write(yaml.safe_dump(json.loads(json.dumps(report.data, default=str)),
                                    sort_keys=False))
        return
    console = _console(stream)
    for line in report.lead:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    for table in report.tables:
        if not table.rows:
            console.print(f"{table.title}: {table.empty}", markup=False)
            continue
        console.print(f"{table.title}:", markup=False, style="bold")
        # kubectl's look: no borders, upper-case headers, columns three spaces apart.
        rich_table = RichTable(box=None, pad_edge=False, padding=(0, 3, 0, 0),
                               header_style="bold")
        for column in table.columns:
            rich_table.add_column(column, overflow="fold")
        for row in table.rows:
            rich_table.add_row(*(cell if cell not in ("", None) else NONE for cell in row))
        with console.capture() as captured:
            console.print(rich_table)
        # Cell padding leaves trailing blanks; a diff or grep of the output should not see them.
        stream.write("\n".join(line.rstrip() for line in captured.get().splitlines()) + "\n\n")
    for note in report.notes:
        console.print(note, markup=False, highlight=False, soft_wrap=True)
