"""(c) A two-process Ray cluster on this machine, on loopback: a head node and a worker
node, each started by ``ray start --block`` in its own process, and a build through it
(``--ray 127.0.0.1:PORT``) compared with the single-process build.

Ray 2.60's ``ray start`` turns ``--node-ip-address=127.0.0.1`` into the machine's
interface address (``services.resolve_ip_for_localhost``) and then binds its servers to
every interface; the switch that keeps a local instance on loopback
(``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) also forbids a second node. So each node is
started through a wrapper that keeps the loopback address as given. Token
authentication is asked for explicitly (``RAY_AUTH_MODE=token``, the token in
``~/.ray/auth_token``) for both nodes and the driver: left unset, ``ray start`` and
``ray.init`` decide it differently (by whether a token file exists), which is the
authentication error a joining node met in a quick try.

    python research/ray_cluster_bench.py /work/shared/bench/hotpotqa/corpus.json --limit 100
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from quillian.components.ingestion.readers import read_documents
from quillian.engine import IndexSettings, RayOptions, index_documents, index_on_ray
from quillian.index.ray_cluster import listeners_off_loopback
from ray_index import _digest, _prepare

#: Runs ``ray`` with loopback addresses kept as given.
WRAPPER = (
    "import sys; import ray._private.services as s; "
    "s.resolve_ip_for_localhost = lambda host: host; "
    "from ray.scripts.scripts import main; sys.argv[0] = 'ray'; main()"
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", type=Path)
    parser.add_argument("--limit", type=int, default=100)
    parser.add_argument("--embedder", default="keyword")
    args = parser.parse_args()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    os.environ.update(RAY_AUTH_MODE="token")
    port = _free_port()
    common = ["--node-ip-address=127.0.0.1", "--disable-usage-stats", "--block", "--num-cpus=1"]
    nodes: list[subprocess.Popen[bytes]] = []
    with tempfile.TemporaryDirectory(prefix="ray-cluster-") as tmp:
        work = Path(tmp)
        try:
            head = ["start", "--head", f"--port={port}", "--include-dashboard=false"]
            nodes.append(_start([*head, *common], env, work / "head.log"))
            _wait_for(port)
            worker = ["start", f"--address=127.0.0.1:{port}"]
            nodes.append(_start([*worker, *common], env, work / "worker.log"))
            time.sleep(10)
            off = listeners_off_loopback([p for n in nodes for p in _tree(n.pid)])
            print(f"nodes up; listening off loopback: {off or 'nothing'}")
            corpus = _prepare(args.corpus, args.limit, work / "corpus.json")
            settings = IndexSettings(embedder=args.embedder)
            start = time.perf_counter()
            index_documents(work / "single", read_documents(corpus), settings)
            single = time.perf_counter() - start
            start = time.perf_counter()
            options = RayOptions(address=f"127.0.0.1:{port}", workers=1)
            index_on_ray(work / "cluster", [corpus], settings, options)
            cluster = time.perf_counter() - start
            questions = [corpus.read_text()[:60]]
            same = _digest(work / "single", args.embedder, questions) == _digest(
                work / "cluster", args.embedder, questions
            )
            print(f"single process {single:.1f} s; two-node cluster {cluster:.1f} s; same: {same}")
        finally:
            for node in nodes:
                _stop(node)
            for log in sorted(work.glob("*.log")):
                tail = log.read_text(errors="replace").strip().splitlines()[-3:]
                print(f"{log.name}: " + " | ".join(tail))


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", WRAPPER, *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _tree(pid: int) -> list[psutil.Process]:
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def _stop(node: subprocess.Popen[bytes]) -> None:
    """Stop a node: its ``ray start --block`` process and everything it started."""
    family = _tree(node.pid)
    os.killpg(node.pid, signal.SIGTERM)
    _, alive = psutil.wait_procs(family, timeout=15)
    for proc in alive:
        proc.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"the head node did not listen on 127.0.0.1:{port}")


if __name__ == "__main__":
    main()
