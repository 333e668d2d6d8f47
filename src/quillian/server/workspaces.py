"""The named indexes one server serves, each with its own engine and job runner, so
workspaces share nothing: not an index, not a model session, not a job queue."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from quillian.engine import Engine
from quillian.errors import QuillianError
from quillian.index import read_manifest
from quillian.index.layout import is_server_location
from quillian.server.jobs import JobRunner
from quillian.server.jobstore import JobStore
from quillian.server.privacy import private_paths
from quillian.server.refresh import IndexWatcher
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.server.sharedjobs import SharedJobStore

__all__ = ["UnknownWorkspace", "Workspace", "Workspaces"]

logger = logging.getLogger(__name__)


class UnknownWorkspace(QuillianError, LookupError):
    """A request named a workspace this server does not serve."""


@dataclass
class Workspace:
    name: str
    spec: WorkspaceSpec
    engine: Engine
    jobs: JobRunner
    watcher: IndexWatcher

    def manifest(self) -> dict[str, object]:
        return read_manifest(self.spec.location)


class Workspaces:
    """The workspaces by name, opened and closed together (the app's lifespan)."""

    def __init__(self, settings: ServerSettings) -> None:
        self.settings = settings
        self._open: dict[str, Workspace] = {}
        self._stack = contextlib.AsyncExitStack()
        self._private = private_paths(settings)
        for spec in settings.workspaces:  # a missing index fails at start, not on use
            read_manifest(spec.location)

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.settings.workspaces]

    @property
    def default(self) -> str:
        return self.settings.workspaces[0].name

    def get(self, name: str) -> Workspace:
        workspace = self._open.get(name)
        if workspace is None:
            raise UnknownWorkspace(
                f"no workspace {name!r}; this server has {', '.join(self.names)}"
            )
        return workspace

    def __iter__(self) -> Iterator[Workspace]:
        return iter(self._open.values())

    async def open(self) -> None:
        s = self.settings
        for spec in s.workspaces:
            engine = Engine.open(
                spec.location,
                refresh_s=None,  # the watcher opens new builds, off the requests' path
                pin_vectors=True,  # answer from the opened build while another builds
                llm=s.llm,
                kg=s.kg,
                api_key=s.llm_api_key,
                cache_path=s.cache_path,
                concurrency=s.concurrency,
                workers=s.workers,
                blas_threads=s.blas_threads,
                retriever_options=s.retriever_options,
            )
            await self._stack.enter_async_context(engine)
            store = await asyncio.to_thread(_job_store, s, spec)
            self._stack.callback(store.close)
            runner = JobRunner(engine, store, private=self._private)
            self._stack.push_async_callback(runner.stop)
            watcher = IndexWatcher(spec.name, spec.location, engine, runner)
            self._open[spec.name] = Workspace(spec.name, spec, engine, runner, watcher)
            resumed = runner.start()
            self._stack.push_async_callback(_cancel, asyncio.create_task(watcher.run()))
            if resumed:
                logger.info("workspace %s: resuming %d unfinished job(s)", spec.name, len(resumed))
            elif read_manifest(spec.location).get("state") == "complete":
                # open the index now, so the first query does not pay for it
                with contextlib.suppress(QuillianError):
                    await asyncio.to_thread(_open_index, engine)

    async def close(self) -> None:
        await self._stack.aclose()
        self._open.clear()


def _job_store(settings: ServerSettings, spec: WorkspaceSpec) -> JobStore | SharedJobStore:
    """The workspace's job records: in a PostgreSQL workspace itself, shared by every
    replica serving it (with the unfinished jobs of the local records an older server
    kept), else in the state directory."""
    if is_server_location(spec.location):
        return SharedJobStore(str(spec.location), legacy=settings.state_for(spec))
    return JobStore(settings.state_for(spec))


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def _open_index(engine: Engine) -> None:
    """Open the engine's index (it keeps it)."""
    assert engine.index is not None
