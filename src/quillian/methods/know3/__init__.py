"""Know3-RAG (Liu et al. 2025): KG-embedding confidence decides when to retrieve;
references written by LLMs from the query and its KG-related entities are filtered by
relevance and by the KG-consistency of their triples.

* :mod:`~quillian.methods.know3.config`: options and the threshold θ_t;
* :mod:`~quillian.methods.know3.knowledge`: linking, relative triple scores, related
  entities (Algorithm 1);
* :mod:`~quillian.methods.know3.check`: the KGE check of a text, and ``--verify``;
* :mod:`~quillian.methods.know3.tasks`: the five prompts as typed tasks;
* :mod:`~quillian.methods.know3.pipeline`: the closed loop;
* :mod:`~quillian.methods.know3.stage`: the index's build stage (ComplEx on its graph).
"""

from __future__ import annotations

from quillian.methods.know3.pipeline import Know3RAG
from quillian.methods.know3.stage import KGEStage
from quillian.methods.spec import MethodSpec

__all__ = ["SPECS"]

SPECS = (
    MethodSpec(
        "know3-rag",
        Know3RAG,
        "Know3-RAG: KGE confidence decides when to retrieve; LLM-written references "
        "filtered by relevance and KG consistency",
        needs_kge=True,
        aliases=("know3",),
        index_stages=(KGEStage(),),
    ),
)
