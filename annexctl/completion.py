"""Shell completion (bash, zsh, fish) with argcomplete: the script a shell sources registers a
function that runs annexctl itself to ask what may come next, so commands, flags and choices
complete from the same parser that reads them (nothing to keep in step by hand). `kubectl annex`
completes the same way through kubectl's plugin completion (`kubectl_complete-annex`)."""

from __future__ import annotations

import argparse
import io
import os
from collections.abc import Sequence

SHELLS = ("bash", "zsh", "fish")


def executable(prog: str) -> str:
    """The command the shell completes: `annexctl`, or `kubectl-annex` for the plugin (kubectl
    itself completes only its own commands)."""
    return prog.replace(" ", "-")


def script(shell: str, prog: str = "annexctl") -> str:
    """The script that registers the completion of `prog` in `shell`."""
    # Imported only here and while completing: no other command needs it.
    from argcomplete.shell_integration import shellcode

    return shellcode([executable(prog)], shell=shell)


def complete(parser: argparse.ArgumentParser) -> None:
    """When a completion script runs annexctl (`_ARGCOMPLETE` set), print what may follow the
    words typed so far and exit; otherwise nothing."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete

    argcomplete.autocomplete(parser)


NO_FILE_COMPLETION = 4
"""Cobra's ShellCompDirectiveNoFileComp: the shell offers no file names instead."""


def for_kubectl(parser: argparse.ArgumentParser, words: Sequence[str]) -> str:
    """kubectl's plugin completion (kubectl 1.26+): `kubectl annex ... <TAB>` runs
    `kubectl_complete-annex` with the words after `annex` (the last one the word being typed,
    maybe empty) and reads one candidate a line, then `:<directive>` (Cobra's protocol)."""
    from argcomplete import autocomplete

    line = " ".join(["kubectl-annex", *words])
    asked = {"_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": "\n", "_ARGCOMPLETE_SUPPRESS_SPACE": "1",
             "COMP_LINE": line, "COMP_POINT": str(len(line))}
    saved = {key: os.environ.get(key) for key in asked}
    os.environ.update(asked)
    answer = io.StringIO()
    try:
        autocomplete(parser, output_stream=answer, exit_method=lambda _code: None)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    candidates = [c.rstrip() for c in answer.getvalue().split("\n") if c.strip()]
    return "".join(f"{c}\n" for c in candidates) + f":{NO_FILE_COMPLETION}\n"
