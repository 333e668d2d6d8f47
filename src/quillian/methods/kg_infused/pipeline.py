"""KG-Infused RAG (section 3; Appendix D, E.1): a pre-existing knowledge graph, read by
LLM-guided spreading activation, expands the query and enriches the passages.

For a query q, :class:`KGInfusion` runs the paper's three modules:

1. **KG-guided spreading activation** (section 3.3). Seeds ``E^0`` = the ``k_e``
   entities whose descriptions best match q (eq. 3). Round i fetches the 1-hop triples
   of ``E^i`` (at most ``max_triples_per_entity`` each); the LLM selects the relevant
   ones (Table 13 in round 1, Table 14 with the activation memory after); the memory
   ``M = {G_act, E_act}`` takes the union (eq. 4); ``E^{i+1}`` = tails of the newly
   selected triples minus ``E_act`` (eq. 5), at most ``max_entities_per_round``.
   Activation stops after ``rounds`` rounds or when ``E^{i+1}`` is empty. The LLM then
   summarises ``G_act`` (Table 15).
2. **KG-based query expansion** (section 3.4): q' from q and the summary (Table 16,
   eq. 6); ``k_p/2`` passages for q and ``k_p/2`` for q', merged without duplicates
   (eq. 7).
3. **KG-augmented generation** (section 3.5): a passage note (Table 12, eq. 8), the note
   enhanced with the summary (Table 17, eq. 9), and the answer from it (Table 10, eq. 10).

Ablations (section 5.3, Table 4): without query expansion, ``k_p`` passages come from q
alone; without knowledge augmentation, the answer comes from the passage note; without
both, the KG is not read at all (what remains is Vanilla RAG with its note).

The plug-ins of Appendix G are in :mod:`quillian.methods.kg_infused.plugins`.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from quillian.components.concurrency import Offload, to_thread
from quillian.components.generation.evidence import format_passages
from quillian.components.generation.kg_outputs import (
    TripleSelection,
    format_triples,
    parse_enhanced_passage,
    parse_summary,
    parse_triple_selection,
)
from quillian.components.generation.outputs import parse_line
from quillian.components.generation.tasks import ANSWER_PASSAGES, NOTE, PASSAGE_NOTE, SHORT
from quillian.components.kg.base import ExternalGraph, KGTriple
from quillian.components.llm.base import Decoding
from quillian.components.llm.tasks import Task, TaskRunner, Transcript
from quillian.components.retrieval.base import Retriever, ScoredPassage
from quillian.errors import ConfigError
from quillian.methods.base import PipelineBase, Retrieve, Run, dual_retrieve
from quillian.methods.steps import (
    EnhancedNote,
    ExpandedQuery,
    KGRound,
    KGSeed,
    KGSeeds,
    KGSummary,
    Note,
)

__all__ = [
    "AUGMENT_KNOWLEDGE",
    "KG_EXPAND_QUERY",
    "MAX_ROUNDS",
    "SUMMARISE_SUBGRAPH",
    "ActivationMemory",
    "ActivationRound",
    "FactNote",
    "KGInfusedConfig",
    "KGInfusedRAG",
    "KGInfusion",
    "KGModuleConfig",
    "KGModules",
    "next_round_entities",
    "selection_task",
    "spread_activation",
]

#: The most activation rounds the paper runs (section 4.4: "set to six"; Figure 2).
MAX_ROUNDS = 6

SELECTION = Decoding(max_tokens=512)
AUGMENTATION = Decoding(max_tokens=448)

#: Table 15: the activated subgraph as a summary.
SUMMARISE_SUBGRAPH: Task[str] = Task("kg-infused.subgraph-summary", parse_summary, NOTE)
#: Table 16: KG-based query expansion.
KG_EXPAND_QUERY: Task[str] = Task("kg-infused.kg-query-expansion", parse_line, SHORT)
#: Table 17: KG-guided knowledge augmentation of the passage note (greedy decoding; the
#: DPO data samples it with six decodings, :mod:`quillian.methods.kg_infused.dpo`).
AUGMENT_KNOWLEDGE: Task[str] = Task(
    "kg-infused.knowledge-augment", parse_enhanced_passage, AUGMENTATION
)


def selection_task(
    candidates: Sequence[KGTriple], previous: Sequence[KGTriple], *, first: bool
) -> Task[TripleSelection]:
    """Triple selection over ``candidates``: Table 13 in the first round, Table 14 (which
    also shows ``previous``, the memory's subgraph) after. A reply whose triples all
    match no candidate gets one repair attempt, then counts as an empty selection."""
    prompt = "kg-infused.triple-select" if first else "kg-infused.triple-update"
    parse = functools.partial(
        parse_triple_selection, candidates=candidates, previous=previous, prompt=prompt
    )
    return Task(prompt, parse, SELECTION, fallback=functools.partial(parse, strict=False))


def _positive(**values: int) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ConfigError(f"{name} must be greater than 0, got {value}")


@dataclass(frozen=True)
class KGModuleConfig:
    """KG-Infused RAG's KG modules; defaults from the paper's main setting."""

    k_e: int = 3
    """Seed entities (section 4.4: top k_e = 3)."""
    rounds: int = 2
    """Activation rounds at most, 1-6 (Table 1 reports 2 rounds; section 4.4 allows six)."""
    max_triples_per_entity: int = 20
    """MAX_TRIPLES_PER_ENTITY (section 4.4 names the cap, the paper gives no value):
    triples fetched per activated entity, so hubs (countries) cannot flood the prompt."""
    max_entities_per_round: int = 5
    """MAX_ENTITIES_PER_ROUND (section 4.4 names the cap, the paper gives no value): new
    entities activated per round, the first tails in the order the LLM selected them."""
    query_expansion: bool = True
    """KG-based query expansion (Table 4 ablates it: k_p passages for the question)."""
    knowledge_augmentation: bool = True
    """KG-guided knowledge augmentation (Table 4 ablates it: answer from the note)."""

    def __post_init__(self) -> None:
        _positive(
            k_e=self.k_e,
            max_triples_per_entity=self.max_triples_per_entity,
            max_entities_per_round=self.max_entities_per_round,
        )
        if not 1 <= self.rounds <= MAX_ROUNDS:
            raise ConfigError(f"rounds must be in 1..{MAX_ROUNDS}, got {self.rounds}")

    @property
    def uses_kg(self) -> bool:
        """Whether anything reads the KG summary (not in the "w/o both" ablation)."""
        return self.query_expansion or self.knowledge_augmentation

    def check_passages(self, k: int, name: str = "k") -> None:
        """Reject a passage budget that leaves a query without passages."""
        _positive(**{name: k})
        if self.query_expansion and k < 2:
            raise ConfigError(f"{name} must be at least 2 with query expansion, got {k}")


@dataclass(frozen=True)
class KGInfusedConfig(KGModuleConfig):
    """KG-Infused RAG: the KG modules and the passage budget."""

    k_p: int = 6
    """Passages (section 4.4: k_p = 6; with query expansion k_p/2 = 3 per query)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.check_passages(self.k_p, "k_p")


@dataclass(frozen=True)
class ActivationRound:
    """One round: its entities ``E^i``, the triples shown, what was selected, ``E^{i+1}``."""

    number: int
    entities: tuple[int, ...]
    candidates: tuple[KGTriple, ...]
    selection: TripleSelection
    next_entities: tuple[int, ...]


@dataclass
class ActivationMemory:
    """The activation memory ``M = {G_act, E_act}`` (eq. 4) and how it was built."""

    seeds: list[tuple[int, float]] = field(default_factory=list)
    subgraph: list[KGTriple] = field(default_factory=list)
    activated: dict[int, None] = field(default_factory=dict)
    rounds: list[ActivationRound] = field(default_factory=list)


def _ident(t: KGTriple) -> tuple[int, str, int]:
    return t.fact  # a fact met from both of its ends is one triple


def next_round_entities(
    selected: Iterable[KGTriple], activated: Iterable[int], limit: int
) -> list[int]:
    """Eq. 5: the tails of the selected triples that are not activated yet, each once,
    in selection order, at most ``limit``."""
    seen = set(activated)
    out: list[int] = []
    for t in selected:
        if t.tail not in seen:
            seen.add(t.tail)
            out.append(t.tail)
    return out[:limit]


def _candidates(
    found: dict[int, list[KGTriple]], entities: Sequence[int], selected: Sequence[KGTriple]
) -> list[KGTriple]:
    """The round's 1-hop triples, entity by entity, each once, minus those in ``G_act``."""
    known = {_ident(t) for t in selected}
    out: dict[tuple[int, str, int], KGTriple] = {}
    for e in entities:
        for t in found.get(e, []):
            if _ident(t) not in known:
                out.setdefault(_ident(t), t)
    return list(out.values())


async def spread_activation(
    runner: TaskRunner,
    graph: ExternalGraph,
    query: str,
    config: KGModuleConfig,
    transcript: Transcript,
    offload: Offload = to_thread,
) -> ActivationMemory:
    """KG-guided spreading activation from ``query`` (section 3.3); graph look-ups run
    through ``offload``, off the event loop."""
    found_seeds = await offload(graph.seed_entities, query, config.k_e)
    seeds = [(int(e), float(s)) for e, s in found_seeds if e >= 0]
    memory = ActivationMemory(seeds=seeds)
    current = list(dict.fromkeys(e for e, _ in seeds))
    for number in range(1, config.rounds + 1):
        if not current:
            break
        memory.activated.update(dict.fromkeys(current))
        found = await offload(graph.triples, current, config.max_triples_per_entity)
        shown = _candidates(found, current, memory.subgraph)
        selection = TripleSelection()
        if shown:
            values = {"question": query, "triples": format_triples(shown)}
            if number > 1:
                values["selected_triples"] = format_triples(memory.subgraph)
            task = selection_task(shown, memory.subgraph, first=number == 1)
            selection = await runner.run(task, transcript, **values)
        memory.subgraph.extend(selection.triples)
        upcoming = next_round_entities(
            selection.triples, memory.activated, config.max_entities_per_round
        )
        memory.rounds.append(
            ActivationRound(number, tuple(current), tuple(shown), selection, tuple(upcoming))
        )
        current = upcoming
    return memory


@dataclass(frozen=True)
class FactNote:
    """What the KG modules produced for one query. ``final`` is what answers rest on: the
    fact-enhanced note, or the passage note without knowledge augmentation."""

    query: str
    passages: tuple[ScoredPassage, ...]
    note: str
    summary: str = ""
    expanded_query: str = ""
    enhanced: str = ""
    memory: ActivationMemory | None = None

    @property
    def final(self) -> str:
        return self.enhanced or self.note


class KGInfusion:
    """KG-Infused RAG's modules for one query, shared by the pipeline and the plug-ins.
    Steps go into ``run.steps``, selected triples into the run's evidence."""

    def __init__(
        self,
        runner: TaskRunner,
        graph: ExternalGraph,
        config: KGModuleConfig,
        *,
        offload: Offload = to_thread,
    ) -> None:
        self.runner = runner
        self.graph = graph
        self.config = config
        self.offload = offload

    async def activate(self, run: Run, query: str) -> ActivationMemory:
        memory = await spread_activation(
            self.runner, self.graph, query, self.config, run.transcript, self.offload
        )
        name = self.graph.entity_name
        seeds = tuple(KGSeed(name(e), round(s, 4)) for e, s in memory.seeds)
        run.steps.append(KGSeeds(query, seeds))
        for r in memory.rounds:
            run.steps.append(
                KGRound(
                    number=r.number,
                    entities=tuple(name(e) for e in r.entities),
                    candidates=len(r.candidates),
                    selected=tuple(t.text() for t in r.selection.triples),
                    next_entities=tuple(name(e) for e in r.next_entities),
                    unmatched=tuple(r.selection.unmatched),
                    repeated=r.selection.repeated,
                )
            )
        run.evidence.add_kg_triples(memory.subgraph)
        return memory

    async def summarise(self, run: Run, query: str, memory: ActivationMemory) -> str:
        summary = await self.runner.run(
            SUMMARISE_SUBGRAPH,
            run.transcript,
            question=query,
            selected_triples=format_triples(memory.subgraph),
        )
        run.steps.append(KGSummary(summary))
        return summary

    async def gather(
        self, run: Run, query: str, summary: str, retrieve: Retrieve, k: int
    ) -> tuple[str, list[ScoredPassage]]:
        """The expanded query ("" without expansion) and the merged passages (eq. 7)."""
        if not self.config.query_expansion:
            passages, _ = await retrieve(run, query, k)
            return "", passages
        expanded = await self.runner.run(
            KG_EXPAND_QUERY, run.transcript, question=query, triples_summary=summary
        )
        run.steps.append(ExpandedQuery(expanded))
        return expanded, await dual_retrieve(retrieve, run, query, expanded, k)

    async def note(self, run: Run, query: str, passages: Sequence[ScoredPassage]) -> str:
        note = await self.runner.run(
            PASSAGE_NOTE, run.transcript, question=query, passages=format_passages(passages)
        )
        run.steps.append(Note(note))
        return note

    async def augment(self, run: Run, query: str, note: str, summary: str) -> str:
        enhanced = await self.runner.run(
            AUGMENT_KNOWLEDGE,
            run.transcript,
            question=query,
            passage=note,
            triples_summary=summary,
        )
        run.steps.append(EnhancedNote(enhanced))
        return enhanced

    async def fact_note(
        self, run: Run, query: str, retrieve: Retrieve, k: int, *, augment: bool = True
    ) -> FactNote:
        """All three modules for ``query`` with ``k`` passages. ``augment=False`` stops
        before knowledge augmentation (the DPO data samples that step itself)."""
        memory, summary = None, ""
        if self.config.uses_kg:
            memory = await self.activate(run, query)
            summary = await self.summarise(run, query, memory)
        expanded, passages = await self.gather(run, query, summary, retrieve, k)
        note = await self.note(run, query, passages)
        enhanced = ""
        if augment and self.config.knowledge_augmentation:
            enhanced = await self.augment(run, query, note, summary)
        return FactNote(query, tuple(passages), note, summary, expanded, enhanced, memory)


class KGModules(PipelineBase):
    """A pipeline that also reads a knowledge graph, through KG-Infused RAG's modules
    (``self.kg``); its configuration holds the modules' settings."""

    config: KGModuleConfig

    def __init__(
        self,
        runner: TaskRunner,
        retriever: Retriever | None,
        graph: ExternalGraph,
        config: KGModuleConfig | None = None,
        *,
        offload: Offload | None = None,
    ) -> None:
        super().__init__(runner, retriever, config, offload=offload)
        self.kg = KGInfusion(runner, graph, self.config, offload=self.offload)


class KGInfusedRAG(KGModules):
    """KG-Infused RAG: the KG modules for the question, then the answer (Table 10) from
    the fact-enhanced note."""

    name = "kg-infused-rag"
    config_class = KGInfusedConfig
    config: KGInfusedConfig

    async def _answer(self, run: Run) -> str:
        fact = await self.kg.fact_note(run, run.question, self.retrieve, self.config.k_p)
        return await self.runner.run(
            ANSWER_PASSAGES, run.transcript, question=run.question, passages=fact.final
        )

    async def prepare(self, run: Run) -> FactNote:
        """The modules up to knowledge augmentation, not including it: the input of the
        step the paper trains with DPO (Appendix F)."""
        return await self.kg.fact_note(
            run, run.question, self.retrieve, self.config.k_p, augment=False
        )
