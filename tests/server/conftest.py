"""Fixtures of the server tests: a small index (spaCy, keyword embedder) built once, and
fresh copies of it for tests that change it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from quillian.testing.server import ROUTES, build_index


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
