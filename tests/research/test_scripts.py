"""Every research script runs as the docs run it (``python research/NAME.py``), importing
``quillian`` like any user's script; and the installed package never imports one."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
RESEARCH = ROOT / "research"
#: Started only by ``index_format.py`` (``index_format_child.py``) and by ``big_file.py``
#: and ``updates.py`` (``scale_child.py``), with their commands and paths as arguments.
CHILDREN = {"index_format_child.py", "scale_child.py"}
#: Imported by other scripts, with no command of their own: the two campaigns of
#: ``faults.py`` (run through it); what the campaigns and ``replicas.py`` share
#: (``fault_tools.py``); the scale benchmarks' process watcher and PostgreSQL server.
PARTS = {"crash.py", "soak.py", "fault_tools.py", "proc_watch.py", "pg_bench.py"}
SCRIPTS = sorted(p.name for p in RESEARCH.glob("*.py") if p.name not in CHILDREN | PARTS)


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_script_prints_its_usage(script: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, f"research/{script}", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:") and "--help" in done.stdout


def test_the_package_names_no_research_module() -> None:
    names = {p.stem for p in RESEARCH.glob("*.py")}
    bench = ROOT / "src" / "quillian" / "bench"
    assert names.isdisjoint(p.stem for p in bench.glob("*.py"))
    for path in (ROOT / "src").rglob("*.py"):
        text = path.read_text(encoding="utf-8")
        lines = [line.split() for line in text.splitlines()]
        imported = {w[1].split(".")[0] for w in lines if len(w) > 1 and w[0] in ("from", "import")}
        assert not imported & (names | {"research"}), path
