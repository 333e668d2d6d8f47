"""KAG's operator executors (Algorithm 2; spec sections 4.5 and 4.6) over one round's
variable bindings.

``Retrieval`` links the logical form's entities (0.9 exact / 0.8 fuzzy), expands one
hop, and answers from the graph when the predicate matches exactly (no LLM call);
otherwise it lets the model pick among the top SPO candidates by cosine, and falls back
to chunk retrieval (PageRank seeded with the bound entities, fused with dense, BM25
swap-in) with a sub-answer. ``Sort``, ``Math`` and numeric ``Deduce`` compute over the
bound values without a model; ``Math`` uses the whitelist evaluator. ``Output`` returns
the bound values. Every failure is a recorded step, never an exception.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from quillian.components.kag import tasks
from quillian.components.kag.graph import KagEdge
from quillian.components.kag.knowledge import CHUNK_PREDICATES, KagKnowledge, Linked
from quillian.components.kag.logic_form import (
    Constraint,
    DeduceLF,
    EntityRef,
    MathLF,
    OutputLF,
    PlanStep,
    RetrievalLF,
    SortLF,
    inputs_of,
)
from quillian.components.kag.math_eval import MathError, Number, Value, as_number, evaluate
from quillian.components.kag.schema import CHUNK
from quillian.components.llm.tasks import TaskRunner, Transcript
from quillian.components.retrieval.base import ScoredPassage, Seed
from quillian.components.retrieval.kag import KAGChunkRetriever
from quillian.types import normalize_name

__all__ = ["Binding", "Frame", "Outcome", "SolverSettings", "StepExecutor"]

IDK = tasks.IDK


@dataclass(frozen=True)
class SolverSettings:
    """What the executors need from the method's configuration."""

    force_chunk: bool = False
    graph_enabled: bool = True
    exact_threshold: float = 0.9
    fuzzy_threshold: float = 0.8
    fuzzy_top_k: int = 15
    fuzzy_floor: float = 0.3
    chunk_k: int = 10


@dataclass
class Binding:
    """What an alias holds: graph nodes (with their link score) and/or values."""

    nodes: list[int] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    score: float = 1.0


@dataclass
class Frame:
    """One round's state: bindings, node pairs linking aliases, answered steps and the
    passages retrieved."""

    bindings: dict[str, Binding] = field(default_factory=dict)
    links: dict[tuple[str, str], list[tuple[int, int]]] = field(default_factory=dict)
    history: list[tuple[str, str]] = field(default_factory=list)
    passages: list[ScoredPassage] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    all_exact: bool = True
    solved: list[str] = field(default_factory=list)

    def history_text(self, limit: int | None = None) -> str:
        pairs = [(q, a) for q, a in self.history if not tasks.is_unknown(a)]
        pairs = pairs[:limit] if limit else pairs
        return "\n".join(f"query{i}: {q}\nanswer{i}: {a}" for i, (q, a) in enumerate(pairs, 1))


@dataclass(frozen=True)
class Outcome:
    """What one step did."""

    executor: str
    layer: str
    answer: str
    bound: tuple[str, ...] = ()
    graph_hit: bool = False
    error: str = ""
    note: str = ""


Retrieve = Callable[[str, int, list[Seed]], Awaitable[list[ScoredPassage]]]


class StepExecutor:
    """Runs one parsed step against the knowledge, the chunk retriever and the model."""

    def __init__(
        self,
        knowledge: KagKnowledge,
        chunks: KAGChunkRetriever,
        retrieve: Retrieve,
        runner: TaskRunner,
        transcript: Transcript,
        settings: SolverSettings,
    ) -> None:
        self.kn = knowledge
        self.chunks = chunks
        self.retrieve = retrieve
        self.runner = runner
        self.transcript = transcript
        self.settings = settings

    async def run(self, step: PlanStep, frame: Frame) -> Outcome:
        form = step.form
        if form is None or step.error:
            outcome = Outcome(form.operator if form else "none", "failed", IDK, error=step.error)
            frame.history.append((step.question, IDK))
            frame.all_exact = False
            return outcome
        if isinstance(form, RetrievalLF):
            outcome = await self.retrieval(step.question, form, frame)
        elif isinstance(form, SortLF):
            outcome = self.sort(form, frame)
        elif isinstance(form, MathLF):
            outcome = self.math(form, frame)
        elif isinstance(form, DeduceLF):
            outcome = await self.deduce(step.question, form, frame)
        else:
            outcome = await self.output(step.question, form, frame)
        frame.history.append((step.question, outcome.answer))
        return outcome

    # --- Retrieval ----------------------------------------------------------------------

    def _resolve(
        self, ref: EntityRef, question: str, frame: Frame, broaden: int = 0, fresh: bool = False
    ) -> tuple[list[int], float] | None:
        """The nodes an entity reference stands for and their weakest link score; None
        for a free variable. ``fresh``: the side that binds its alias anew, read from its
        type and name only."""
        bound = None if fresh else frame.bindings.get(ref.alias)
        if bound is not None and (bound.nodes or not ref.name):
            return bound.nodes, bound.score
        if ref.name:
            linked = self.kn.link(
                ref.name, ref.types, question, threshold=self.settings.fuzzy_threshold
            )
            return [x.node for x in linked], min((x.score for x in linked), default=0.0)
        if ref.types and not any(t.casefold() == CHUNK.casefold() for t in ref.types):
            nodes = self.kn.nodes_of_type(ref.types, broaden=broaden)
            return (nodes, 1.0) if nodes or broaden else None
        return None

    async def retrieval(self, question: str, form: RetrievalLF, frame: Frame) -> Outcome:
        graph = self.settings.graph_enabled
        fresh = form.rebound
        s_set = self._resolve(form.s, question, frame, fresh=fresh is form.s) if graph else None
        o_set = self._resolve(form.o, question, frame, fresh=fresh is form.o) if graph else None
        reasoned = ""
        if graph and not self._any_pair(s_set, o_set):
            for level in (1, 2):  # Algorithm A2: start again from a broader concept
                ref = form.o if _type_only(form.o) else form.s if _type_only(form.s) else None
                if ref is None:
                    break
                wider = self._resolve(ref, question, frame, broaden=level, fresh=fresh is ref)
                trial = (s_set, wider) if ref is form.o else (wider, o_set)
                if wider and wider[0] and self._any_pair(*trial):
                    s_set, o_set = trial
                    reasoned = f"{ref.alias}: type {ref.types[0]!r} broadened {level} isA level(s)"
                    break
        is_chunk = any(_squash(t) in CHUNK_PREDICATES for t in form.p.types) or any(
            t.casefold() == CHUNK.casefold() for t in form.o.types
        )
        matches: list[tuple[int, int, int]] = []
        exact, candidates, from_s = False, 0, True
        if s_set and s_set[0]:
            start, far = s_set, o_set
        elif o_set and o_set[0]:
            start, far, from_s = o_set, s_set, False
        else:
            start, far = None, None
        if start is not None:
            pairs = self._expand(start[0], far, from_s, is_chunk)
            exact_pairs = [
                (a, b, e)
                for a, b, e in pairs
                if self._predicate_ok(form, self.kn.graph.edges[e], is_chunk)
                and self._constraints_hold(form.constraints, a, b, self.kn.graph.edges[e])
            ]
            weakest = min(start[1], far[1] if far and far[0] else 1.0)
            if exact_pairs and weakest >= self.settings.exact_threshold:
                matches, exact = exact_pairs, True
            elif pairs and not is_chunk:
                matches, candidates = await self._fuzzy(question, form, pairs)
        facts = [self._fact(e) for _, _, e in matches]
        if matches:
            self._bind(form, matches, frame)
            frame.facts.extend(facts)
        if exact and not self.settings.force_chunk:
            ends = [b for _, b, _ in matches] if from_s else [a for a, _, _ in matches]
            answer = ", ".join(dict.fromkeys(self.kn.value(n) for n in ends))
            return Outcome(
                "retrieval", "graph-exact", answer, self._bound(form, frame), True, note=reasoned
            )
        frame.all_exact = False
        if matches and not exact and not self.settings.force_chunk:
            answer = await self._sub_answer(question, frame, facts, [])
            if not tasks.is_unknown(answer):
                return Outcome("retrieval", "graph-fuzzy", answer, self._bound(form, frame), True)
        answer = await self._from_chunks(question, form, frame, facts)
        self._bind_answer(form, answer, frame)
        note = f"no fuzzy pick among {candidates} candidates" if candidates and not matches else ""
        layer = "hybrid" if facts else "chunks"
        return Outcome(
            "retrieval", layer, answer, self._bound(form, frame), bool(matches), note=note
        )

    def _any_pair(
        self, s_set: tuple[list[int], float] | None, o_set: tuple[list[int], float] | None
    ) -> bool:
        """Whether a one-hop relation joins the two sides (either side may be free)."""
        if s_set and s_set[0]:
            return bool(self._expand(s_set[0], o_set, True, False))
        if o_set and o_set[0]:
            return bool(self._expand(o_set[0], s_set, False, False))
        return False

    def _predicate_ok(self, form: RetrievalLF, edge: KagEdge, is_chunk: bool) -> bool:
        if is_chunk or not form.p.types:
            return True
        return any(self.kn.predicate_matches(edge.predicate, t) for t in form.p.types)

    def _expand(
        self, start: list[int], far: tuple[list[int], float] | None, from_s: bool, is_chunk: bool
    ) -> list[tuple[int, int, int]]:
        """(s node, o node, edge) for the one-hop edges of the start nodes whose far
        end is in the far set (any, for a free variable)."""
        far_nodes = set(far[0]) if far is not None else None
        out: list[tuple[int, int, int]] = []
        start_set = set(start)
        for e in self.kn.one_hop(start, chunks=is_chunk):
            edge = self.kn.graph.edges[e]
            for near, other in ((edge.subject, edge.object), (edge.object, edge.subject)):
                if near not in start_set or (far_nodes is not None and other not in far_nodes):
                    continue
                if is_chunk and self.kn.graph.nodes[other].label != CHUNK:
                    continue
                out.append((near, other, e) if from_s else (other, near, e))
        return out

    def _constraints_hold(
        self, constraints: Sequence[Constraint], s: int, o: int, edge: KagEdge
    ) -> bool:
        for c in constraints:
            props = (
                dict(edge.props)
                if c.target == "p"
                else dict(self.kn.graph.nodes[s if c.target == "s" else o].props)
            )
            have = props.get(c.prop)
            if have is None:
                folded = {k.casefold(): v for k, v in props.items()}
                have = folded.get(c.prop.casefold())
            if have is None or not _compare(have, c.op, c.value):
                return False
        return True

    async def _fuzzy(
        self, question: str, form: RetrievalLF, pairs: list[tuple[int, int, int]]
    ) -> tuple[list[tuple[int, int, int]], int]:
        edges = list(dict.fromkeys(e for _, _, e in pairs))
        ranked = self.kn.rank_spo(
            question, edges, self.settings.fuzzy_top_k, self.settings.fuzzy_floor
        )
        if not ranked:
            return [], 0
        texts = [self.kn.graph.spo_text(e) for e in ranked]
        mention = (
            f"{_show(form.s)} {form.p.types[0] if form.p.types else form.p.alias} {_show(form.o)}"
        )
        chosen = await self.runner.run(
            tasks.SPO_SELECT,
            self.transcript,
            question=question,
            mention=mention,
            candidates="\n".join(f"{i}: {t}" for i, t in enumerate(texts)),
        )
        keep = {ranked[i] for i in chosen if 0 <= i < len(ranked)}
        return [(a, b, e) for a, b, e in pairs if e in keep], len(ranked)

    def _bind(self, form: RetrievalLF, matches: list[tuple[int, int, int]], frame: Frame) -> None:
        s_nodes = list(dict.fromkeys(a for a, _, _ in matches))
        o_nodes = list(dict.fromkeys(b for _, b, _ in matches))
        sides = [(form.s.alias, s_nodes), (form.o.alias, o_nodes)]
        for alias, nodes in sides[::-1] if form.rebound is form.s else sides:  # rebound last
            frame.bindings[alias] = Binding(nodes, [self.kn.value(n) for n in nodes])
        frame.bindings[form.p.alias] = Binding(
            [], [self.kn.graph.edges[e].predicate for _, _, e in matches]
        )
        frame.links[(form.s.alias, form.o.alias)] = [(a, b) for a, b, _ in matches]
        frame.links[(form.o.alias, form.s.alias)] = [(b, a) for a, b, _ in matches]

    def _fact(self, e: int) -> str:
        nodes, edge = self.kn.graph.nodes, self.kn.graph.edges[e]
        obj = nodes[edge.object]
        target = f"chunk {obj.name}" if obj.label == CHUNK else obj.name
        return f"({nodes[edge.subject].name}, {edge.predicate}, {target})"

    def _bound(self, form: RetrievalLF, frame: Frame) -> tuple[str, ...]:
        out = []
        for alias in dict.fromkeys((form.s.alias, form.o.alias)):
            b = frame.bindings.get(alias)
            if b and b.values:
                shown = [v if len(v) <= 60 else v[:57] + "..." for v in b.values[:5]]
                out.append(f"{alias}={'; '.join(shown)}")
        return tuple(out)

    async def _from_chunks(
        self, question: str, form: RetrievalLF, frame: Frame, facts: list[str]
    ) -> str:
        previous = frame.history_text(3)
        query = f"{previous}\n{question}" if previous else question
        names: list[tuple[str, float]] = []
        for alias in dict.fromkeys((form.s.alias, form.o.alias)):
            b = frame.bindings.get(alias)
            if b:
                names += [(self.kn.graph.nodes[n].name, b.score) for n in b.nodes[:20]]
        for ref in (form.s, form.o):
            if ref.name:
                names.append((ref.name, 1.0))
        seeds = self.chunks.seeds_for(names)
        passages = await self.retrieve(query, self.settings.chunk_k, seeds)
        frame.passages.extend(passages)
        return await self._sub_answer(question, frame, facts, passages)

    async def _sub_answer(
        self, question: str, frame: Frame, facts: Sequence[str], passages: Sequence[ScoredPassage]
    ) -> str:
        return await self.runner.run(
            tasks.SUB_ANSWER,
            self.transcript,
            history=frame.history_text() or "(none)",
            facts="\n".join(facts) or "(none)",
            passages="\n\n".join(f"{p.title}: {p.text}" if p.title else p.text for p in passages)
            or "(none)",
            question=question,
        )

    def _bind_answer(self, form: RetrievalLF, answer: str, frame: Frame) -> None:
        """A chunk answer for a variable the graph left unbound: its value, and the
        nodes it names (so a later step can start from them)."""
        if tasks.is_unknown(answer):
            return
        for ref in (form.o, form.s):
            b = frame.bindings.get(ref.alias)
            if b and b.nodes and ref is not form.rebound:
                continue
            linked: list[Linked] = self.kn.link(
                answer, ref.types, threshold=self.settings.fuzzy_threshold
            )
            frame.bindings[ref.alias] = Binding(
                [x.node for x in linked], [answer], min((x.score for x in linked), default=1.0)
            )
            return

    # --- Sort, Math, Deduce, Output -----------------------------------------------------

    def _values(self, alias: str, frame: Frame) -> list[str]:
        b = frame.bindings.get(alias)
        return [v for v in b.values if not tasks.is_unknown(v)] if b else []

    def sort(self, form: SortLF, frame: Frame) -> Outcome:
        keyed: list[tuple[Number, str]] = []
        try:
            for alias in form.sets:
                b = frame.bindings.get(alias)
                if b is None or not (b.nodes or b.values):
                    return _failed("sort", f"alias {alias!r} holds no values")
                if form.orderby:
                    pairs = frame.links.get((alias, form.orderby), [])
                    if not pairs:
                        return _failed("sort", f"no values of {form.orderby!r} for {alias!r}")
                    for member, value in pairs:
                        keyed.append((as_number(self.kn.value(value)), self.kn.value(member)))
                else:
                    keyed += [(as_number(v), v) for v in self._values(alias, frame)]
        except ValueError as exc:
            return _failed("sort", f"cannot order by a value that is not a number ({exc})")
        keyed.sort(key=lambda item: item[0], reverse=form.direction == "max")
        top = list(dict.fromkeys(name for _, name in keyed))[: form.limit]
        if form.output:
            frame.bindings[form.output] = Binding([], top)
        frame.solved = top
        return Outcome(
            "sort",
            "sort",
            ", ".join(top),
            (f"{form.output or 'sorted'}={'; '.join(top)}",),
        )

    def math(self, form: MathLF, frame: Frame) -> Outcome:
        if not form.expression:
            return _failed(
                "math",
                "Math(content=..., target=...) names no expression; Quillian evaluates "
                "arithmetic itself and never runs model-written code",
            )
        bindings: dict[str, Value] = {}
        for alias in inputs_of(form):
            values = self._values(alias, frame)
            if not values:
                return _failed("math", f"alias {alias!r} holds no value")
            try:
                numbers = [as_number(v) for v in values]
            except ValueError as exc:
                if alias in frame.bindings and "count(" in form.expression:
                    numbers = [0] * len(values)  # count() needs members, not numbers
                else:
                    return _failed("math", f"alias {alias!r}: {exc}")
            bindings[alias] = (
                numbers[0] if len(numbers) == 1 and "count(" not in form.expression else numbers
            )
        try:
            result = evaluate(form.expression, bindings)
        except MathError as exc:
            return _failed("math", str(exc))
        text = _show_number(result)
        if form.output:
            frame.bindings[form.output] = Binding([], [text])
        frame.solved = [text]
        return Outcome("math", "math", text, (f"{form.output or 'math'}={text}",))

    async def deduce(self, question: str, form: DeduceLF, frame: Frame) -> Outcome:
        def resolve(item: str) -> str:
            values = self._values(item, frame)
            return "; ".join(values) if values else item

        left, right = resolve(form.left), resolve(form.right)
        op = form.ops[0]
        if op in ("greater", "less", "equal") and left and right:
            try:
                a, b = as_number(left), as_number(right)
            except ValueError:
                pass
            else:
                verdict = {"greater": a > b, "less": a < b, "equal": a == b}[op]
                text = "yes" if verdict else "no"
                if form.output:
                    frame.bindings[form.output] = Binding([], [text])
                frame.solved = [text]
                return Outcome("deduce", "deduce", text, (f"{form.output or 'deduce'}={text}",))
        # Both operands are the model's evidence when both are bound ("which is older":
        # o1 and o2 hold the two dates), each under its alias; a constant right operand
        # is what left must entail or match, so it stays the target.
        if right and self._values(form.right, frame):
            operands, target = [f"{form.left}: {left}", f"{form.right}: {right}"], form.target
        else:
            operands, target = [left] if left else [], form.target or right
        memory = "\n".join([*(resolve(c) for c in form.content), *operands])
        instruction = f"{question}\ntarget: {target}" if target else question
        answers = []
        for op in form.ops:
            answers.append(
                await self.runner.run(
                    tasks.DEDUCE,
                    self.transcript,
                    op=op,
                    memory=memory or "(none)",
                    instruction=instruction,
                )
            )
        text = "; ".join(a for a in answers if not tasks.is_unknown(a)) or IDK
        frame.all_exact = False
        if form.output:
            frame.bindings[form.output] = Binding([], [text])
        return Outcome("deduce", "deduce", text, (f"{form.output or 'deduce'}={text}",))

    async def output(self, question: str, form: OutputLF, frame: Frame) -> Outcome:
        values: list[str] = []
        for alias in form.aliases:
            values += self._values(alias, frame)
        values = list(dict.fromkeys(values))
        if values:
            frame.solved = values
            return Outcome(
                "output", "output", ", ".join(values), tuple(f"{a}" for a in form.aliases)
            )
        frame.all_exact = False
        answer = await self.runner.run(
            tasks.OUTPUT,
            self.transcript,
            context=frame.history_text() or "(none)",
            question=question,
        )
        return Outcome("output", "output", answer)


def _failed(executor: str, error: str) -> Outcome:
    return Outcome(executor, "failed", IDK, error=error)


def _type_only(ref: EntityRef) -> bool:
    return bool(ref.types) and not ref.name


def _squash(text: str) -> str:
    return normalize_name(text).replace(" ", "").replace("_", "")


def _show(ref: EntityRef) -> str:
    kind = ref.types[0] if ref.types else "Entity"
    return f"{kind}[{ref.name}]" if ref.name else kind


def _show_number(value: Number) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(round(value, 6) if isinstance(value, float) else value)


_OPS = {
    "=": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    ">": operator.gt,
    "<=": operator.le,
    ">=": operator.ge,
}


def _compare(have: str, op: str, want: str) -> bool:
    try:
        a: Any = as_number(have)
        b: Any = as_number(want)
    except ValueError:
        a, b = normalize_name(have), normalize_name(want)
        if op not in ("=", "!="):
            return False
    return bool(_OPS[op](a, b))
