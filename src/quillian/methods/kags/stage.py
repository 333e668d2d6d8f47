"""KAGS's build stage: every chunk's 4-tuples, stored with both vector fields.

The 4-tuples come from the index's extractions. Those of the LLM 4-tuple extractor
(``kags-llm``) keep the model's source sentence as given; any other extractor's triples
(spaCy, recorded OpenIE) get the chunk's sentence holding both ends, and a triple with
no such sentence is left out (:func:`~quillian.components.extraction.quads.sentence_quads`).
As in the authors' code, a triple with no source sentence is not stored.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.quads import QUAD_EXTRACTOR, sentence_quads
from quillian.components.retrieval.triple_store import StoredTriple, write_triples
from quillian.index.layout import read_manifest
from quillian.index.stages import BuildState
from quillian.types import Chunk, Triple

__all__ = ["KAGSStage", "stored_triples"]


def stored_triples(
    chunks: Sequence[Chunk],
    extractions: Sequence[Extraction],
    *,
    model_sentences: bool,
    dropped: Counter[str] | None = None,
) -> list[StoredTriple]:
    """The 4-tuples of every chunk, in chunk order; ``model_sentences``: the triples'
    own sentences are the source sentences (LLM 4-tuples)."""
    dropped = Counter() if dropped is None else dropped
    out: list[StoredTriple] = []
    for position, (chunk, extraction) in enumerate(zip(chunks, extractions, strict=True)):
        quads: list[Triple] = (
            list(extraction.triples)
            if model_sentences
            else sentence_quads(extraction, chunk, dropped)
        )
        for t in quads:
            prov = t.provenance
            if prov is None or not prov.sentence.strip():
                dropped["no source sentence"] += 1
                continue
            out.append(
                StoredTriple(
                    t.subject,
                    t.predicate,
                    t.object,
                    prov.sentence,
                    chunk.doc_id,
                    chunk.id,
                    position,
                    prov.start,
                    prov.end,
                )
            )
    return out


class KAGSStage:
    """Stores the 4-tuples of every chunk (see the module docs)."""

    name = "kags"

    def run(self, state: BuildState) -> None:
        extractor = str(
            read_manifest(state.storage.directory).get("config", {}).get("extractor", "")
        )
        dropped: Counter[str] = Counter()
        triples = stored_triples(
            state.chunks,
            state.extractions,
            model_sentences=extractor.startswith(QUAD_EXTRACTOR),
            dropped=dropped,
        )
        chunk_ids = state.chunks.ids
        storage = state.storage
        write_triples(
            storage.kv, storage.vectors, state.embedder, triples, chunk_ids, state.progress
        )
        state.counts["kags_triples"] = len(triples)
        state.counts.update(
            {f"kags_dropped_{why.replace(' ', '_')}": n for why, n in sorted(dropped.items())}
        )
        state.progress("kags", 1, 1)
