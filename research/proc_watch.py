"""Run a command and watch it: wall time, peak resident memory, a time and memory cap.

Shared by the scale benchmarks (``research/big_file.py``,
``research/updates.py``). Peak memory is the largest sum of resident set sizes
over the process and its children, sampled with psutil every ``interval`` seconds, so
a peak shorter than the interval may be missed; the kernel's own high-water mark of
the main process (``ru_maxrss`` of the waited child) is reported beside it. On Linux
that mark survives ``execve``: a child started by a process that was once large
reports the starter's peak if it is higher, so drive benchmarks from a small process.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psutil

__all__ = ["Watched", "python_env", "watch"]

GIB = 1024**3


@dataclass(frozen=True)
class Watched:
    """What one watched command did."""

    seconds: float
    peak_rss_gb: float
    """Largest sampled RSS of the process tree, GiB."""
    maxrss_gb: float
    """The kernel's peak RSS of the main process (its ``ru_maxrss``), GiB."""
    cpu_s: float
    """User plus system CPU seconds of the process and the children it waited for: less
    sensitive than wall time to other work on a shared machine."""
    returncode: int
    stopped: str | None
    """``timeout`` or ``memory`` when the watcher killed it, else None."""
    stdout: str
    stderr_tail: str

    def summary(self) -> dict[str, Any]:
        """The figures without the captured stdout."""
        out = asdict(self)
        del out["stdout"]
        return out


def python_env(src: Path | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a Python child importing Quillian from ``src/`` of the
    source tree ``src`` (None: the current ``PYTHONPATH``)."""
    env = {**os.environ, **(extra or {})}
    if src is not None:
        env["PYTHONPATH"] = str(src / "src")
    return env


def _tree_rss(proc: psutil.Process) -> int:
    try:
        procs = [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def _kill_tree(proc: psutil.Process) -> None:
    try:
        children = proc.children(recursive=True)
    except psutil.Error:
        children = []
    for p in [*children, proc]:
        with contextlib.suppress(psutil.Error):
            p.kill()


def watch(
    command: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 3600.0,
    max_rss_gb: float = 12.0,
    interval: float = 0.2,
    cwd: Path | None = None,
) -> Watched:
    """Run ``command`` to its end (or kill it past ``timeout`` seconds or
    ``max_rss_gb`` of resident memory) and return what it did."""
    start = time.perf_counter()
    child = subprocess.Popen(
        list(command),
        env=dict(env) if env is not None else None,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    proc = psutil.Process(child.pid)
    peak, stopped = 0, None
    out_parts: list[str] = []
    err_parts: list[str] = []
    readers = [
        threading.Thread(target=lambda: out_parts.append(child.stdout.read()), daemon=True),  # type: ignore[union-attr]
        threading.Thread(target=lambda: err_parts.append(child.stderr.read()), daemon=True),  # type: ignore[union-attr]
    ]
    for r in readers:
        r.start()
    while True:
        pid, status, usage = os.wait4(child.pid, os.WNOHANG)
        if pid:
            break
        peak = max(peak, _tree_rss(proc))
        if stopped is None and peak > max_rss_gb * GIB:
            stopped = "memory"
        elif stopped is None and time.perf_counter() - start > timeout:
            stopped = "timeout"
        if stopped:
            _kill_tree(proc)
        time.sleep(interval)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join()
    return Watched(
        seconds=seconds,
        peak_rss_gb=peak / GIB,
        maxrss_gb=usage.ru_maxrss * 1024 / GIB,
        cpu_s=usage.ru_utime + usage.ru_stime,
        returncode=child.returncode,
        stopped=stopped,
        stdout="".join(out_parts),
        stderr_tail="".join(err_parts)[-2000:],
    )
