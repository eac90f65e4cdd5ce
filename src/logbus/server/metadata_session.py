"""Whether this broker holds its session with the cluster's metadata service.

The one rule the rest of the broker asks about is "this broker has lost its metadata
session": the leader isolation guard (`server/replica/leader_isolation.py`) steps aside
from partitions whose followers stopped fetching only while it holds. Each metadata mode
feeds it from its own signal:

- ZooKeeper (today): `ClusterMember` hands over kazoo's session states. SUSPENDED (no
  answer from any server for about two thirds of zookeeper.session.timeout.ms) and LOST
  (the server expired the session) are `mark_lost`; CONNECTED is `mark_held`. A broker cut
  off from ZooKeeper only ever sees SUSPENDED until it reaches a server again, which is
  why SUSPENDED counts: the server expires the session a little later on its own.
- KRaft (later): the broker's heartbeat loop to the active controller calls
  `mark_lost(expired=True)` once no heartbeat has been answered for
  broker.session.timeout.ms (the controller fences the broker then), and `mark_held`
  when a heartbeat is answered again.

Owned by the broker's event loop; not thread-safe (feed it with `call_soon_threadsafe`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

log = logging.getLogger(__name__)

# Called with `same_session`: True when the session came back without having expired
# (this broker's registration, and so its broker epoch, never lapsed).
RegainedListener = Callable[[bool], None]


class MetadataSession:
    """The broker's metadata session state: held from start-up, lost while the metadata
    service cannot be reached (or has expired the session), held again once it answers."""

    def __init__(self) -> None:
        self._lost_since: float | None = None
        self._expired = False
        self._listeners: list[RegainedListener] = []

    @property
    def lost(self) -> bool:
        return self._lost_since is not None

    def lost_for(self, now: float | None = None) -> float:
        """Seconds since the session was lost (0 while it is held)."""
        if self._lost_since is None:
            return 0.0
        return (time.monotonic() if now is None else now) - self._lost_since

    def mark_lost(self, *, expired: bool = False) -> None:
        """The metadata service no longer answers (or says the session expired)."""
        if self._lost_since is None:
            self._lost_since = time.monotonic()
            log.warning("metadata session lost%s", " (expired)" if expired else "")
        self._expired = self._expired or expired

    def mark_held(self) -> None:
        """The metadata service answers again; listeners learn whether the session is the
        one that was lost."""
        if self._lost_since is None:
            return
        same_session = not self._expired
        self._lost_since = None
        self._expired = False
        log.info("metadata session held again (%s)", "same session" if same_session else "new")
        for listener in list(self._listeners):
            try:
                listener(same_session)
            except Exception:
                log.exception("metadata session listener failed")

    def on_regained(self, listener: RegainedListener) -> None:
        self._listeners.append(listener)
