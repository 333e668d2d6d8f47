"""Each workspace's watcher: it notices a build completed by another process (another
replica's upload job, ``quillian index`` run elsewhere) and opens it in the background.

Every :data:`POLL_S` seconds the watcher reads the manifest's generation and state: for
a PostgreSQL workspace one indexed read of two fields on a pooled connection
(:func:`~quillian.stores.postgres.manifest_state`), for a directory its
``manifest.json``. When a complete generation other than the opened one appears, it
opens that build on a worker thread (:meth:`~quillian.engine.Engine.refresh`) and swaps
it in at once; requests are served from the build opened before until then, so a
replica that holds an index never answers 503 while another builds. Polling, not
``LISTEN``/``NOTIFY``: two reads a second per replica cost the server nothing worth
measuring, need no connection held open per replica nor a build that notifies, pass
through transaction-pooling proxies (PgBouncer) that drop notifications, and cannot
miss a change made while a replica was cut off; the price is at most half a second of
delay, well inside the 2 s a replica may take to show a new document.

A build that cannot be opened (damaged, the server away) is retried every
:data:`RETRY_S` seconds, the opened build serving meanwhile. With job records shared by
the workspace's replicas, the watcher also takes up the jobs of replicas that stopped,
every :data:`~quillian.server.sharedjobs.ADOPT_EVERY_S` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from quillian.engine import Engine
from quillian.errors import IndexDamagedError, IndexIncompleteError, QuillianError
from quillian.index.layout import MANIFEST, generation, is_server_location, server_backend
from quillian.server.jobs import JobRunner
from quillian.server.sharedjobs import ADOPT_EVERY_S

__all__ = ["POLL_S", "RETRY_S", "IndexWatcher"]

logger = logging.getLogger(__name__)

#: Seconds between two reads of the manifest's generation.
POLL_S = 0.5
#: Seconds before a build that could not be opened is tried again.
RETRY_S = 5.0


class IndexWatcher:
    """Opens the new complete builds of one workspace's index as they appear."""

    def __init__(self, name: str, location: str | Path, engine: Engine, jobs: JobRunner) -> None:
        self.name = name
        self.location = location
        self.engine = engine
        self.jobs = jobs
        self.opened = 0
        """How many builds the watcher opened."""
        self._workspace: Any = None
        self._failed: tuple[int, float] | None = None  # generation, when to retry
        self._said = ""  # the last probe failure logged
        self._adopted = time.monotonic()

    async def run(self) -> None:
        """Watch until cancelled."""
        try:
            while True:
                await asyncio.sleep(POLL_S)
                await self.check()
                if self.jobs.store.shared and time.monotonic() - self._adopted >= ADOPT_EVERY_S:
                    self._adopted = time.monotonic()
                    await self._adopt()
        finally:
            if self._workspace is not None:
                with contextlib.suppress(QuillianError):
                    self._workspace.close()

    async def check(self) -> bool:
        """Open the stored build if it is complete and not the opened one; whether it
        opened one."""
        try:
            state = await asyncio.to_thread(self._probe)
        except QuillianError as exc:
            if str(exc) != self._said:
                logger.warning("workspace %s: cannot read the manifest: %s", self.name, exc)
                self._said = str(exc)
            return False
        self._said = ""
        if state is None or state[1] != "complete" or state[0] == self.engine.opened_generation:
            return False
        if self._failed and self._failed[0] == state[0] and time.monotonic() < self._failed[1]:
            return False
        started = time.perf_counter()
        try:
            opened = await asyncio.to_thread(self.engine.refresh)
        except QuillianError as exc:
            if isinstance(exc, IndexIncompleteError) and not isinstance(exc, IndexDamagedError):
                logger.info("workspace %s: build %d superseded (%s)", self.name, state[0], exc)
                return False  # another build began: the next look tells
            self._failed = (state[0], time.monotonic() + RETRY_S)
            logger.warning(
                "workspace %s: cannot open build %d yet (%s); retrying in %g s",
                self.name,
                state[0],
                exc,
                RETRY_S,
            )
            return False
        self._failed = None
        if opened:
            self.opened += 1
            logger.info(
                "workspace %s: opened build %s in %.2f s",
                self.name,
                self.engine.opened_generation,
                time.perf_counter() - started,
            )
        return opened

    def _probe(self) -> tuple[int, str] | None:
        """The stored manifest's generation and state (None: no manifest)."""
        if not is_server_location(self.location):
            try:
                manifest = json.loads((Path(self.location) / MANIFEST).read_text("utf-8"))
            except (OSError, ValueError):
                return None  # being replaced, or gone: the next look tells
            return generation(manifest), str(manifest.get("state", ""))
        backend = server_backend()
        if self._workspace is None:
            self._workspace = backend.Workspace(str(self.location), create=False)
        state: tuple[int, str] | None = backend.manifest_state(self._workspace)
        return state

    async def _adopt(self) -> None:
        try:
            taken = await self.jobs.adopt()
        except QuillianError as exc:
            logger.warning("workspace %s: cannot take up stopped jobs: %s", self.name, exc)
            return
        if taken:
            logger.info(
                "workspace %s: took up %d job(s) of a replica that stopped", self.name, len(taken)
            )
