"""annexctl's command line (liqoctl's names and habits: --kubeconfig/--context for the home
cluster, --remote-kubeconfig/--remote-context for the provider, `offload namespace NS`).
--kubeconfig and --context may also come before the command, as kubectl takes them (and as
`kubectl annex ...`, the kubectl plugin this is installed as too, must pass them).

Every failure ends in one `error: ...` line on stderr and a non-zero exit code (1 failed, 2
usage, 3 a cluster is unreachable, 4 annex's CRDs are missing), never a traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from annexctl import completion, discover, explain, offload, peer_token, peering, probe, status
from annexctl.clusters import CliError, Cluster, connect
from annexctl.output import FORMATS, Report, emit
from annexctl.uninstall import DEFAULT_TIMEOUT_SECONDS, uninstall_home, uninstall_provider
from annexctl.version import client_version, version
from shared.api.namespace_offloading import NamespaceMappingStrategy, PodOffloadingStrategy
from shared.api.quota import LimitsEnforcement, PodPolicy, PodSecurityLevel
from shared.pools import is_pool_name


def _key_values(text: str) -> dict[str, str]:
    pairs = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key or not value:
            raise argparse.ArgumentTypeError(f"expected name=quantity, got {part!r}")
        pairs[key] = value
    return pairs


def _pool_names(text: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    bad = [name for name in names if not is_pool_name(name)]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"expected pool names separated by commas (lower-case letters, digits and '-'), "
            f"got {text!r}")
    return names


def _home(args: argparse.Namespace) -> Cluster:
    return connect("home", args.kubeconfig, args.context)


def _provider(args: argparse.Namespace) -> Cluster:
    return connect("provider", args.remote_kubeconfig, args.remote_context)


def _consumer_request(args: argparse.Namespace, home_cluster_id: str,
                      remote_cluster_id: str) -> peering.PeerRequest:
    return peering.PeerRequest(
        home_cluster_id=home_cluster_id, remote_cluster_id=remote_cluster_id,
        tenant_namespace=args.tenant_namespace,
        namespace=getattr(args, "namespace", "annex-system"),
        secret_name=getattr(args, "secret_name", None), server=args.remote_server,
        token_expiration_seconds=args.token_expiration_seconds,
        limits_enforcement=args.limits_enforcement, quota_resources=args.quota or {},
        pod_policy=PodPolicy(pod_security=args.pod_security,
                             allow_host_ports=args.allow_host_ports),
        pools=args.pools)


def _peer(args: argparse.Namespace) -> Report:
    if args.token:
        if args.remote_kubeconfig or args.from_discovered:
            raise CliError("--token brings the provider's consent: no --remote-kubeconfig or "
                           "--from-discovered with it", 2)
        return peer_token.redeem(_home(args), args.token, args.namespace, args.secret_name,
                                 args.token_expiration_seconds)
    if not args.remote_kubeconfig:
        raise CliError("the provider's consent is needed: --remote-kubeconfig (its admin's), "
                       "or --token (a token its admin generated)", 2)
    if not args.cluster_id:
        raise CliError("--cluster-id (this home cluster's id) is required", 2)
    home = _home(args)
    remote_cluster_id = args.remote_cluster_id
    if args.from_discovered:
        # Discovery tells who and where; the consent still comes from the provider's admin.
        found = discover.discovered(home, args.from_discovered)
        remote_cluster_id = found.spec.cluster_id
        if args.remote_server is None:
            args.remote_server = found.spec.api_server_url
    if not remote_cluster_id:
        raise CliError("--remote-cluster-id (or --from-discovered) is required", 2)
    request = _consumer_request(args, args.cluster_id, remote_cluster_id)
    return peering.peer(home, _provider(args), request)


def _generate_peer_token(args: argparse.Namespace) -> Report:
    provider = connect("provider", args.kubeconfig, args.context)
    request = _consumer_request(args, args.consumer_cluster_id, args.cluster_id)
    return peer_token.generate(provider, args.cluster_id, request, args.ttl_seconds)


def _discover(args: argparse.Namespace) -> Report:
    return discover.discover(_home(args))


def _unpeer(args: argparse.Namespace) -> Report:
    return peering.unpeer(_home(args), _provider(args), args.cluster_id, args.remote_cluster_id,
                          tenant_namespace=args.tenant_namespace, namespace=args.namespace,
                          secret_name=args.secret_name, timeout=args.timeout)


def _uninstall(args: argparse.Namespace) -> Report:
    cluster = connect(args.side, args.kubeconfig, args.context)
    if args.side == "home":
        return uninstall_home(cluster, args.namespace, args.release, args.timeout)
    if not args.cluster_id:
        raise CliError("--cluster-id (this provider's id) is required with --side provider", 2)
    return uninstall_provider(cluster, args.cluster_id, args.timeout)


def _version(args: argparse.Namespace) -> Report:
    return version(args.kubeconfig, args.context, args.remote_kubeconfig, args.remote_context,
                   client_only=args.client)


def _completion(args: argparse.Namespace) -> Report:
    sys.stdout.write(completion.script(args.shell, args.prog))  # verbatim, for the shell
    return Report(None)


def _test(args: argparse.Namespace) -> Report:
    return probe.run(_home(args), args.remote_cluster_id, virtual_node_namespace=args.namespace,
                     image=args.image, timeout=args.timeout)


def _offload(args: argparse.Namespace) -> Report:
    manifest = offload.namespace_offloading(
        args.name, args.pod_offloading_strategy, args.namespace_mapping_strategy,
        args.remote_namespace_name, args.selector or [])
    if args.output != "table":  # liqoctl's habit: -o prints the resource instead of applying
        return Report(manifest)
    return offload.offload(_home(args), manifest, timeout=args.timeout)


def _unoffload(args: argparse.Namespace) -> Report:
    return offload.unoffload(_home(args), args.name)


def _status(args: argparse.Namespace) -> Report:
    return status.status(_home(args), events=args.events, offers=not args.no_offers)


def _explain_pod(args: argparse.Namespace) -> Report:
    namespace, sep, name = args.pod.rpartition("/")
    if not sep or not namespace or not name:
        raise CliError(f"expected NAMESPACE/NAME, got {args.pod!r}", exit_code=2)
    return explain.explain_pod(_home(args), namespace, name)


def _cluster_options(parser: argparse.ArgumentParser, remote: bool,
                     remote_required: bool = True) -> None:
    group = parser.add_argument_group("home cluster")
    group.add_argument("--kubeconfig", help="home kubeconfig (default $KUBECONFIG, "
                       "~/.kube/config)")
    group.add_argument("--context", help="home kubeconfig context (default: current)")
    if remote:
        group = parser.add_argument_group("provider (remote) cluster")
        group.add_argument("--remote-kubeconfig", required=remote_required,
                           help="a kubeconfig with rights to create the consumer identity")
        group.add_argument("--remote-context", help="provider kubeconfig context")


def _peering_options(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--cluster-id", required=required,
                        help="this (home, consumer) cluster's id: the home chart's clusterId")
    parser.add_argument("--remote-cluster-id", required=required,
                        help="the provider's id: the remote-enforcer chart's clusterId")
    parser.add_argument("--tenant-namespace",
                        help="the consumer's namespace on the provider "
                             "(default annex-tenant-<cluster-id>)")
    parser.add_argument("-n", "--namespace", default="annex-system",
                        help="home namespace of the home-agent chart (default annex-system)")
    parser.add_argument("--secret-name",
                        help="home Secret for the kubeconfig (default <remote-cluster-id>-"
                             "kubeconfig)")


def _consumer_options(parser: argparse.ArgumentParser) -> None:
    """What the provider grants the consumer (peer, generate-peer-token)."""
    parser.add_argument("--remote-server",
                        help="the provider API server URL as the home agent reaches it "
                             "(default: the one in the provider's kubeconfig)")
    parser.add_argument("--token-expiration-seconds", type=int,
                        default=peering.DEFAULT_TOKEN_EXPIRATION_SECONDS,
                        help="lifetime of the consumer's token (default a day; at least 600; "
                             "the home agent renews it before it expires, and running peer "
                             "again does too; the API server may shorten it)")
    parser.add_argument("--limits-enforcement", type=LimitsEnforcement,
                        choices=list(LimitsEnforcement), default=LimitsEnforcement.NONE,
                        help="the consumer Quota's enforcement (default None: pods need not "
                             "state requests; what they request still counts)")
    parser.add_argument("--quota", type=_key_values, metavar="cpu=4,memory=8Gi,pods=110",
                        help="the consumer Quota's resources (default: none listed; what it "
                             "does not list is limited by what the provider offers the "
                             "consumer, never unlimited)")
    parser.add_argument("--pod-security", type=PodSecurityLevel,
                        choices=list(PodSecurityLevel), default=PodSecurityLevel.BASELINE,
                        help="the Pod Security Standards level the consumer's pods must meet "
                             "on the provider (default baseline)")
    parser.add_argument("--pools", type=_pool_names, metavar="gpu,general",
                        help="the provider's pools the consumer is lent, its Quota's pools "
                             "(default: every pool; each must be one the provider's enforcer "
                             "declares, --offer-pool)")
    parser.add_argument("--allow-host-ports", action="store_true",
                        help="let the consumer's pods use host ports (with --pod-security "
                             "privileged only)")


def _output_option(parser: argparse.ArgumentParser, help_text: str) -> None:
    parser.add_argument("-o", "--output", choices=FORMATS, default="table", help=help_text)


def build_parser(prog: str = "annexctl") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Peer clusters, offload namespaces and see what annex does.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {client_version()}")
    # kubectl's global flags, before the command; a command's own --kubeconfig/--context win.
    parser.add_argument("--kubeconfig", dest="global_kubeconfig", metavar="KUBECONFIG",
                        help="kubeconfig of the cluster the command runs against (default "
                             "$KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--context", dest="global_context", metavar="CONTEXT",
                        help="its context (default: current)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    peer = commands.add_parser(
        "peer", help="create the consumer identity on the provider and install its kubeconfig "
        "at home")
    _cluster_options(peer, remote=True, remote_required=False)
    _peering_options(peer, required=False)
    peer.add_argument("--token", help="redeem a peering token the provider's admin generated "
                      "(annexctl generate-peer-token): no provider kubeconfig or ids needed")
    peer.add_argument("--from-discovered", metavar="FOREIGNCLUSTER",
                      help="peer with a discovered provider: its cluster id and API address "
                           "from its ForeignCluster (--remote-kubeconfig still gives consent)")
    _consumer_options(peer)
    _output_option(peer, "output format")
    peer.set_defaults(run=_peer)

    generate = commands.add_parser(
        "generate-peer-token", help="on the provider: a token a consumer redeems with "
        "`annexctl peer --token` (its admin's consent, as liqoctl generate-peer-command)")
    group = generate.add_argument_group("provider cluster (the one this runs against)")
    group.add_argument("--kubeconfig", help="the provider's kubeconfig, with rights to create "
                       "the consumer identity (default $KUBECONFIG, ~/.kube/config)")
    group.add_argument("--context", help="kubeconfig context (default: current)")
    generate.add_argument("--cluster-id", required=True,
                          help="this (provider) cluster's id: the remote-enforcer's clusterId")
    generate.add_argument("--consumer-cluster-id", required=True,
                          help="the consumer's (home) cluster id")
    generate.add_argument("--tenant-namespace", help="the consumer's namespace here "
                          "(default annex-tenant-<consumer-cluster-id>)")
    generate.add_argument("--ttl-seconds", type=int, default=peer_token.DEFAULT_TTL_SECONDS,
                          help="how long the token may be redeemed (default an hour; at "
                               "least 600)")
    _consumer_options(generate)
    _output_option(generate, "output format")
    generate.set_defaults(run=_generate_peer_token)

    unpeer = commands.add_parser("unpeer", help="remove what peer created, on both clusters")
    _cluster_options(unpeer, remote=True)
    _peering_options(unpeer)
    unpeer.add_argument("--timeout", type=float, default=60.0,
                        help="seconds it may take in all (default 60): the virtual nodes' "
                             "drain, the offloaded namespaces' withdrawal, the tenant namespace")
    _output_option(unpeer, "output format")
    unpeer.set_defaults(run=_unpeer)

    remove = commands.add_parser(
        "uninstall", help="before a chart's release goes (its pre-delete hook runs this): "
        "drain its virtual nodes, withdraw the offloaded namespaces, remove what only annex's "
        "components would")
    group = remove.add_argument_group("cluster (the one this runs against)")
    group.add_argument("--kubeconfig", help="default $KUBECONFIG, ~/.kube/config, or the "
                       "pod's service account")
    group.add_argument("--context", help="kubeconfig context (default: current)")
    remove.add_argument("--side", choices=("home", "provider"), required=True,
                        help="home: the home-agent chart's release; provider: the "
                             "remote-enforcer chart's")
    remove.add_argument("-n", "--namespace", default="annex-system",
                        help="the release's namespace (default annex-system)")
    remove.add_argument("--release", default="annex", help="the release's name (default annex)")
    remove.add_argument("--cluster-id", help="this provider's id (--side provider): twin "
                        "namespaces are deleted only when labelled as made by it")
    remove.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT_SECONDS,
                        help="seconds it may take in all (default 120); half of it is left to "
                             "the running components")
    _output_option(remove, "output format")
    remove.set_defaults(run=_uninstall)

    found = commands.add_parser("discover", help="the providers this home cluster knows of "
                                "(ForeignClusters): address, source, offer, peering phase")
    _cluster_options(found, remote=False)
    _output_option(found, "output format")
    found.set_defaults(run=_discover)

    for verb, run, help_text in (
            ("offload", _offload, "extend a namespace to the remote clusters"),
            ("unoffload", _unoffload, "stop extending a namespace")):
        command = commands.add_parser(verb, help=help_text)
        kinds = command.add_subparsers(dest="kind", required=True, metavar="KIND")
        namespace = kinds.add_parser("namespace", help=f"{verb} a namespace")
        namespace.add_argument("name", metavar="NAMESPACE")
        _cluster_options(namespace, remote=False)
        if verb == "offload":
            namespace.add_argument(
                "--pod-offloading-strategy", "--pod-strategy", type=PodOffloadingStrategy,
                choices=list(PodOffloadingStrategy), default=PodOffloadingStrategy.LOCAL_AND_REMOTE,
                help="where the namespace's pods may run (default LocalAndRemote)")
            namespace.add_argument(
                "--namespace-mapping-strategy", "--mapping", type=NamespaceMappingStrategy,
                choices=list(NamespaceMappingStrategy),
                default=NamespaceMappingStrategy.DEFAULT_NAME,
                help="the twin namespace's name (default DefaultName: <namespace>-<cluster id>)")
            namespace.add_argument("--remote-namespace-name",
                                   help="the twin namespace's name, with SelectedName")
            namespace.add_argument(
                "-l", "--selector", "--cluster-selector", action="append", metavar="SELECTOR",
                help="virtual-node label selector choosing the clusters, e.g. 'region in (eu)'; "
                     "repeat for alternatives (OR)")
            namespace.add_argument(
                "--timeout", type=float, default=0.0,
                help="seconds to wait for the offloading to be Ready (default 0: do not wait)")
            _output_option(namespace, "print the NamespaceOffloading instead of applying it")
        else:
            _output_option(namespace, "output format")
        namespace.set_defaults(run=run)

    show = commands.add_parser("status", help="virtual nodes, offers, extended namespaces, "
                                              "offloaded pods and recent warnings")
    _cluster_options(show, remote=False)
    show.add_argument("--events", type=int, default=10, help="recent warnings shown")
    show.add_argument("--no-offers", action="store_true",
                      help="do not contact the providers for their offers")
    _output_option(show, "output format")
    show.set_defaults(run=_status)

    test = commands.add_parser(
        "test", help="check a peering end to end as a user would: offload a probe namespace, "
        "run a pod, read its logs and exec into it through the virtual node, reflect a "
        "ConfigMap, clean up")
    _cluster_options(test, remote=False)
    test.add_argument("--remote-cluster-id",
                      help="the peering's provider (default: the only VirtualNode's)")
    test.add_argument("-n", "--namespace",
                      help="the VirtualNode's namespace (the home-agent chart's), when several "
                           "serve the provider")
    test.add_argument("--image", default=probe.DEFAULT_IMAGE,
                      help=f"the probe pod's image, with sh, echo and sleep (default "
                           f"{probe.DEFAULT_IMAGE})")
    test.add_argument("--timeout", type=float, default=probe.DEFAULT_TIMEOUT_SECONDS,
                      help="seconds each step may take (default 60)")
    test.set_defaults(run=_test, output="table")

    show_version = commands.add_parser(
        "version", help="this CLI's version and the annex components' on the clusters it "
        "reaches")
    _cluster_options(show_version, remote=True, remote_required=False)
    show_version.add_argument("--client", action="store_true",
                              help="the client version only (no cluster contacted)")
    _output_option(show_version, "output format")
    show_version.set_defaults(run=_version)

    complete = commands.add_parser(
        "completion", help="the shell completion script: "
        "source <(annexctl completion bash)")
    complete.add_argument("shell", choices=completion.SHELLS)
    complete.set_defaults(run=_completion, output="table", prog=prog)

    explain_command = commands.add_parser("explain", help="why an object is where it is")
    kinds = explain_command.add_subparsers(dest="kind", required=True, metavar="KIND")
    pod = kinds.add_parser("pod", help="a pod's placement and its remote spec")
    pod.add_argument("pod", metavar="NAMESPACE/NAME")
    _cluster_options(pod, remote=False)
    _output_option(pod, "output format")
    pod.set_defaults(run=_explain_pod)
    return parser


LIBRARY_LOGGERS = ("urllib3", "kubernetes")
"""The libraries that log while a command talks to a cluster (urllib3 warns of each retry)."""


@contextmanager
def _library_logs_held() -> Iterator[None]:
    """Keep the libraries' log records away from whatever handlers the process has while a
    command runs: a failure's output is its one `error:` line (which names the cause the
    records would tell), and a handler that cannot write (a closed stream) must not print its
    own traceback there either."""
    loggers = [logging.getLogger(name) for name in LIBRARY_LOGGERS]
    saved = [(logger.propagate, logger.handlers) for logger in loggers]
    for logger in loggers:
        logger.propagate, logger.handlers = False, [logging.NullHandler()]
    try:
        yield
    finally:
        for logger, (propagate, handlers) in zip(loggers, saved, strict=True):
            logger.propagate, logger.handlers = propagate, handlers


def _with_global_cluster(args: argparse.Namespace) -> argparse.Namespace:
    """The flags given before the command fill in the command's own (kubectl's order)."""
    for name in ("kubeconfig", "context"):
        if getattr(args, name, None) is None:
            setattr(args, name, getattr(args, f"global_{name}"))
    return args


def main(argv: Sequence[str] | None = None, prog: str = "annexctl") -> int:
    parser = build_parser(prog)
    completion.complete(parser)  # answers the shell and exits, when the shell asks
    args = _with_global_cluster(parser.parse_args(argv))
    run: Callable[[argparse.Namespace], Report] = args.run
    try:
        with _library_logs_held():
            report = run(args)
    except CliError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    emit(report, args.output)
    return 0


def kubectl_plugin() -> int:
    """`kubectl annex ...`: kubectl runs the `kubectl-annex` executable on PATH."""
    return main(prog="kubectl annex")


def kubectl_plugin_completion() -> int:
    """`kubectl annex ...<TAB>`: kubectl asks the `kubectl_complete-annex` executable."""
    sys.stdout.write(completion.for_kubectl(build_parser("kubectl annex"), sys.argv[1:]))
    return 0
