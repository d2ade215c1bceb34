"""A Service in front of enforcer replicas, for the runs that start several (the failover
scenario, the tests' replicas): a TCP balancer that hands each new connection to the next live
backend in turn, as kube-proxy spreads connections over a Service's endpoints (TLS passes
through: every replica serves the same certificate). A backend that refuses the connection is
skipped, as an endpoint that went away."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from collections.abc import Iterator, Sequence


class Balancer:
    def __init__(self, backends: Sequence[int]) -> None:
        self.backends = list(backends)
        """The backends' ports on 127.0.0.1."""
        self.port = 0
        self._turn = itertools.count()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        first = next(self._turn)
        for offset in range(len(self.backends)):
            port = self.backends[(first + offset) % len(self.backends)]
            try:
                return await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                continue
        raise OSError("no backend accepts connections")

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            backend_reader, backend_writer = await self._connect()
        except OSError:
            writer.close()
            return

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, backend_writer), pipe(backend_reader, writer))

    @contextlib.contextmanager
    def running(self) -> Iterator[Balancer]:
        self._thread.start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop).result(10)
        self.port = server.sockets[0].getsockname()[1]
        try:
            yield self
        finally:
            asyncio.run_coroutine_threadsafe(self._shut(server), self._loop).result(10)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    @staticmethod
    async def _shut(server: asyncio.Server) -> None:
        """No new connection, and those open closed (the API server keeps its own open)."""
        server.close()
        piping = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in piping:
            task.cancel()
        await asyncio.gather(*piping, return_exceptions=True)
