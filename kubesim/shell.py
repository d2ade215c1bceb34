"""The few programs a simulated container can run (for exec and for its main command), printing
what busybox's would: echo, printf, cat, env, hostname, true, false, sleep, `stty size`, and
`sh -c` (or `sh` reading its input) over statements separated by `;`, `&&` or newlines (with
`exit N` and `>&2`). Anything else fails as the runtime fails to start an unknown executable."""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

Output = Callable[[bytes], Awaitable[None]]
Input = Callable[[], Awaitable[bytes]]  # b"" at end of input


class NotFound(Exception):
    """The runtime cannot start the program (containerd's OCI error, as kubelet reports it)."""

    def __init__(self, program: str) -> None:
        super().__init__(
            'OCI runtime exec failed: exec failed: unable to start container process: exec: '
            f'"{program}": executable file not found in $PATH: unknown')


@dataclass
class Terminal:
    """A session's pseudo-terminal: its size as the last resize set it (0 0 before any)."""
    rows: int = 0
    columns: int = 0


@dataclass
class Context:
    stdout: Output
    stderr: Output
    stdin: Input
    hostname: str
    env: dict[str, str] = field(default_factory=dict)
    terminal: Terminal | None = None  # None: stdin is not a tty


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


async def _no_input() -> bytes:
    return b""


def _printf(fmt: str, args: list[str]) -> str:
    escapes = {"n": "\n", "t": "\t", "\\": "\\", "r": "\r"}
    fmt = re.sub(r"\\(.)", lambda m: escapes.get(m.group(1), m.group(0)), fmt)
    values = iter(args)

    def substitute(match: re.Match[str]) -> str:
        if match.group(1) == "%":
            return "%"
        value = next(values, "")
        if match.group(1) == "d":
            return str(int(value or "0"))
        return value

    return re.sub(r"%([sd%])", substitute, fmt)


async def run(argv: list[str], context: Context) -> int:
    """Run a program; its exit code. NotFound when there is no such program."""
    try:
        return await _run(argv, context)
    except _Exit as exit_:
        return exit_.code


async def _run(argv: list[str], context: Context) -> int:
    if not argv:
        raise NotFound("")
    program, args = argv[0].rsplit("/", 1)[-1], argv[1:]
    if program == "echo":
        newline = not (args and args[0] == "-n")
        words = args[1:] if not newline else args
        await context.stdout((" ".join(words) + ("\n" if newline else "")).encode())
        return 0
    if program == "printf":
        if not args:
            await context.stderr(b"printf: usage: printf FORMAT [ARGUMENT...]\n")
            return 1
        await context.stdout(_printf(args[0], args[1:]).encode())
        return 0
    if program == "cat" and not args:
        while chunk := await context.stdin():
            await context.stdout(chunk)
        return 0
    if program == "env" and not args:
        lines = [f"{k}={v}" for k, v in context.env.items()]
        await context.stdout("".join(line + "\n" for line in lines).encode())
        return 0
    if program == "hostname" and not args:
        await context.stdout(f"{context.hostname}\n".encode())
        return 0
    if program == "true":
        return 0
    if program == "false":
        return 1
    if program == "sleep" and len(args) == 1:
        await asyncio.sleep(float(args[0]))
        return 0
    if program == "nc" and "-l" in " ".join(args):
        # a listener: what connects to the port is served by the simulated network
        # (kubesim's port-forward echoes, as `nc -lk -p PORT -e cat` does)
        await asyncio.Event().wait()
    if program == "stty" and args == ["size"]:
        if context.terminal is None:
            await context.stderr(b"stty: standard input: Not a tty\n")
            return 1
        await context.stdout(f"{context.terminal.rows} {context.terminal.columns}\n".encode())
        return 0
    if program == "exit":
        raise _Exit(int(args[0]) if args else 0)
    if program in ("sh", "ash", "bash") and len(args) >= 2 and args[0] == "-c":
        return await _script(args[1], context)
    if program in ("sh", "ash", "bash") and not args:
        return await _read_script(context)
    raise NotFound(argv[0])


async def _read_script(context: Context) -> int:
    """A shell reading its commands from its input, running each line as it arrives."""
    code, pending = 0, b""
    while chunk := await context.stdin():
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            code = await _script(line.decode(errors="replace"), context)
    return await _script(pending.decode(errors="replace"), context) if pending else code


async def _script(script: str, context: Context) -> int:
    code = 0
    for line in script.replace("\n", ";").split(";"):
        for index, part in enumerate(line.split("&&")):
            if index and code != 0:
                break
            words = shlex.split(part)
            if not words:
                continue
            target = context
            if words[-1] == ">&2":
                words = words[:-1]
                target = Context(context.stderr, context.stderr, context.stdin,
                                 context.hostname, context.env, context.terminal)
            try:
                code = await _run(words, target)
            except NotFound:
                await context.stderr(f"sh: {words[0]}: not found\n".encode())
                code = 127
    return code


def command_of(container: dict[str, object]) -> list[str]:
    """The argv a container's spec runs (command + args; nothing for the image's default)."""
    command = container.get("command") or []
    args = container.get("args") or []
    assert isinstance(command, list) and isinstance(args, list)
    return [str(word) for word in command + args]


__all__ = ["Context", "NotFound", "Terminal", "command_of", "run", "_no_input"]
