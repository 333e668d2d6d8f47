"""A three-document corpus and its scripted 4-tuples, and a KAGS index over them.

Built with the ``kags-llm`` extractor on a scripted model and the keyword embedder, so
every cosine can be worked out by hand (see ``tests/retrieval/test_kags.py``):

* ``Alpha links Gamma`` from ``"Alpha beta gamma delta."``
* ``Alpha joins Kappa`` from ``"Alpha gamma delta epsilon."``
* ``Gamma meets Lambda`` from ``"Gamma meets Lambda."`` and ``Lambda meets Mu`` from
  ``"Lambda meets Mu."`` (one document holding both sentences)
"""

from __future__ import annotations

import json
from pathlib import Path

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.engine import IndexSettings, index_documents
from quillian.index import BuildReport
from quillian.types import Document

__all__ = ["KAGS_DOCS", "KAGS_REPLIES", "S_ALPHA", "S_KAPPA", "S_LAMBDA", "S_MU", "kags_index"]

S_ALPHA = "Alpha beta gamma delta."
S_KAPPA = "Alpha gamma delta epsilon."
S_LAMBDA = "Gamma meets Lambda."
S_MU = "Lambda meets Mu."
KAGS_DOCS = [
    Document(S_ALPHA, "Alpha"),
    Document(S_KAPPA, "Kappa"),
    Document(f"{S_LAMBDA} {S_MU}", "Lambda"),
]


def _quad(*items: str) -> str:
    return json.dumps(list(items))


#: The scripted extraction replies, routed by a sentence of each document.
KAGS_REPLIES = {
    S_ALPHA: _quad("Alpha", "links", "Gamma", S_ALPHA),
    S_KAPPA: _quad("Alpha", "joins", "Kappa", S_KAPPA),
    S_LAMBDA: "\n".join(
        [_quad("Gamma", "meets", "Lambda", S_LAMBDA), _quad("Lambda", "meets", "Mu", S_MU)]
    ),
}


def kags_index(path: Path) -> BuildReport:
    """Index :data:`KAGS_DOCS` into ``path`` with the KAGS stage."""
    model = ScriptedChatModel(dict(KAGS_REPLIES))
    settings = IndexSettings(extractor="kags-llm", embedder="keyword", methods=("kags",))
    return index_documents(path, KAGS_DOCS, settings, runner=TaskRunner(model, default_registry()))
