"""`annexctl completion bash|zsh|fish`: scripts the shells accept, registering a completion that
asks annexctl's own parser (commands, then a command's choices); `kubectl annex` completes
through kubectl's plugin completion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from tests.annexctl.conftest import Annexctl

SCRIPTS = sysconfig.get_path("scripts")  # where `pip install` put annexctl


@pytest.mark.parametrize(("shell", "registration"), [
    ("bash", "complete -o nospace -o default -o bashdefault -F _python_argcomplete annexctl"),
    ("zsh", "compdef _python_argcomplete annexctl"),
    ("fish", "complete --command annexctl -f -a '(__fish_annexctl_complete)'"),
])
def test_each_shell_gets_a_script_registering_annexctl(
        annexctl: Annexctl, shell: str, registration: str, tmp_path: Path) -> None:
    run = annexctl("completion", shell)
    assert run.code == 0, run.err
    assert registration in run.out
    if shell != "fish":  # the bash and zsh script is one, for both shells
        script = tmp_path / f"annexctl.{shell}"
        script.write_text(run.out)
        checked = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True,
                                 timeout=30)
        assert checked.returncode == 0, checked.stderr


def _bash_completes(script: Path, line: str) -> list[str]:
    """What bash offers after `line` with the script sourced, as a TAB would ask."""
    program = (f'source {script}; COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
               'COMP_TYPE=9; _python_argcomplete annexctl; printf "%s\\n" "${COMPREPLY[@]}"')
    environment = {**os.environ, "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True,
                          env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    return [word.strip() for word in done.stdout.splitlines() if word.strip()]


def test_bash_completes_commands_and_their_choices(annexctl: Annexctl, tmp_path: Path) -> None:
    script = tmp_path / "annexctl.bash"
    script.write_text(annexctl("completion", "bash").out)
    assert _bash_completes(script, "annexctl vers") == ["version"]
    assert {"bash", "zsh", "fish"} <= set(_bash_completes(script, "annexctl completion "))


def test_kubectl_completes_the_plugin_s_arguments() -> None:
    """kubectl (1.26+) asks `kubectl_complete-annex` what may follow `kubectl annex ...`, and
    reads Cobra's answer: candidates, then the directive."""
    kubectl = shutil.which("kubectl")
    assert kubectl is not None, "kubectl is needed (CI installs it)"
    environment = {**os.environ, "PATH": f"{SCRIPTS}{os.pathsep}{os.environ['PATH']}"}

    def completes(*words: str) -> list[str]:
        done = subprocess.run([kubectl, "__complete", "annex", *words], capture_output=True,
                              text=True, env=environment, timeout=60)
        assert done.returncode == 0, done.stderr
        *candidates, directive = done.stdout.splitlines()
        assert directive == ":4"  # no file names
        return candidates

    assert completes("vers") == ["version"]
    assert completes("offload", "namespace", "shop", "--pod-strategy", "") == [
        "Local", "Remote", "LocalAndRemote"]
