"""A recorded history of watch events (and of the test's own actions) in one ordered log, so
that a fault test can prove properties of everything that happened, not only of the end state.

Each `Recorder` lists a collection, then watches it from that resourceVersion on its own
thread (resuming from the last seen resourceVersion when the stream ends), and appends what it
sees to the shared `History`. Entries are numbered in the order the test process received them;
an action the test performs is logged before the request is sent, so anything it causes is
logged after it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import urllib3
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from shared.api.shadowpod import SHADOWPOD
from tests.conftest import ClusterHandle

GAP = "GAP"
"""A recorder could not resume its watch (the entry's name says why)."""
DELETE_AT_HOME = "delete at home"
DELETE_REMOTELY = "delete remotely"
"""The test's own actions, as logged in the history."""


@dataclass(frozen=True)
class Entry:
    seq: int
    source: str  # "home/pods", "remote/pods", "remote/shadowpods" or "test"
    event: str  # ADDED, MODIFIED, DELETED, or the test's action ("delete", ...)
    name: str
    uid: str = ""
    deleting: bool = False  # metadata.deletionTimestamp is set
    phase: str = ""
    restarts: int = 0  # of its containers, for a pod


@dataclass
class History:
    entries: list[Entry] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def append(self, source: str, event: str, name: str, uid: str = "", deleting: bool = False,
               phase: str = "", restarts: int = 0) -> None:
        with self._lock:
            self.entries.append(Entry(len(self.entries), source, event, name, uid, deleting,
                                      phase, restarts))

    def action(self, event: str, names: Collection[str],
               uids: Mapping[str, str] | None = None) -> None:
        """The test is about to do `event` to these objects (to exactly the ones of `uids`, by
        name, when it knows them)."""
        for name in names:
            self.append("test", event, name, (uids or {}).get(name, ""))

    def of(self, source: str) -> list[Entry]:
        """The entries of one source; an AssertionError if its recording has a gap (nothing
        can be proved from an incomplete history)."""
        with self._lock:
            entries = [entry for entry in self.entries if entry.source == source]
        gaps = [entry.name for entry in entries if entry.event == GAP]
        assert not gaps, f"the {source} history has a gap: {gaps}"
        return entries

    def first_deletions(self, source: str) -> dict[str, Entry]:
        """Per object (uid), the first sign it is going away (a deletionTimestamp or DELETED)."""
        first: dict[str, Entry] = {}
        for entry in self.of(source):
            if (entry.deleting or entry.event == "DELETED") and entry.uid not in first:
                first[entry.uid] = entry
        return first

    def first_deletion(self, source: str) -> dict[str, Entry]:
        """Per name, the first sign an object of that name is going away."""
        first: dict[str, Entry] = {}
        for entry in self.first_deletions(source).values():
            if entry.name not in first or entry.seq < first[entry.name].seq:
                first[entry.name] = entry
        return first

    def deleted_while_alive(self, remote_source: str) -> list[str]:
        """Names of remote objects that began going away before the test began deleting their
        home pod (`DELETE_AT_HOME`), but for those the test deleted remotely on purpose
        (`DELETE_REMOTELY`: the very objects when it logged their uids, else any of the name).
        Each object is judged on its own: a replacement the enforcer made for a pod the test
        deleted is not excused by that deletion."""
        actions = self.of("test")
        deleted_at_home: dict[str, int] = {}
        for entry in actions:
            if entry.event == DELETE_AT_HOME:
                deleted_at_home.setdefault(entry.name, entry.seq)
        remotely = [entry for entry in actions if entry.event == DELETE_REMOTELY]
        excused = {entry.uid for entry in remotely if entry.uid}
        excused_names = {entry.name for entry in remotely if not entry.uid}

        def before_home_deletion(entry: Entry) -> bool:
            return entry.name not in deleted_at_home or entry.seq < deleted_at_home[entry.name]
        return sorted({
            entry.name for entry in self.first_deletions(remote_source).values()
            if entry.uid not in excused and entry.name not in excused_names
            and before_home_deletion(entry)})

    def most_restarts(self, source: str) -> dict[str, int]:
        """Per name, the most container restarts any of its pods ever showed."""
        most: dict[str, int] = {}
        for entry in self.of(source):
            most[entry.name] = max(most.get(entry.name, 0), entry.restarts)
        return most

    def story(self, names: Collection[str]) -> str:
        """Everything logged about these names, for an assertion message."""
        with self._lock:
            return "\n".join(
                f"{e.seq} {e.source} {e.event} {e.name} {e.uid[:8]} {e.phase}"
                f"{' deleting' if e.deleting else ''}"
                f"{f' restarts {e.restarts}' if e.restarts else ''}"
                for e in self.entries if e.name in names)

    def uids(self, source: str) -> dict[str, set[str]]:
        """Per name, every object (uid) that ever carried it."""
        seen: dict[str, set[str]] = {}
        for entry in self.of(source):
            seen.setdefault(entry.name, set()).add(entry.uid)
        return seen


WATCH_SECONDS = 2
"""Watches are short and resumed, so that a recorder stops soon after it is told to (closing
a stream another thread is reading blocks)."""


class Recorder:
    """Records one collection of one cluster (by API path) into a `History`."""

    def __init__(self, lister: Lister, source: str, history: History) -> None:
        self.lister = lister
        self.source = source
        self.history = history
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"record {source}", daemon=True)
        self.resource_version = self._list()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop asking; the open watch ends within `WATCH_SECONDS`."""
        self._stopped.set()

    def join(self) -> None:
        self._thread.join(timeout=WATCH_SECONDS + 30)

    def _list(self) -> str:
        body = json.loads(self.lister(_preload_content=False, _request_timeout=60).data)
        for item in body["items"]:
            self._record("ADDED", item)
        return str(body["metadata"]["resourceVersion"])

    def _record(self, event: str, item: dict[str, Any]) -> None:
        metadata, status = item.get("metadata") or {}, item.get("status") or {}
        restarts = sum(int(container.get("restartCount") or 0)
                       for container in status.get("containerStatuses") or [])
        self.history.append(self.source, event, metadata.get("name", ""), metadata.get("uid", ""),
                            bool(metadata.get("deletionTimestamp")), status.get("phase") or "",
                            restarts)

    def _events(self) -> Iterator[dict[str, Any]]:
        response = self.lister(watch=True, resource_version=self.resource_version,
                               allow_watch_bookmarks=True, timeout_seconds=WATCH_SECONDS,
                               _preload_content=False)
        for line in iter_resp_lines(response):
            yield json.loads(line)

    def _run(self) -> None:
        while not self._stopped.is_set():
            try:
                for event in self._events():
                    item = event["object"]
                    version = (item.get("metadata") or {}).get("resourceVersion")
                    if event["type"] == "ERROR":  # e.g. 410: events were missed
                        self.history.append(self.source, GAP, str(item.get("message", "")))
                        return
                    if event["type"] != "BOOKMARK":
                        self._record(event["type"], item)
                    if version:
                        self.resource_version = str(version)
            except ApiException as error:  # the watch was refused: events were missed
                self.history.append(self.source, GAP, f"{error.status} {error.reason}")
                return
            except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError):
                if self._stopped.is_set():
                    return
                # the stream broke (a fault, a restart): resume where it was


Lister = Callable[..., Any]
"""A client list call of one collection (list_namespaced_pod with its namespace, ...)."""


def pods_of(handle: ClusterHandle, namespace: str) -> Lister:
    return partial(handle.core.list_namespaced_pod, namespace)


def shadow_pods_of(handle: ClusterHandle, namespace: str) -> Lister:
    return partial(client.CustomObjectsApi(handle.api_client).list_namespaced_custom_object,
                   SHADOWPOD.group, SHADOWPOD.version, namespace, SHADOWPOD.plural)
