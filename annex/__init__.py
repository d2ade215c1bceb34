"""Runtime pieces every component shares. Rules stay in `shared/`; this package does the I/O.

- kubeapi.py, http1.py    the asynchronous REST client, over keep-alive HTTP/1.1 connections
- api_errors.py           how its requests fail with an answer (the API server's Status)
- transport_errors.py     how its requests fail before an answer (refused, TLS, disconnected)
- api_paths.py            the REST paths of collections and objects, and what a request does
- request_metrics.py      its requests, counted and timed as client-go's
- retries.py              what is worth trying again, and `retrying` outside a controller
- kube.py, proxies.py     connections from a kubeconfig (or in-cluster), through the HTTP proxy
                          client-go would choose
- tokens.py               bearer tokens that rotate (a token file, an exec plugin), and what a
                          service-account token says of itself
- listwatch.py            list and watch one resource, as client-go's Reflector
- mirror.py               in-memory copies of the watched objects
- informers.py            the informer registry: where each watch event goes, declared
- controller.py           the reconcile runtime (controller-runtime's Controller)
- workqueue.py            its queue of keys (client-go's workqueue)
- writes.py               writes beside objects we do not own (create or refuse, delete by uid)
- events.py               Events, correlated as client-go's EventRecorder does
- leader.py               leader election on a Lease, for active/passive replicas
- leader_flags.py         the --leader-elect flags and a component's candidacy
- webhooks.py             what the admission webhook servers share
- reviews.py              TokenReviews and SubjectAccessReviews of a delegating server
- probes.py               /healthz, /readyz and /metrics over plain HTTP
- metrics.py              Prometheus metrics (`prometheus_client`)
- metrics_histogram.py    a histogram cheap enough for the hot path
- tracing.py              optional OpenTelemetry tracing, exported over OTLP/HTTP
- logs.py                 logging: text, or one JSON object per line
- eventloop.py            uvloop event loops
- collector.py            the garbage collector's settings for a long-running component
"""
