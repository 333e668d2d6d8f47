"""Engine results turned into the API's response models (no logic beyond the mapping).

A trace names entities and relations by their positions in the graph its retriever
read; the API names them by content-derived ids (:mod:`quillian.server.ids`), which
stay valid after the positions change."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pydantic_core import to_json

from quillian.components.retrieval.base import ActivationPath, RetrievalResult, UsedRelation
from quillian.components.retrieval.reasoning import reasoning_paths
from quillian.methods.base import AnswerResult
from quillian.methods.spec import MethodSpec
from quillian.server import models as m
from quillian.server.ids import entity_id, relation_id
from quillian.server.jobstore import Job

__all__ = [
    "answer_view",
    "job_view",
    "method_view",
    "model_id",
    "paths_view",
    "retrieval_data",
    "retrieval_json",
    "retrieval_view",
]

#: Model ids on the OpenAI-compatible endpoints are this prefix and the method's name.
MODEL_PREFIX = "quillian-"


def model_id(method: str, workspace: str | None = None) -> str:
    """``quillian-METHOD``, with ``@WORKSPACE`` for any workspace but the first."""
    return f"{MODEL_PREFIX}{method}" + (f"@{workspace}" if workspace else "")


def retrieval_view(result: RetrievalResult, seconds: float) -> m.RetrieveResponse:
    # Plain data validated once: building each nested model in Python cost more than
    # the retrieval's graph work when served (``quillian.server.load``).
    return m.RetrieveResponse.model_validate(retrieval_data(result, seconds))


def retrieval_json(result: RetrievalResult, seconds: float) -> bytes:
    """:func:`retrieval_view`'s JSON, written from the plain data without building the
    model: validating it took a tenth of a served retrieval's time holding the GIL
    (``py-spy record --gil`` at 8 clients). The same bytes as the model's
    ``model_dump_json`` (``tests/server/test_api.py`` compares them for every
    retriever), non-finite numbers written as null as the model writes them."""
    return to_json(retrieval_data(result, seconds), inf_nan_mode="null")


def retrieval_data(result: RetrievalResult, seconds: float) -> dict[str, Any]:
    """A retrieval as :class:`~quillian.server.models.RetrieveResponse`'s plain data."""
    trace = result.trace
    return {
        "method": result.method,
        "query": result.query,
        "passages": [
            {
                "rank": i,
                "chunk_id": p.chunk_id,
                "title": p.title,
                "text": p.text,
                "score": p.score,
            }
            for i, p in enumerate(result.passages, start=1)
        ],
        "subgraph": {
            "seeds": [
                {
                    "entity": entity_id(s.name),
                    "name": s.name,
                    "score": s.score,
                    "source": s.source,
                }
                for s in trace.seeds
            ],
            "nodes": [
                {
                    "entity": entity_id(a.name),
                    "name": a.name,
                    "activation": a.activation,
                    "hop": a.hop,
                }
                for a in trace.activated
            ],
            "edges": [_edge(r) for r in trace.relations],
            "subgraph_nodes": trace.subgraph_nodes,
            "subgraph_edges": trace.subgraph_edges,
            "timings_ms": dict(trace.timings_ms),
        },
        "paths": [p.as_dict() for p in reasoning_paths(trace.paths)],
        "seconds": round(seconds, 6),
    }


def _edge(r: UsedRelation) -> dict[str, Any]:
    sentence = r.sentence or r.description
    return {
        "relation": relation_id(r.subject, r.predicate, r.object, sentence),
        "subject": r.subject,
        "predicate": r.predicate,
        "object": r.object,
        "description": r.description,
        "sentence": sentence,
        "weight": r.weight,
    }


def citations_view(result: AnswerResult) -> m.Citations:
    evidence = result.evidence
    return m.Citations(
        passages=[
            m.PassageCitation(chunk_id=p.chunk_id, title=p.title, text=p.text, score=p.score)
            for p in evidence.passages
        ],
        relations=[
            m.RelationCitation(
                subject=r.subject,
                predicate=r.predicate,
                object=r.object,
                sentence=r.sentence or r.description,
                weight=r.weight,
            )
            for r in evidence.relations
        ],
        kg_triples=[
            m.KGTripleCitation(
                head=t.subject_name, relation=t.relation, tail=t.object_name, sentence=t.sentence
            )
            for t in evidence.kg_triples
        ],
        references=[
            m.ReferenceCitation(text=r.text, source=r.source, score=r.score)
            for r in evidence.references
        ],
        passages_read=evidence.passages_read,
        paths=paths_view(evidence.paths),
    )


def paths_view(paths: Iterable[ActivationPath]) -> list[m.ReasoningPath]:
    """A trace's activation paths as the API shows them (:func:`reasoning_paths`)."""
    return [m.ReasoningPath.model_validate(p.as_dict()) for p in reasoning_paths(paths)]


def usage_view(result: AnswerResult) -> m.Usage:
    usage = result.transcript.usage
    return m.Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        llm_calls=len(result.transcript.calls),
        parse_failures=result.transcript.parse_failures,
    )


def answer_view(result: AnswerResult, retrievals: list[m.RetrieveResponse]) -> m.AnswerResponse:
    return m.AnswerResponse(
        method=result.method,
        question=result.question,
        answer=result.answer,
        error=result.error,
        citations=citations_view(result),
        steps=[step.as_dict() for step in result.steps],
        retrievals=retrievals,
        usage=usage_view(result),
        seconds=round(result.seconds, 6),
    )


def method_view(spec: MethodSpec) -> m.MethodInfo:
    return m.MethodInfo(
        name=spec.name,
        summary=spec.summary,
        retriever=spec.retriever,
        needs_graph=spec.needs_graph,
        options=[
            m.OptionInfo(name=o.name, type=o.type_name, default=_plain(o.default), help=o.help)
            for o in spec.options
        ],
        model=model_id(spec.name),
    )


def job_view(job: Job, workspace: str) -> m.JobOut:
    return m.JobOut.model_validate(
        {**job.as_dict(), "workspace": workspace, "documents_failed": len(job.failures)}
    )


def _plain(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None)) else str(value)
