"""The research scripts' tests: ``research/`` first on ``sys.path``, so a test imports a
script (``from ppr_solvers import main``) as ``python research/ppr_solvers.py`` runs it,
and the two fixtures these tests share with the benchmark and KG-embedding tests."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

TESTS = Path(__file__).parents[1]
RESEARCH = TESTS.parent / "research"
if str(RESEARCH) not in sys.path:
    sys.path.insert(0, str(RESEARCH))


def _conftest(folder: str) -> ModuleType:
    """``tests/FOLDER/conftest.py`` loaded under a name of its own (its fixtures reused)."""
    spec = importlib.util.spec_from_file_location(
        f"_research_shared_{folder}", TESTS / folder / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hotpot_index = _conftest("bench").hotpot_index
ring = _conftest("kge").ring
