"""Shell completion (bash, zsh, fish) with argcomplete: the script a shell sources registers a
function that runs annexctl itself to ask what may come next, so commands, flags and choices
complete from the same parser that reads them (nothing to keep in step by hand)."""

from __future__ import annotations

import argparse
import os

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
