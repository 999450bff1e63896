"""Wait in the triggerer until the leader's binlog moves past a pipeline's checkpoint."""

from __future__ import annotations

import asyncio
import time
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from ..hooks.follower import FollowerRef, follower_hook, follower_reference
from ..hooks.leader import LeaderHook
from ..capture.leader import Leader
from ..hooks.pipeline import FollowerProgress

SUCCESS = "success"
TIMEOUT = "timeout"
ERROR = "error"


class LeaderAdvancedTrigger(BaseTrigger):
    """Fires ``success`` once the leader is past the checkpoint, ``timeout`` at ``deadline``.

    Its kwargs are what the metadata DB stores for a deferred task: connection ids, never
    credentials; the deadline as epoch seconds, so a restarted triggerer keeps the same one.
    The trigger enforces the deadline itself (rather than relying on ``defer(timeout=...)``)
    because ``dag.test()`` runs triggers inline without deferral timeouts, and because a
    timeout here is an ordinary outcome (nothing new: skip), not a failure.
    """

    def __init__(self, pipeline: str, leader_conn_id: str, follower: FollowerRef, deadline: float,
                 poke_interval: float):
        super().__init__()
        self.pipeline = pipeline
        self.leader_conn_id = leader_conn_id
        self.follower = follower_reference(follower)  # JSON-safe (hooks.follower)
        self.deadline = float(deadline)
        self.poke_interval = float(poke_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "pipeline": self.pipeline,
                "leader_conn_id": self.leader_conn_id,
                "follower": self.follower,
                "deadline": self.deadline,
                "poke_interval": self.poke_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        try:
            # Connections are resolved once, asynchronously; the polling itself is blocking
            # PyMySQL, so it runs in a thread and never stalls the triggerer's other triggers.
            leader = await LeaderHook(self.leader_conn_id).asettings()
            follower = await follower_hook(self.follower).aspec()
            # The follower's state is read once: only this pipeline's merge moves it, and no merge
            # runs while its run waits here (one run at a time). Each poke is then one query on one
            # leader connection, which matters for a continuous pipeline waiting an hour: no state
            # read (for a lake, object-store requests) and no new connection every second.
            progress = await asyncio.to_thread(FollowerProgress.read, follower, self.pipeline)
            server = Leader(leader)
            try:
                event = await self._poll(progress, server)
            finally:
                await asyncio.to_thread(server.close)
        except Exception as exc:  # the task turns this into a failure with the message
            event = TriggerEvent({"status": ERROR, "message": f"{type(exc).__name__}: {exc}"})
        yield event

    async def _poll(self, progress: FollowerProgress, server: Leader) -> TriggerEvent:
        """The leader asked every ``poke_interval`` until it is past the follower (``success``) or
        the deadline passes (``timeout``)."""
        while True:
            status = await asyncio.to_thread(progress.against, server)
            if status.has_changes:
                return TriggerEvent({"status": SUCCESS, **status.to_json()})
            remaining = self.deadline - time.time()
            if remaining <= 0:
                return TriggerEvent({"status": TIMEOUT, **status.to_json()})
            await asyncio.sleep(min(self.poke_interval, remaining))
