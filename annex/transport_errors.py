"""How a request to the API server can fail before any answer is read: annex's own errors,
raised by `annex.http1` (and so by every `annex.kubeapi.ClusterApi` call) beside `TimeoutError`.

    TransportError                no whole answer came: the server may have applied the request
    ├── ConnectFailed             no connection: the request was never sent
    │   ├── ProxyRefused          the proxy did not open a tunnel to the server
    │   └── TLSFailed             the TLS handshake failed
    │       └── CertificateRejected   the server's certificate did not verify
    ├── Disconnected              the server closed the connection before the answer's end
    └── MalformedAnswer           what came back is not HTTP/1.1

They are `ConnectionError`s (so `OSError`s): code that handles a socket's failures handles
these. An answer the server did send, whatever its status, is no transport error
(`annex.api_errors.ApiError`).
"""

from __future__ import annotations


class TransportError(ConnectionError):
    """No whole answer came from the server: whether it applied the request is unknown, unless
    a subclass says otherwise."""


class ConnectFailed(TransportError):
    """No connection to the server was made (refused, unreachable, a name that does not resolve,
    a proxy or TLS failing): the request was never sent."""


class ProxyRefused(ConnectFailed):
    """The proxy did not open a tunnel to the server (its strerror says why)."""


class TLSFailed(ConnectFailed):
    """The TLS handshake with the server failed."""


class CertificateRejected(TLSFailed):
    """The server's certificate did not verify against the CA trusted for it (or does not name
    the server)."""


class Disconnected(TransportError):
    """The server closed the connection before the whole answer came."""


class MalformedAnswer(TransportError):
    """What the server sent is not an HTTP/1.1 answer."""
