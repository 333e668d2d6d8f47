"""The benchmarks' PostgreSQL server stopped where a killed run left it held."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import pg_bench  # research/, put on the path by conftest.py


@pytest.fixture
def postmaster() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing in for the server's postmaster (ends on SIGINT, as a fast
    shutdown does)."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield process
    process.kill()
    process.wait()


def _data(tmp_path: Path, postmaster: int, holders: list[int]) -> Path:
    """A data directory as the wheel leaves it: the postmaster's pid, the handles'."""
    (tmp_path / "postmaster.pid").write_text(f"{postmaster}\n{tmp_path}\n", encoding="utf-8")
    (tmp_path / ".handle_pids.json").write_text(json.dumps(holders), encoding="utf-8")
    return tmp_path


def _gone_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_server_only_a_killed_run_still_holds_is_stopped(
    tmp_path: Path, postmaster: subprocess.Popen[bytes]
) -> None:
    """The wheel's list names a run that is gone (killed before its cleanup): the
    server is stopped, by SIGINT, and waited for."""
    data = _data(tmp_path, postmaster.pid, [_gone_pid()])
    assert pg_bench.stop_when_abandoned(data, wait=10.0)
    assert postmaster.poll() is not None


def test_a_server_a_live_run_holds_is_left_running(
    tmp_path: Path, postmaster: subprocess.Popen[bytes]
) -> None:
    """Another run still holds a handle (this process here): the server goes on."""
    data = _data(tmp_path, postmaster.pid, [_gone_pid(), os.getpid()])
    assert not pg_bench.stop_when_abandoned(data, wait=10.0)
    assert postmaster.poll() is None


def test_a_directory_without_a_running_server_is_left_alone(tmp_path: Path) -> None:
    """No postmaster file, or one naming a process that is gone: nothing to stop."""
    assert not pg_bench.stop_when_abandoned(tmp_path)
    assert not pg_bench.stop_when_abandoned(_data(tmp_path, _gone_pid(), []))
