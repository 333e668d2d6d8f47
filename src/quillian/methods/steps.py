"""What a method did while answering, as typed step records.

Each step is a frozen dataclass with a ``kind``; :meth:`Step.as_dict` gives the JSON
form (``{"kind": ..., fields...}``) that ``bench qa`` writes and the edges send, and
the CLI renders each kind its own way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

__all__ = [
    "STEP_KINDS",
    "AnswerReasoning",
    "ConfidenceCheck",
    "EnhancedNote",
    "ExpandedQuery",
    "FollowUp",
    "KAGPlan",
    "KAGReflection",
    "KAGStep",
    "KAGTally",
    "KGRound",
    "KGSeed",
    "KGSeeds",
    "KGSummary",
    "Note",
    "Reasoning",
    "ReferenceFilter",
    "RelatedEntities",
    "Retrieval",
    "Step",
    "SubQuestion",
    "TurnAnswer",
]


@dataclass(frozen=True)
class Step:
    """One step of a method's run."""

    kind: ClassVar[str] = "step"

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, **asdict(self)}


@dataclass(frozen=True)
class Retrieval(Step):
    """Passages retrieved for a query (the chunk ids, best first)."""

    kind: ClassVar[str] = "retrieval"
    query: str
    retriever: str
    chunks: tuple[str, ...]


@dataclass(frozen=True)
class Note(Step):
    """A note written from passages (KG-Infused RAG's passage note, Table 12)."""

    kind: ClassVar[str] = "note"
    text: str


@dataclass(frozen=True)
class ExpandedQuery(Step):
    """A query rewritten before retrieval (query expansion; KG-based in KG-Infused RAG)."""

    kind: ClassVar[str] = "expanded-query"
    text: str


@dataclass(frozen=True)
class Reasoning(Step):
    """One round of an iterative reasoning loop (SA-RAG Listings 2 and 7)."""

    kind: ClassVar[str] = "reasoning"
    provided_context: str
    answer_possible: bool
    final_answer: str
    additional_question: str


@dataclass(frozen=True)
class AnswerReasoning(Step):
    """The reasoning a model gave with its final answer."""

    kind: ClassVar[str] = "answer-reasoning"
    text: str


@dataclass(frozen=True)
class SubQuestion(Step):
    """A sub-question of a decomposed question and its answer."""

    kind: ClassVar[str] = "sub-question"
    question: str
    answer: str


@dataclass(frozen=True)
class FollowUp(Step):
    """A Self-Ask follow-up question and its intermediate answer."""

    kind: ClassVar[str] = "follow-up"
    question: str
    answer: str


@dataclass(frozen=True)
class KGSeed:
    """A seed entity of KG spreading activation and its description similarity."""

    entity: str
    score: float


@dataclass(frozen=True)
class KGSeeds(Step):
    """The entities KG spreading activation starts from for a query."""

    kind: ClassVar[str] = "kg-seeds"
    query: str
    seeds: tuple[KGSeed, ...]


@dataclass(frozen=True)
class KGRound(Step):
    """One round of LLM-guided spreading activation over a knowledge graph.

    ``unmatched`` are selections that named no candidate triple; ``repeated`` counts
    selections of a triple already chosen."""

    kind: ClassVar[str] = "kg-round"
    number: int
    entities: tuple[str, ...]
    candidates: int
    selected: tuple[str, ...]
    next_entities: tuple[str, ...]
    unmatched: tuple[str, ...] = ()
    repeated: int = 0


@dataclass(frozen=True)
class KGSummary(Step):
    """The activated subgraph summarised (KG-Infused RAG Table 15)."""

    kind: ClassVar[str] = "kg-summary"
    text: str


@dataclass(frozen=True)
class EnhancedNote(Step):
    """The passage note enhanced with the KG summary (KG-Infused RAG Table 17)."""

    kind: ClassVar[str] = "enhanced-note"
    text: str


@dataclass(frozen=True)
class TurnAnswer(Step):
    """Know3-RAG: the answer of one turn (turn 0 has no references) and its reasoning."""

    kind: ClassVar[str] = "turn-answer"
    turn: int
    answer: str
    reasoning: str
    references: int


@dataclass(frozen=True)
class ConfidenceCheck(Step):
    """A text's triples scored against a KG-embedding model, and the verdict.

    ``score`` is the aggregate relative score (None: no triple could be scored, which
    counts as unreliable); the answer is ``accepted`` when the score is below
    ``threshold``. ``triples`` holds each extracted triple, how its ends and predicate
    were linked, its KG reading and score; ``entities`` the text's spans linked to KG
    entities; ``dropped`` the extracted items dropped before linking, with why;
    ``parse_notes`` how the triple list was read when it was not a JSON list."""

    kind: ClassVar[str] = "confidence-check"
    turn: int
    score: float | None
    threshold: float
    accepted: bool
    triples: tuple[dict[str, Any], ...] = ()
    entities: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    parse_notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class RelatedEntities(Step):
    """Know3-RAG's related-entity search (Algorithm 1) for a query: each entity as
    ``label (source)`` and the KG facts verbalised into the descriptions."""

    kind: ClassVar[str] = "related-entities"
    query: str
    entities: tuple[str, ...]
    facts: tuple[str, ...]


@dataclass(frozen=True)
class ReferenceFilter(Step):
    """One retrieval round of Know3-RAG: each candidate reference (who wrote it, for
    which query), its relevance verdict, its relative score, and whether it was kept."""

    kind: ClassVar[str] = "reference-filter"
    turn: int
    query: str
    candidates: tuple[dict[str, Any], ...]
    kept: int


@dataclass(frozen=True)
class KAGPlan(Step):
    """KAG's plan for one round: the query planned, and each step's sub-question and
    logical form (``error`` set when the plan could not be read)."""

    kind: ClassVar[str] = "kag-plan"
    round: int
    query: str
    steps: tuple[tuple[str, str], ...]
    error: str = ""


@dataclass(frozen=True)
class KAGStep(Step):
    """One executed logical form: which executor and layer answered it (``graph-exact``,
    ``graph-fuzzy``, ``chunks``, ``hybrid``, ``math``, ``sort``, ``deduce``, ``output``
    or ``failed``; runs made before plans ended at their first repeated step also
    recorded ``repeat`` for such a step, not run), the aliases it bound, its answer,
    and the error that stopped it."""

    kind: ClassVar[str] = "kag-step"
    round: int
    index: int
    question: str
    logical_form: str
    executor: str
    layer: str
    bound: tuple[str, ...]
    answer: str
    graph_hit: bool = False
    error: str = ""
    note: str = ""

    @property
    def from_graph(self) -> bool:
        """Answered from the graph alone (no passages)."""
        return self.layer in ("graph-exact", "graph-fuzzy")


@dataclass(frozen=True)
class KAGReflection(Step):
    """The end of a round: the memory, the judge's verdict and the rewritten query;
    ``ended`` says why no further round runs though the judge said no and rounds were
    left (the rewrite gave no question, or one already asked)."""

    kind: ClassVar[str] = "kag-reflection"
    round: int
    memory: str
    can_answer: bool
    next_query: str = ""
    ended: str = ""


@dataclass(frozen=True)
class KAGTally(Step):
    """A KAG run's count, last in its trace: the logical-form steps run (a repeat is
    not run), how many were Retrieval steps, how many of those the graph answered alone
    (``graph-exact`` or ``graph-fuzzy``) and how many matched the graph at all. Users of
    the reference implementation report that its graph path almost never fires."""

    kind: ClassVar[str] = "kag-tally"
    steps: int
    retrieval_steps: int
    graph_answered: int
    graph_hits: int

    @classmethod
    def of(cls, steps: Sequence[Step]) -> KAGTally:
        """The tally of a run's ``steps``."""
        run = [s for s in steps if isinstance(s, KAGStep) and s.layer != "repeat"]
        retrievals = [s for s in run if s.executor == "retrieval"]
        return cls(
            len(run),
            len(retrievals),
            sum(s.from_graph for s in retrievals),
            sum(s.graph_hit for s in retrievals),
        )


#: Every step kind, by name.
STEP_KINDS: dict[str, type[Step]] = {
    cls.kind: cls
    for cls in (
        Retrieval,
        Note,
        ExpandedQuery,
        Reasoning,
        AnswerReasoning,
        SubQuestion,
        FollowUp,
        KGSeeds,
        KGRound,
        KGSummary,
        EnhancedNote,
        TurnAnswer,
        ConfidenceCheck,
        RelatedEntities,
        ReferenceFilter,
        KAGPlan,
        KAGStep,
        KAGReflection,
        KAGTally,
    )
}
