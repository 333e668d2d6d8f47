"""Fixtures of the server tests: a small index (spaCy, keyword embedder) built once, and
fresh copies of it for tests that change it; Debian's chromium for the browser tests."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from quillian.testing.server import ROUTES, build_index

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="session")
def built_index(tmp_path_factory) -> Path:
    return build_index(tmp_path_factory.mktemp("built") / "idx")


@pytest.fixture
def index_copy(built_index, tmp_path) -> Path:
    """A fresh copy of the built index, for tests that change it."""
    target = tmp_path / "idx"
    shutil.copytree(built_index, target)
    return target


@pytest.fixture
def routes_file(tmp_path) -> Path:
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(ROUTES))
    return path


@pytest.fixture(scope="session")
def browser_type_launch_args():
    """pytest-playwright launches Debian's chromium: Playwright cannot download its own
    here, and no GPU, sandbox or background network is needed."""
    return {
        "executable_path": CHROMIUM,
        "args": [
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


@pytest.fixture(scope="module")
def playwright(_pw_api_request_contexts):
    """pytest-playwright's Playwright, for this module only: its sync API holds an event
    loop on the main thread while it runs, so kept for the whole session (the plugin's
    default) it would break every later test that calls ``asyncio.run``."""
    with sync_playwright() as started:
        if _pw_api_request_contexts:
            _pw_api_request_contexts.instrument(started)
        yield started


@pytest.fixture(scope="module")
def browser_type(playwright):
    return playwright.chromium


@pytest.fixture(scope="module")
def browser(browser_type, browser_type_launch_args):
    launched = browser_type.launch(**browser_type_launch_args)
    yield launched
    launched.close()
