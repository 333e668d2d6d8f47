"""Ray for the Ray executor of a build (extra ``ray``): imported on first use, kept on
loopback and offline.

``--ray local`` starts a one-machine Ray instance in this process and stops it when the
build ends; ``--ray HOST:PORT`` (or ``ray://HOST:PORT``) joins a running cluster, which
is checked for a listener first so an address nothing answers on fails in
:data:`CONNECT_TIMEOUT` seconds with one line. Usage statistics are off and no dashboard
starts. By default Ray advertises, and binds its servers to, the machine's interface
address even when asked for 127.0.0.1 (``ray.init`` resolves a loopback
``_node_ip_address`` to it); for a local instance or a cluster on a loopback address,
Ray is told it runs on one machine (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``), which
keeps every Ray process on 127.0.0.1. Both variables are read when Ray is imported (the
second is also set on Ray's constant should Ray be imported already).
"""

from __future__ import annotations

import logging
import os
import re
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from ipaddress import ip_address
from types import ModuleType
from typing import Any
from urllib.parse import urlsplit

import psutil

from quillian.errors import ConfigError, MissingExtraError, QuillianError, WorkerError

__all__ = [
    "CONNECT_TIMEOUT",
    "LOCAL",
    "import_ray",
    "is_loopback",
    "listeners_off_loopback",
    "ray_processes",
    "ray_session",
    "worker_errors",
]

#: ``--ray local``: a Ray instance started for the build, in this process.
LOCAL = "local"
#: Seconds a cluster address has to accept a connection.
CONNECT_TIMEOUT = 5.0
_LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
#: A traceback's last line: ``module.ErrorName: message``.
_RAISED = re.compile(r"^[\w.]+(Error|Exception|Exhausted|Exit): ")


def is_loopback(address: str) -> bool:
    """Whether ``address`` is ``local`` or a cluster on this machine's loopback."""
    return address == LOCAL or _host_port(address)[0] in _LOOPBACK_HOSTS


def import_ray(address: str = LOCAL) -> ModuleType:
    """Ray, imported with usage statistics off (and, for a loopback ``address``, on
    loopback only); names the extra to install when Ray is missing."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if is_loopback(address):
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    try:
        import ray
        import ray.data
        from ray._private import ray_constants
    except ImportError as exc:
        raise MissingExtraError(exc.name or "ray", "ray") from exc
    if is_loopback(address):
        # read once at import: Ray may have been imported before this (Ray 2.60's own
        # name for the variable above; what listens is checked by the tests)
        ray_constants.ENABLE_RAY_CLUSTER = False
    return ray


@contextmanager
def ray_session(address: str = LOCAL, *, num_cpus: int = 2) -> Iterator[ModuleType]:
    """Ray, connected for the length of the block: ``local`` starts an instance with
    ``num_cpus`` CPUs, any other address joins that cluster. When this process already
    runs Ray (a caller's own session), it is used as it is and left running."""
    if address != LOCAL:
        _check_reachable(address)
    ray = import_ray(address)
    if ray.is_initialized():
        yield ray
        return
    common = {"log_to_driver": False, "logging_level": logging.WARNING}
    if address == LOCAL:
        ray.init(
            address=LOCAL,
            num_cpus=num_cpus,
            include_dashboard=False,
            _node_ip_address="127.0.0.1",
            **common,
        )
    else:
        ray.init(address=address, **common)
    try:
        quiet_data(ray)
        yield ray
    finally:
        ray.shutdown()


def quiet_data(ray: ModuleType) -> None:
    """No progress bars or per-dataset log lines from Ray Data (the build reports its
    own progress)."""
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)


def _host_port(address: str) -> tuple[str, int | None]:
    parts = urlsplit(address if "://" in address else f"//{address}")
    try:
        return parts.hostname or "", parts.port
    except ValueError:
        return parts.hostname or "", None


def _check_reachable(address: str) -> None:
    """Refuse, in one line and within :data:`CONNECT_TIMEOUT`, an address nothing
    listens on (Ray itself would retry for minutes)."""
    host, port = _host_port(address)
    if not host or port is None:
        raise ConfigError(
            f"--ray {address}: expected 'local' or a cluster address HOST:PORT (or ray://HOST:PORT)"
        )
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as exc:
        raise ConfigError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); start it "
            "with `ray start --head` or use --ray local"
        ) from None


@contextmanager
def worker_errors(ray: ModuleType) -> Iterator[None]:
    """Ray's errors as one line: a Quillian error a worker raised (a malformed input
    file, a missing extra, an unreachable store) as itself, anything else that stopped
    the job (a worker that died for good, a bug) as :class:`WorkerError`."""
    try:
        yield
    except ray.exceptions.RayError as exc:
        chain = _causes(exc)
        ours = [e for e in chain if isinstance(e, QuillianError)]
        if ours:
            raise ours[0] from None
        user = [e for e in chain if not type(e).__module__.startswith("ray.")]
        why = f"{type(user[0]).__name__}: {_first_line(user[0])}" if user else _last_line(exc)
        raise WorkerError(f"the Ray job failed: {why}") from None


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, breadth first (Ray keeps a task's error as ``cause``)."""
    seen: list[BaseException] = []
    todo: list[BaseException | None] = [exc]
    while todo:
        err = todo.pop(0)
        if err is None or any(err is s for s in seen):
            continue
        seen.append(err)
        todo += [getattr(err, "cause", None), err.__cause__, err.__context__]
    return seen


def _first_line(exc: BaseException) -> str:
    return next((line.strip() for line in str(exc).splitlines() if line.strip()), "")


def _last_line(exc: BaseException) -> str:
    """The line of Ray's message naming the error a worker raised (a Quillian error
    first: Ray cannot always send the error itself back), else its last line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if _RAISED.match(line)]
    ours = [line for line in raised if line.startswith("quillian.errors.")]
    chosen = (ours or raised or lines or [type(exc).__name__])[-1]
    return chosen.removeprefix("quillian.errors.")


def ray_processes() -> list[Any]:
    """This process and every process it started (a local Ray instance's GCS, raylet
    and workers), as :class:`psutil.Process` objects."""
    me = psutil.Process()
    return [me, *me.children(recursive=True)]


def listeners_off_loopback(processes: Sequence[Any] | None = None) -> list[str]:
    """Each TCP socket one of ``processes`` (default: :func:`ray_processes`) listens on
    at an address other than loopback, as ``name pid address:port``; empty when all
    of Ray stays on this machine."""
    found: list[str] = []
    for proc in processes if processes is not None else ray_processes():
        try:
            connections = proc.net_connections(kind="tcp")
            name = proc.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for conn in connections:
            if conn.status != psutil.CONN_LISTEN:
                continue
            address = ip_address(conn.laddr.ip)
            mapped = getattr(address, "ipv4_mapped", None)
            if not (mapped or address).is_loopback:
                found.append(f"{name} {proc.pid} {conn.laddr.ip}:{conn.laddr.port}")
    return found
