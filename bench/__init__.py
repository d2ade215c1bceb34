"""The benchmarks: scripts that print figures (tests never time anything).

    python -m bench [options]                 the agent and the enforcer against a bare client
    python -m bench.growth RUN.json...        how its figures grow with N: a table, a plot
    python -m bench.trace FILE MODULE ARGS    run a component traced (what --trace uses)
    python -m bench.kubesim_creates           kubesim's server CPU for N creates, two watchers
    python -m bench.kubesim_scheduling [N]    pods kubesim schedules and starts a second

`python -m bench`, from its commands down:
- __main__.py          the options, the clusters, the run, its results file
- report.py            the table every scenario's rows make
- scenarios/           one module a scenario: latency, offloading, configmaps, restart, idle,
                       streams, storage, enforcer, failover, fragmented
- replicas.py          a component's replicas electing a leader: who leads, their writes
- harness.py           a run: the clients, the components, the watches, the request counts,
                       its setup and cleanup
- bare.py              the bare client: the minimal writes offloading needs, without annex
- components.py        the agent, the enforcer and the home controller as child processes,
                       read from outside
- balancer.py          one address in front of the enforcer's replicas, as its Service
- clusters.py          kubesim clusters in child processes, or the given ones; their room
- stream_client.py     followed logs and exec sessions through the home API server
- profile.py, trace.py py-spy's samples of the agent; its requests, events and stalls traced
- watching.py          the timeline the run's watches record; waits with deadlines
- api_calls.py, figures.py, processes.py, names.py
                       small calls, the figures' arithmetic, /proc, the run's names

It measures the product from outside and imports it (and kubesim), never the tests; nothing
in the product imports it (import-linter).
"""
