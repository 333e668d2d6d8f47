"""Rank fusion of several retrievers over one index: reciprocal rank fusion (Cormack,
Clarke and Büttcher, SIGIR 2009), ``score(c) = sum over retrievers of 1 / (rrf_k +
rank(c))``, over each retriever's top ``depth`` passages.

RRF needs no score calibration between members (spreading activation and PageRank
scores live on different scales). The paper's ``rrf_k = 60`` damps the first ranks:
it was set for pools of many TREC runs ranking 1,000 documents, where agreement
deep in the lists is the signal. Here two strong members rank a handful of passages
that often differ (one finds the second hop, the other does not), so the default is
``rrf_k = 1``: each member's first passages stay near the top, and a passage both
rank high still goes first (chosen by cross-validation; see ``FusedConfig.rrf_k``).
Equal fused scores (frequent at a small constant: one member's second passage and the
other's) are ordered by the members' own evidence, the sum of each member's score
divided by its best score (CombSUM), then by chunk position.
Each of the first ``second_hops`` fused passages is then followed by its second hop,
the passage its relation nearest the question leads to
(:mod:`~quillian.components.retrieval.second_hop`).
The trace keeps the first member's seeds, activations and relations (the subgraph
the answer's evidence came from), its paths to the passages fused returns (and the
link each second hop came through), and each member's time.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from quillian.components.retrieval.base import (
    ActivationPath,
    RetrievalResult,
    RetrievalTrace,
    Retriever,
    ScoredPassage,
    check_k,
)
from quillian.components.retrieval.context import RetrievalContext
from quillian.components.retrieval.second_hop import chain, hop_path, words
from quillian.errors import ConfigError

__all__ = ["FusedConfig", "FusedRetriever"]


@dataclass(frozen=True)
class FusedConfig:
    members: str = "sa,ppr"
    """The retrievers fused, separated by commas or ``+`` (``sa+ppr``, as a
    ``bench tune`` grid writes them), built with their defaults; one member alone is
    its own ranking (with the second hops, when on), so a grid can set the fusion
    against one of its members. The default fuses SA-RAG's spreading activation and
    HippoRAG's personalized PageRank (damping 0.5); against ``ppr`` alone it gains
    +0.046 of the dev sets' metrics out of sample (1,000 half-splits pooled over 2Wiki,
    MuSiQue and HotpotQA), positive on every set. KAG's chunk retriever (``kag``,
    PageRank at damping 0.1 fused with dense) was a third member until that procedure
    found its gain does not survive out of sample (pooled -0.003 to +0.000 with 2Wiki's
    6,119 passages, where it wins one question; -0.010 with the first 800), and a
    default whose gain does not survive goes (docs/benchmarks.md, "Choosing defaults
    that hold"). ``members=sa,ppr,kag`` restores it."""
    rrf_k: int = 1
    """RRF's rank constant (the paper's 60). 1: on the four dev sets, 5-fold
    cross-validation over 1, 0, 2, 5, 10, 20, 60 chooses 1 or 0 in every fold (they
    tie on three sets; 0 is 0.007 better on MuSiQue spaCy); sa+ppr at 1 scores
    2Wiki-800 0.961, MuSiQue spaCy 0.793, GPT 0.792, HotpotQA 0.890 against 0.941,
    0.760, 0.775, 0.890 at 60 (8 questions won, 2 lost), at or above the better
    member on every set (docs/sections/lift2.md). With ``kag`` as a third member the
    same cross-validation over 0, 1, 2, 5, 10, 60 picked 0 or 1 in 18 of 20 folds, and
    with the second hops on, in all 20 (docs/benchmarks.md, "Tuning by
    cross-validation"). 1 rather than 0 so that a
    passage two members rank second outranks one that a single member ranks first."""
    depth: int = 50
    """How many passages of each member's ranking take part."""
    workers: int = 2
    """Threads that run the members: the caller and ``workers - 1`` helpers, each
    taking the next member in order when it is free (list scheduling); 1 runs them one
    after the other. The PageRank members spend most of their time in sparse products,
    which release the GIL, beside ``sa``'s Python: on all 6,119 2Wiki passages ``fused``
    took 11.3 ms p50 with its three members in turn and 8.84 ms on two threads (8.69
    for ``sa``+``ppr`` in the same run; docs/benchmarks.md, "Retrieval lift, round
    10"). The fused ranking is the same either way."""

    second_hops: int = 2
    """Follow each of the first N fused passages by its second hop, placed right after
    it: the page its relation nearest the question leads to (the paragraph nearest the
    question, where the page has several), or the passage whose relation names its own
    entity (:mod:`~quillian.components.retrieval.second_hop`); 0: off. 2: over the
    grid 0, 1, 2, 3, 5, leaving each dev set out in turn and choosing on the others
    picks 2 for HotpotQA, MuSiQue's spaCy graph and 2Wiki (where every value ties) and 5
    for MuSiQue's GPT-3.5 graph (where 2 scores better, 0.805 against 0.788); against 0,
    R@5 on HotpotQA 0.91 -> 0.95 and on MuSiQue 0.800 -> 0.810 and 0.795 -> 0.805, 9
    questions won and 2 lost, 2Wiki level (docs/benchmarks.md, "Retrieval lift, round
    11"). For another corpus, ``quillian bench tune --method fused --grid
    second_hops=0,1,2,3,5``."""

    skip_named_titles: bool = True
    """Pass over a second hop to a page whose title (without its qualifier) the question
    names: a page the question names is a first hop. The entities the question names
    are passed over anyway; this catches the titles their match missed ("Benton Fraser"
    inside the longer "Constable Benton Fraser"). On the report's indexes it won one
    HotpotQA question and changed no other ranking's recall (docs/benchmarks.md,
    "Retrieval lift, round 11")."""

    def __post_init__(self) -> None:
        if self.second_hops < 0:
            raise ConfigError(f"second_hops must be >= 0, got {self.second_hops}")
        if self.rrf_k < 0 or self.depth < 1:
            raise ConfigError("rrf_k must be >= 0 and depth >= 1")
        if self.workers < 1:
            raise ConfigError(f"workers must be at least 1, got {self.workers}")
        if not self.names:
            raise ConfigError(f"rank fusion needs one or more members, got {self.members!r}")

    @property
    def names(self) -> list[str]:
        return [n.strip() for n in re.split(r"[,+]", self.members) if n.strip()]


class FusedRetriever:
    """Reciprocal rank fusion of ``members`` (named ``fused:a+b``); second hops need
    the members' ``context``."""

    def __init__(
        self,
        members: Sequence[Retriever],
        config: FusedConfig | None = None,
        context: RetrievalContext | None = None,
    ) -> None:
        if not members:
            raise ConfigError("rank fusion needs at least one retriever")
        self.members = list(members)
        self.config = config or FusedConfig()
        if self.config.second_hops and context is None:
            raise ConfigError("second hops need the index's retrieval context")
        self.context = context
        self.name = "fused"
        self._helpers = min(self.config.workers, len(self.members)) - 1
        self._pool = ThreadPoolExecutor(self._helpers, "fused") if self._helpers > 0 else None

    def _run_members(
        self, query: str, depth: int, query_vector: npt.NDArray[np.float32] | None
    ) -> tuple[list[RetrievalResult], dict[str, float]]:
        """Every member's ranking, in the members' order, and each one's milliseconds:
        the caller and the helper threads take the members in turn from one queue."""
        results: list[RetrievalResult | None] = [None] * len(self.members)
        timings: dict[str, float] = {}
        queue = iter(range(len(self.members)))
        lock = threading.Lock()

        def drain() -> None:
            while True:
                with lock:
                    i = next(queue, None)
                if i is None:
                    return
                start = time.perf_counter()
                results[i] = self.members[i].retrieve(query, depth, query_vector)
                timings[self.members[i].name] = (time.perf_counter() - start) * 1000

        pool = self._pool
        helpers = [pool.submit(drain) for _ in range(self._helpers)] if pool else []
        drain()
        for helper in helpers:
            helper.result()  # a member's error is raised here
        return [r for r in results if r is not None], timings

    def retrieve(
        self, query: str, k: int, query_vector: npt.NDArray[np.float32] | None = None
    ) -> RetrievalResult:
        check_k(k)
        depth = max(self.config.depth, k)
        scores: dict[int, float] = {}
        evidence: dict[int, float] = {}  # breaks ties: each member's score / its best
        passages: dict[int, ScoredPassage] = {}
        results, timings = self._run_members(query, depth, query_vector)
        for result in results:
            best = max((p.score for p in result.passages), default=0.0)
            for rank, p in enumerate(result.passages, start=1):
                scores[p.chunk] = scores.get(p.chunk, 0.0) + 1.0 / (self.config.rrf_k + rank)
                share = p.score / best if best > 0 else 0.0
                evidence[p.chunk] = evidence.get(p.chunk, 0.0) + share
                passages.setdefault(p.chunk, p)
        ranked = sorted(scores, key=lambda c: (-scores[c], -evidence[c], c))[:k]
        first = results[0].trace
        out = [
            ScoredPassage(c, passages[c].chunk_id, scores[c], passages[c].title, passages[c].text)
            for c in ranked
        ]
        if self.config.second_hops:
            start = time.perf_counter()
            out, hop_paths = self._second_hops(query, query_vector, out)
            timings["second_hops"] = (time.perf_counter() - start) * 1000
        else:
            hop_paths = []
        titles = {p.title for p in out}
        trace = RetrievalTrace(
            seeds=first.seeds,
            activated=first.activated,
            relations=first.relations,
            paths=[path for path in [*first.paths, *hop_paths] if path.passage in titles],
            subgraph_nodes=first.subgraph_nodes,
            subgraph_edges=first.subgraph_edges,
            timings_ms=timings,
        )
        name = "fused:" + "+".join(r.method.split(":")[0] for r in results)
        return RetrievalResult(name, query, out, trace)

    def _second_hops(
        self,
        query: str,
        query_vector: npt.NDArray[np.float32] | None,
        ranked: list[ScoredPassage],
    ) -> tuple[list[ScoredPassage], list[ActivationPath]]:
        """``ranked`` with the first passages' second hops placed (``second_hops``), and
        the link each placed one came through."""
        ctx, n = self.context, self.config.second_hops
        if ctx is None:
            return ranked, []
        q = ctx.embed_query(query) if query_vector is None else query_vector
        named = frozenset(m.entity for m in ctx.named_in(query))
        asked = words(query) if self.config.skip_named_titles else ""
        out, hops = chain(ctx, q, ranked, n, named, asked)
        return out, [hop_path(ctx, hop) for hop in hops]
