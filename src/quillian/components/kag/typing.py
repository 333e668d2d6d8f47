"""Types for untyped extracted entities from spaCy's NER (the no-LLM typing route).

Recorded OpenIE extractions (HippoRAG's GPT-3.5 JSONL) name entities but give them no
type (and document titles are marked ``TITLE``, a role), so KAG's typed graph would put
nearly all of them in ``Others`` and the solver's type constraints would have nothing
to match. Here each chunk holding an untyped
entity is run through spaCy's NER; an entity takes the label of the span with its
(normalised) name in its own chunk, else the label that name carries most often across
the corpus (one sense per name, the usual case; ties go to the first label seen). The
labels are NER codes (``PERSON``, ``GPE``) that the graph builder maps to schema
classes. Each chunk's spans are cached in the key-value store, so a rebuild runs spaCy
only on new chunks.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from quillian.components.extraction.base import Extraction
from quillian.components.extraction.spacy_ner import load_ner_pipeline, read_entities
from quillian.stores.protocols import KeyValueStore
from quillian.types import Chunk, normalize_name

__all__ = ["UNTYPED", "NERTyper", "TypingReport"]

#: Extracted types that say nothing of the entity's class: none at all, or ``TITLE``
#: (a document title found by the gazetteer or the recorded route: a role, not a type).
UNTYPED = frozenset({"", "TITLE"})


@dataclass
class TypingReport:
    """What typing did: entities typed from their own chunk, from the corpus, and left
    untyped (no span of that name anywhere)."""

    typed_in_chunk: int = 0
    typed_in_corpus: int = 0
    untyped: int = 0
    chunks_run: int = 0
    labels: Counter[str] = field(default_factory=Counter)


class NERTyper:
    """Gives untyped entities a spaCy NER label (see the module docstring)."""

    def __init__(
        self,
        kv: KeyValueStore | None = None,
        model: str = "en_core_web_sm",
        *,
        batch_size: int = 64,
    ) -> None:
        self.kv = kv
        self.model = model
        self.batch_size = batch_size
        self.namespace = f"kag-ner:{model}"
        self._nlp: Any = None

    def type(
        self, chunks: Sequence[Chunk], extractions: Sequence[Extraction]
    ) -> tuple[list[Extraction], TypingReport]:
        """``extractions`` with their untyped entities typed where spaCy can."""
        report = TypingReport()
        needed = {e.chunk_id for e in extractions if any(x.type in UNTYPED for x in e.entities)}
        if not needed:
            return list(extractions), report
        spans = self._spans([c for c in chunks if c.id in needed], report)
        corpus: dict[str, Counter[str]] = defaultdict(Counter)
        for by_name in spans.values():
            for name, label in by_name.items():
                corpus[name][label] += 1
        out = []
        for extraction in extractions:
            own = spans.get(extraction.chunk_id, {})
            entities = []
            for entity in extraction.entities:
                if entity.type not in UNTYPED:
                    entities.append(entity)
                    continue
                key = normalize_name(entity.name)
                label = own.get(key, "")
                if label:
                    report.typed_in_chunk += 1
                elif corpus.get(key):
                    label = corpus[key].most_common(1)[0][0]
                    report.typed_in_corpus += 1
                else:
                    report.untyped += 1
                    entities.append(entity)
                    continue
                report.labels[label] += 1
                entities.append(replace(entity, type=label))
            out.append(replace(extraction, entities=tuple(entities)))
        return out, report

    def _spans(self, chunks: Sequence[Chunk], report: TypingReport) -> dict[str, dict[str, str]]:
        """Per chunk id, each NER span's normalised text and label (its first label
        when a name is tagged twice in one chunk)."""
        out: dict[str, dict[str, str]] = {}
        cached = (
            self.kv.get_many(self.namespace, [c.id for c in chunks])
            if self.kv
            else [None] * len(chunks)
        )
        missing = []
        for chunk, raw in zip(chunks, cached, strict=True):
            if raw is None:
                missing.append(chunk)
            else:
                out[chunk.id] = json.loads(raw)
        if missing:
            if self._nlp is None:
                self._nlp = load_ner_pipeline(self.model)
            fresh: dict[str, dict[str, str]] = {}
            texts = [f"{c.title}\n{c.text}" if c.title else c.text for c in missing]
            ents = read_entities(self._nlp, texts, batch_size=self.batch_size)  # long: pieces
            for chunk, text, spans in zip(missing, texts, ents, strict=True):
                found: dict[str, str] = {}
                for label, start, end in spans:
                    found.setdefault(normalize_name(text[start:end]), label)
                fresh[chunk.id] = found
            report.chunks_run = len(missing)
            if self.kv is not None:
                self.kv.put_many(
                    self.namespace, {k: json.dumps(v).encode() for k, v in fresh.items()}
                )
            out.update(fresh)
        return out
