"""The web UI: static files (HTML, CSS, ES modules and a vendored Cytoscape.js) shipped
in the package and served by the API's own process, ``/`` for the page and ``/ui/`` for
its assets. The page holds no secret, so it is served without the API key; the API
calls it makes carry the key the user typed, kept in the browser's session storage."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

__all__ = ["STATIC", "mount_ui"]

#: Where the UI's files are, inside the installed package.
STATIC = Path(__file__).parent / "static"

#: The page runs only its own scripts and talks only to its own origin.
_POLICY = (
    "default-src 'self'; script-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)


def mount_ui(app: FastAPI) -> tuple[str, ...]:
    """Serve the UI on ``app``; the paths it serves, which need no API key."""
    index = STATIC / "index.html"
    if not index.is_file():
        raise FileNotFoundError(f"the web UI's files are missing from {STATIC}")

    @app.get("/", include_in_schema=False)
    def page() -> FileResponse:
        return FileResponse(
            index,
            media_type="text/html",
            headers={"Content-Security-Policy": _POLICY, "X-Content-Type-Options": "nosniff"},
        )

    app.mount("/ui", StaticFiles(directory=STATIC), name="ui")
    files = sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*") if p.is_file())
    return ("/", *(f"/ui/{name}" for name in files))
