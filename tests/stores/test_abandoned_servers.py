"""The PostgreSQL test plugin stops servers whose session was killed before teardown."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

from quillian.testing.postgres import stop_abandoned


def test_a_server_whose_session_is_gone_is_stopped_and_deleted(tmp_path: Path) -> None:
    """Only a server directory whose maker has exited: its postmaster (here a stand-in
    process) gets an immediate shutdown and the directory goes; one whose maker runs,
    one without an owner and a directory of another name stay."""
    gone = subprocess.Popen(["true"])
    gone.wait()
    postmaster = subprocess.Popen(["sleep", "60"])
    try:
        root = tmp_path / "quillian-pg-abandoned"
        (root / "data").mkdir(parents=True)
        (root / "owner").write_text(str(gone.pid))
        (root / "data" / "postmaster.pid").write_text(f"{postmaster.pid}\n{root / 'data'}\n")
        live = tmp_path / "quillian-pg-live"
        live.mkdir()
        (live / "owner").write_text(str(os.getpid()))
        unowned = tmp_path / "quillian-pg-unowned"
        unowned.mkdir()
        other = tmp_path / "another"
        other.mkdir()
        (other / "owner").write_text(str(gone.pid))
        assert stop_abandoned(tmp_path) == [root]
        assert postmaster.wait(timeout=10) == -signal.SIGQUIT
        assert not root.exists() and live.exists() and unowned.exists() and other.exists()
        assert stop_abandoned(tmp_path) == []
    finally:
        postmaster.kill()
        postmaster.wait()


def test_a_server_already_stopped_only_loses_its_directory(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    root = tmp_path / "quillian-pg-stopped"
    (root / "data").mkdir(parents=True)
    (root / "owner").write_text(str(gone.pid))
    (root / "data" / "postmaster.pid").write_text(f"{gone.pid}\n")  # exited too
    assert stop_abandoned(tmp_path) == [root] and not root.exists()
