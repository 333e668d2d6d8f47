"""Quillian as a service: an HTTP API over the engine (``quillian serve``).

:func:`quillian.server.app.create_app` builds the FastAPI application from
:class:`~quillian.server.settings.ServerSettings`; each resource has its router in
:mod:`quillian.server.routers`. The server is a thin edge: every request is translated
into an engine call (one :class:`~quillian.engine.Engine` per workspace) and its result
into a pydantic response model. Importing this package needs no web framework; the
app module needs the ``serve`` extra.
"""

from quillian.server.settings import ServerSettings, WorkspaceSpec

__all__ = ["ServerSettings", "WorkspaceSpec"]
