"""The knowledge-graph tests: ``research/`` on ``sys.path``, so the import tests write
their synthetic Wikidata5M-shaped release with ``research/kg_synthetic.py`` (the file
generator of the import's scale study, a script outside the package), imported as
``python research/kg_scale.py`` imports it."""

from __future__ import annotations

import sys
from pathlib import Path

RESEARCH = Path(__file__).parents[2] / "research"
if str(RESEARCH) not in sys.path:
    sys.path.insert(0, str(RESEARCH))
