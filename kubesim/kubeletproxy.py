"""What kube-apiserver does with pods/log, pods/exec, pods/attach, pods/portforward and
nodes/proxy (pkg/registry/core/pod/rest/subresources.go, pkg/registry/core/node/rest): find the
pod's node, pick the node address by --kubelet-preferred-address-types, dial the kubelet at
daemonEndpoints' port with the API server's kubelet client certificate, and

- stream the kubelet's answer back (logs, nodes/proxy);
- pass an upgrade (SPDY, WebSocket v4) through as bytes;
- translate a WebSocket v5.channel.k8s.io exec/attach to SPDY towards the kubelet
  (TranslateStreamCloseWebsocketRequests, util/proxy/streamtranslator.go);
- tunnel WebSocket port-forward (SPDY/3.1+portforward.k8s.io) as SPDY towards the kubelet
  (PortForwardWebsockets, util/proxy/streamtunnel.go)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import socket
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
from aiohttp import WSMsgType, web

from kubesim import errors
from kubesim.apiserver import ApiServer, User
from kubesim.errors import StatusError
from kubesim.kubeletapi import KUBELET_STREAM_PARAMS
from kubesim.responses import status_response
from kubesim.upgraded import message_bytes, pump
from spdy3 import Connection, channels, upgrade
from spdy3.aiohttp_upgrade import claim, switch_protocols
from spdy3.connection import Stream

# kube-apiserver's default --kubelet-preferred-address-types
DEFAULT_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
DEFAULT_KUBELET_PORT = 10250
HOP_HEADERS = ("connection", "upgrade", "sec-websocket-key", "sec-websocket-version",
               "sec-websocket-protocol", "sec-websocket-extensions",
               upgrade.HEADER_PROTOCOL_VERSION.lower())
STREAMING = ("exec", "attach", "portforward")
# what GenericHttpResponseChecker reads of a failed answer (maxReadLength)
MAX_CHECKED_BODY = 50000


@dataclass
class KubeletClient:
    """How the API server reaches kubelets: its client TLS, the address-type preference and
    the simulated nodes' part of the network ((address, port) -> where it listens)."""

    tls: ssl.SSLContext | None = None
    insecure_tls: ssl.SSLContext | None = None
    """The same client certificate without verifying the kubelet: pods/log's
    insecureSkipTLSVerifyBackend (ConnectionInfo.InsecureSkipTLSVerifyTransport)."""
    preferred_address_types: Sequence[str] = DEFAULT_ADDRESS_TYPES
    network: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)

    def location(self, node: dict[str, Any]) -> tuple[str, int]:
        """The node's address by the preferred address types (nodeutil.GetPreferredNodeAddress)
        and its kubelet port."""
        status = node.get("status") or {}
        addresses = status.get("addresses") or []
        host = ""
        for address_type in self.preferred_address_types:
            match = [a["address"] for a in addresses if a.get("type") == address_type]
            if match:
                host = match[0]
                break
        if not host:
            raise StatusError(500, "", f"no preferred addresses found; known addresses: "
                              f"{[a.get('address') for a in addresses]}", {})
        port = int(((status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {})
                   .get("Port") or DEFAULT_KUBELET_PORT)
        return host, port

    async def dial(self, host: str, port: int, insecure: bool = False
                   ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        tls = self.insecure_tls if insecure and self.insecure_tls is not None else self.tls
        target = self.network.get((host, port))
        dial_host, dial_port = target if target is not None else (host, port)
        try:
            if target is None:  # a name resolves as the real server resolves it
                await asyncio.get_running_loop().getaddrinfo(host, port,
                                                             type=socket.SOCK_STREAM)
        except socket.gaierror:
            raise StatusError(500, "", f"dial tcp: lookup {host}: no such host", {}) from None
        try:
            return await asyncio.wait_for(asyncio.open_connection(
                dial_host, dial_port, ssl=tls, server_hostname=host), 30)
        except ssl.SSLCertVerificationError as error:
            # --kubelet-certificate-authority refuses a serving certificate it cannot verify
            raise StatusError(500, "", f"Get \"https://{host}:{port}\": tls: failed to verify "
                              f"certificate: x509: {error.verify_message}", {}) from None
        except (TimeoutError, OSError) as error:
            reason = "i/o timeout" if isinstance(error, asyncio.TimeoutError) else (
                "connect: connection refused")
            raise StatusError(500, "", f"dial tcp {host}:{port}: {reason}", {}) from None


def add_routes(app: web.Application, api: ApiServer, client: KubeletClient,
               user_key: Any) -> None:
    proxy = KubeletProxy(api, client, user_key)
    pods = "/api/v1/namespaces/{namespace}/pods/{name}/{subresource:log|exec|attach|portforward}"
    app.router.add_route("*", pods, proxy.pod)
    app.router.add_route("*", "/api/v1/nodes/{name}/proxy{path:(/.*)?}", proxy.node)


class KubeletProxy:
    def __init__(self, api: ApiServer, client: KubeletClient, user_key: Any) -> None:
        self.api = api
        self.client = client
        self.user_key = user_key

    # --------------------------------------------------------------------------- routes
    async def pod(self, request: web.Request) -> web.StreamResponse:
        try:
            return await self._pod(request)
        except StatusError as error:
            return status_response(error)

    async def node(self, request: web.Request) -> web.StreamResponse:
        try:
            name = request.match_info["name"]
            self._authorize(request, _verb(request.method), "nodes", "", name, "proxy")
            node = self._stored("nodes", "", name)
            path = request.match_info["path"] or "/"
            return await self._forward(request, node, path, _multi(request.query))
        except StatusError as error:
            return status_response(error)

    async def _pod(self, request: web.Request) -> web.StreamResponse:
        namespace = request.match_info["namespace"]
        name = request.match_info["name"]
        subresource = request.match_info["subresource"]
        if subresource == "log":
            if request.method != "GET":
                raise errors.method_not_supported("pods/log", request.method.lower())
            verb = "get"
        elif request.method not in ("GET", "POST"):
            raise errors.method_not_supported(f"pods/{subresource}", request.method.lower())
        else:
            verb = _verb(request.method)
        self._authorize(request, verb, "pods", namespace, name, subresource)
        pod = self._stored("pods", namespace, name)
        node_name = (pod.get("spec") or {}).get("nodeName")
        if not node_name:
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        node = self._stored("nodes", "", node_name)
        query = request.query
        if subresource == "portforward":
            path = f"/portForward/{namespace}/{name}"
            return await self._forward(request, node, path, port_forward_params(query),
                                       streaming=True)
        container = _container(pod, query.get("container", ""))
        path = f"/{ 'containerLogs' if subresource == 'log' else subresource}/{namespace}/" \
               f"{name}/{quote(container)}"
        if subresource == "log":
            _check_log_options(query)
            params = log_params(query)
        else:
            if subresource == "exec" and not query.getall("command", []):
                raise errors.bad_request("you must specify at least 1 command")
            params = stream_params(subresource, query)
        return await self._forward(request, node, path, params,
                                   streaming=subresource in STREAMING,
                                   log_of=name if subresource == "log" else "",
                                   insecure=_query_bool(query, "insecureSkipTLSVerifyBackend"))

    # ----------------------------------------------------------------------- plumbing
    def _authorize(self, request: web.Request, verb: str, plural: str, namespace: str,
                   name: str, subresource: str) -> None:
        kind = self.api.kinds.get("", "v1", plural)
        assert kind is not None
        user: User = request[self.user_key]
        self.api._authorize(user, verb, kind, namespace, name, subresource)

    def _stored(self, plural: str, namespace: str, name: str) -> dict[str, Any]:
        kind = self.api.kinds.get("", "v1", plural)
        assert kind is not None
        stored = self.api.store.get(kind.storage_key, namespace, name)
        if stored is None:
            raise errors.not_found(plural, name)
        return stored.obj

    def _location(self, node: dict[str, Any]) -> tuple[str, int]:
        return self.client.location(node)

    async def _dial(self, host: str, port: int, insecure: bool = False
                    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await self.client.dial(host, port, insecure)

    async def _forward(self, request: web.Request, node: dict[str, Any], path: str,
                       params: dict[str, list[str]], streaming: bool = False,
                       log_of: str = "", insecure: bool = False) -> web.StreamResponse:
        host, port = self._location(node)
        target = path + ("?" + urlencode(params, doseq=True) if params else "")
        is_websocket = request.headers.get("Upgrade", "").lower() == "websocket"
        protocols = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol",
                                                              "").split(",") if p.strip()]
        if streaming and is_websocket and upgrade.REMOTECOMMAND_V5 in protocols and (
                "portForward" not in path):
            return await self._translate(request, host, port, target, params)
        if streaming and is_websocket and upgrade.PORTFORWARD_TUNNEL in protocols:
            return await self._tunnel(request, host, port, target)
        is_upgrade = is_websocket or upgrade.is_spdy_upgrade(list(request.headers.items()))
        if is_upgrade:
            claim(request)  # what the client sends while the kubelet answers is for the kubelet
        try:
            reader, writer = await self._dial(host, port, insecure)
        except StatusError as error:
            if is_upgrade:
                error = StatusError(500, "", f"error dialing backend: {error.message}", {})
            elif not streaming:
                error = StatusError(500, "", f'Get "https://{host}:{port}{target}": '
                                    f"{error.message}", {})
            raise error from None
        headers = [(k, v) for k, v in request.headers.items()
                   if k.lower() in HOP_HEADERS or k.lower() == "content-type"]
        body = b"" if is_upgrade else await request.read()
        if body:
            headers.append(("Content-Length", str(len(body))))
        writer.write(upgrade.request_bytes(request.method, target, f"{host}:{port}", headers)
                     + body)
        await writer.drain()
        if is_upgrade:
            return await self._pass_upgrade(request, reader, writer)
        return await self._pass_response(request, reader, writer, log_of)

    async def _pass_response(self, request: web.Request, reader: asyncio.StreamReader,
                             writer: asyncio.StreamWriter, log_of: str = ""
                             ) -> web.StreamResponse:
        """Stream the kubelet's answer (chunked or not) while it comes. A pods/log failure
        becomes the API server's Status (LocationStreamer's GenericHttpResponseChecker);
        nodes/proxy passes it as it is."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ")[1])
            headers = [tuple(part.strip() for part in line.split(":", 1))
                       for line in lines[1:] if line]
            values = {k.lower(): v for k, v in headers}
            if log_of and not 200 <= status <= 206:
                body = b"".join([chunk async for chunk in _body(reader, values)])
                return status_response(errors.upstream_failure(
                    status, "pods/log", log_of, body[:MAX_CHECKED_BODY].decode(errors="replace")))
            response = web.StreamResponse(status=status)
            response.content_type = values.get("content-type", "text/plain").split(";")[0]
            await response.prepare(request)
            async for chunk in _body(reader, values):
                await response.write(chunk)
            await response.write_eof()
            return response
        except (ConnectionError, asyncio.IncompleteReadError):
            return web.Response(status=502)
        finally:
            writer.close()

    async def _pass_upgrade(self, request: web.Request, reader: asyncio.StreamReader,
                            writer: asyncio.StreamWriter) -> web.StreamResponse:
        answer = await upgrade.read_response(reader)
        if answer.status != 101:
            writer.close()
            response = web.Response(status=answer.status, body=answer.body)
            for key, value in answer.headers:
                if key.lower() in ("content-type", upgrade.HEADER_ACCEPTED_PROTOCOL_VERSIONS
                                   .lower()):
                    response.headers.add(key, value)
            return response
        switching = web.StreamResponse(status=101, reason="Switching Protocols")
        for key, value in answer.headers:
            if key.lower() in HOP_HEADERS or key.lower() == "sec-websocket-accept":
                switching.headers.add(key, value)
        client_reader, client_writer = await switch_protocols(request, switching)
        await asyncio.gather(pump(client_reader, writer), pump(reader, client_writer))
        return switching

    async def _spdy_to_kubelet(self, host: str, port: int, target: str, protocol: str
                               ) -> Connection:
        reader, writer = await self._dial(host, port)
        writer.write(upgrade.request_bytes("POST", target, f"{host}:{port}",
                                           upgrade.upgrade_request_headers([protocol])))
        await writer.drain()
        answer = await upgrade.read_response(reader)
        if answer.status != 101:
            writer.close()
            raise StatusError(answer.status, "", answer.body.decode(errors="replace").strip(),
                              {})
        return Connection(reader, writer, server=False)

    async def _translate(self, request: web.Request, host: str, port: int, target: str,
                         params: dict[str, list[str]]) -> web.StreamResponse:
        """WebSocket v5 from the client, SPDY v4 to the kubelet (streamtranslator.go)."""
        connection = await self._spdy_to_kubelet(host, port, target, upgrade.REMOTECOMMAND_V4)
        websocket = web.WebSocketResponse(protocols=[upgrade.REMOTECOMMAND_V5])
        await websocket.prepare(request)
        wanted = {stream: params.get(param) == ["1"] for stream, param in KUBELET_STREAM_PARAMS}
        streams: dict[int, Stream] = {}
        try:
            for kind in (channels.ERROR, channels.STDIN, channels.STDOUT, channels.STDERR,
                         channels.RESIZE):
                if kind == channels.ERROR or wanted.get(kind) or (
                        kind == channels.RESIZE and wanted["tty"]):
                    streams[channels.CHANNELS[kind]] = await connection.open_stream(
                        {channels.STREAM_TYPE: kind})

            async def downstream(channel: int) -> None:
                stream = streams.get(channel)
                if stream is None:
                    return
                while data := await stream.read():
                    await websocket.send_bytes(channels.channel_message(channel, data))

            async def upstream() -> None:
                async for message in websocket:
                    data = message_bytes(message)
                    if not data:
                        continue
                    channel, payload = channels.parse_channel_message(data)
                    if channel == channels.CHANNEL_CLOSE and payload:
                        closing = streams.get(payload[0])
                        if closing is not None:
                            await closing.close()
                    elif channel in (channels.CHANNEL_STDIN, channels.CHANNEL_RESIZE):
                        stream = streams.get(channel)
                        if stream is not None:
                            await stream.write(payload)
                # the client went: its input has ended (the translator's copy of it returns
                # and closes the kubelet's stdin stream), which ends a stdinOnce container's
                stdin = streams.get(channels.CHANNEL_STDIN)
                if stdin is not None:
                    with contextlib.suppress(Exception):
                        await stdin.close()

            reading = asyncio.ensure_future(upstream())
            await asyncio.gather(*(downstream(c) for c in (
                channels.CHANNEL_STDOUT, channels.CHANNEL_STDERR, channels.CHANNEL_ERROR)))
            reading.cancel()
        except Exception as error:  # the kubelet went away: the client reads a status
            with contextlib.suppress(Exception):
                await websocket.send_bytes(channels.channel_message(
                    channels.CHANNEL_ERROR, channels.failure_status(str(error))))
        finally:
            await connection.close()
            await websocket.close()
        return websocket

    async def _tunnel(self, request: web.Request, host: str, port: int,
                      target: str) -> web.StreamResponse:
        """WebSocket carrying SPDY from the client, SPDY upgrade to the kubelet
        (streamtunnel.go): the bytes go through unchanged."""
        reader, writer = await self._dial(host, port)
        writer.write(upgrade.request_bytes("POST", target, f"{host}:{port}",
                                           upgrade.upgrade_request_headers(
                                               [upgrade.PORTFORWARD_V1])))
        await writer.drain()
        answer = await upgrade.read_response(reader)
        if answer.status != 101:
            writer.close()
            return web.Response(status=answer.status, body=answer.body)
        websocket = web.WebSocketResponse(protocols=[upgrade.PORTFORWARD_TUNNEL])
        await websocket.prepare(request)

        async def downstream() -> None:
            while chunk := await reader.read(65536):
                await websocket.send_bytes(chunk)
            await websocket.close()

        sending = asyncio.ensure_future(downstream())
        try:
            async for message in websocket:
                if message.type == WSMsgType.BINARY:
                    writer.write(message.data)
                    await writer.drain()
        except (ConnectionError, aiohttp.ClientError):
            pass
        finally:
            writer.close()
            sending.cancel()
        return websocket


def _verb(method: str) -> str:
    return {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}.get(method, method.lower())


def _multi(query: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for key, value in query.items():
        out.setdefault(key, []).append(value)
    return out


# --- what kube-apiserver asks the kubelet (pkg/registry/core/pod/strategy.go LogLocation,
# streamParams): the options are decoded from the client's query (the pods/* API's names) and
# encoded again for the kubelet, under the kubelet's names where they differ; url.Values.Encode
# sorts the keys. Anything else in the client's query goes no further.


def _query_bool(query: Any, key: str) -> bool:
    """runtime.Convert_Slice_string_To_bool: absent, "false" or "0" is false, anything else
    (even empty) is true."""
    return key in query and query[key].lower() not in ("false", "0")


def _query_int(query: Any, key: str) -> int:
    try:
        return int(query[key])
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{query[key]}": invalid '
                                 "syntax") from None


def _encode(params: dict[str, list[str]]) -> dict[str, list[str]]:
    return dict(sorted(params.items()))


def stream_params(subresource: str, query: Any) -> dict[str, list[str]]:
    """exec and attach: stdin/stdout/stderr/tty become input/output/error/tty ("1"), exec's
    `command` words follow in order; the container is in the path."""
    params = {param: ["1"] for stream, param in KUBELET_STREAM_PARAMS
              if _query_bool(query, stream)}
    if subresource == "exec" and query.getall("command", []):
        params["command"] = list(query.getall("command"))
    return _encode(params)


def port_forward_params(query: Any) -> dict[str, list[str]]:
    """port-forward: the `ports` (repeated or comma-separated) as one `port` list."""
    try:
        ports = [int(p) for value in query.getall("ports", []) for p in value.split(",")]
    except ValueError as error:
        raise errors.bad_request(f"cannot convert to []int32: {error}") from None
    return {"port": [",".join(str(p) for p in ports)]} if ports else {}


def log_params(query: Any) -> dict[str, list[str]]:
    """pods/log: the PodLogOptions the kubelet takes, normalized (booleans only when true as
    "true", sinceTime as RFC 3339 in seconds); insecureSkipTLSVerifyBackend only picks the
    API server's transport and is not passed on."""
    params = {key: ["true"] for key in ("follow", "previous", "timestamps")
              if _query_bool(query, key)}
    for key in ("sinceSeconds", "tailLines", "limitBytes"):
        if key in query:
            params[key] = [str(_query_int(query, key))]
    if "sinceTime" in query:
        params["sinceTime"] = [_rfc3339(query["sinceTime"])]
    return _encode(params)


def _rfc3339(text: str) -> str:
    try:
        when = datetime.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise errors.bad_request(f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": '
                                 "cannot parse") from None
    if when.tzinfo is None:
        raise errors.bad_request(f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": '
                                 "cannot parse")
    return when.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container(pod: dict[str, Any], container: str) -> str:
    name = pod["metadata"]["name"]
    containers = [c["name"] for c in (pod.get("spec") or {}).get("containers") or []]
    if not container:
        if len(containers) == 1:
            return str(containers[0])
        raise errors.bad_request(f"a container name must be specified for pod {name}, choose "
                                 f"one of: [{' '.join(containers)}]")
    others = [c["name"] for c in (pod.get("spec") or {}).get("initContainers") or []] + [
        c["name"] for c in (pod.get("spec") or {}).get("ephemeralContainers") or []]
    if container not in containers + others:
        raise errors.bad_request(f"container {container} is not valid for pod {name}")
    return container


def _check_log_options(query: Any) -> None:
    """PodLogOptions validation (pkg/apis/core/validation ValidatePodLogOptions)."""
    for key, minimum in (("tailLines", 0), ("limitBytes", 1), ("sinceSeconds", 1)):
        if key in query:
            try:
                value = int(query[key])
            except ValueError:
                raise errors.bad_request(f"{key}: invalid value {query[key]!r}") from None
            if value < minimum:
                message = "must be greater than or equal to 0" if minimum == 0 else (
                    "must be greater than 0")
                raise StatusError(422, "Invalid", f'PodLogOptions "" is invalid: {key}: '
                                  f"Invalid value: {value}: {message}", {})
    if "sinceSeconds" in query and "sinceTime" in query:
        raise StatusError(422, "Invalid", 'PodLogOptions "" is invalid: '
                          "[]: Forbidden: at most one of `sinceTime` or `sinceSeconds` may be "
                          "specified", {})


async def _body(reader: asyncio.StreamReader, headers: dict[str, str]
                ) -> AsyncIterator[bytes]:
    """An HTTP/1.1 body as it arrives: chunked, of a Content-Length, or until the close."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                return
            yield await reader.readexactly(size)
            await reader.readexactly(2)
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while chunk := await reader.read(65536):
            yield chunk
