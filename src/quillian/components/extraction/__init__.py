"""Knowledge-graph extractors: per-chunk entities, descriptions and relations.

Importing this package loads no model: :class:`SpacyExtractor` imports spaCy on first
use, and :class:`PrecomputedExtractor` reads saved LLM output without any model.
"""

from quillian.components.extraction.base import ExtractedEntity, Extraction, Extractor
from quillian.components.extraction.filters import drop_ambiguous_names
from quillian.components.extraction.precomputed import PrecomputedExtractor
from quillian.components.extraction.records import ImportIssue, ImportReport
from quillian.components.extraction.spacy_ner import SpacyExtractor

__all__ = [
    "ExtractedEntity",
    "Extraction",
    "Extractor",
    "ImportIssue",
    "ImportReport",
    "PrecomputedExtractor",
    "SpacyExtractor",
    "drop_ambiguous_names",
]
