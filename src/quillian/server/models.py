"""The request and response bodies of the API, in pydantic: the edge's types, which
the OpenAPI schema publishes and the web UI reads."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from quillian.components.factories import RETRIEVERS

__all__ = [
    "AnswerRequest",
    "AnswerResponse",
    "Citations",
    "DocumentIn",
    "DocumentOut",
    "DocumentPage",
    "DocumentsIn",
    "EntityHit",
    "EntityPage",
    "ErrorBody",
    "GraphLinks",
    "JobOut",
    "JobPage",
    "LinksRequest",
    "MethodInfo",
    "Neighbourhood",
    "Passage",
    "RetrieveRequest",
    "RetrieveResponse",
    "Subgraph",
    "Usage",
    "WorkspaceInfo",
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """Every 4xx and 5xx: what went wrong, in a sentence."""

    detail: str


# --- workspaces and methods ------------------------------------------------------------


class WorkspaceInfo(BaseModel):
    name: str
    state: str = Field(description="the index's build state: complete or building")
    counts: dict[str, int] = Field(description="documents, chunks, entities, relations...")
    embedder: str
    extractor: str
    methods_built: list[str] = Field(description="methods whose own build stages ran")
    jobs: dict[str, int] = Field(description="jobs by state")


class OptionInfo(BaseModel):
    name: str
    type: str
    default: Any = None
    help: str = ""


class MethodInfo(BaseModel):
    name: str
    summary: str
    retriever: str | None = Field(description="the retriever used unless another is asked for")
    needs_graph: bool
    options: list[OptionInfo]
    model: str = Field(description="its model id on the OpenAI-compatible endpoints")


class MethodList(BaseModel):
    methods: list[MethodInfo]
    retrievers: list[str]
    answering: bool = Field(description="whether the server has a model to answer with")


# --- retrieval and answers -------------------------------------------------------------


class RetrieveRequest(_Body):
    query: str = Field(min_length=1, max_length=4000, description="the query text")
    method: str = Field(default="sa", description=f"the retriever: {', '.join(RETRIEVERS)}")
    k: int = Field(default=8, ge=1, le=100, description="passages to return")


class Passage(BaseModel):
    rank: int
    chunk_id: str
    title: str
    text: str
    score: float


class SeedNode(BaseModel):
    entity: int
    name: str
    score: float
    source: str = Field(description="why it was seeded: description or lexical match")


class ActivatedNode(BaseModel):
    entity: int
    name: str
    activation: float
    hop: int


class UsedEdge(BaseModel):
    relation: int
    subject: str
    predicate: str
    object: str
    description: str
    sentence: str = Field(description="the source sentence the relation was read from")
    weight: float


class Subgraph(BaseModel):
    """The activated subgraph behind a retrieval (empty for dense and BM25)."""

    seeds: list[SeedNode]
    nodes: list[ActivatedNode]
    edges: list[UsedEdge]
    subgraph_nodes: int
    subgraph_edges: int
    timings_ms: dict[str, float]


class RetrieveResponse(BaseModel):
    method: str
    query: str
    passages: list[Passage]
    subgraph: Subgraph
    seconds: float


class AnswerRequest(_Body):
    question: str = Field(min_length=1, max_length=4000)
    method: str = Field(default="sa-rag", description="the method (GET /api/methods lists them)")
    retriever: str | None = Field(
        default=None, description="a retriever instead of the method's own"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="the method's options")
    stream: bool = Field(default=False, description="server-sent events instead of one JSON body")


class PassageCitation(BaseModel):
    chunk_id: str
    title: str
    text: str
    score: float


class RelationCitation(BaseModel):
    subject: str
    predicate: str
    object: str
    sentence: str
    weight: float


class KGTripleCitation(BaseModel):
    head: str
    relation: str
    tail: str
    sentence: str


class ReferenceCitation(BaseModel):
    text: str
    source: str = Field(description="who wrote it and for which query")
    score: float | None = Field(description="KG-consistency score; lower is more consistent")


class Citations(BaseModel):
    """What the answer rests on: the passages, relations and knowledge-graph triples
    the method put before the model."""

    passages: list[PassageCitation]
    relations: list[RelationCitation]
    kg_triples: list[KGTripleCitation] = Field(default_factory=list)
    references: list[ReferenceCitation] = Field(
        default_factory=list, description="references a knowledge model wrote (know3-rag)"
    )
    passages_read: bool = Field(
        default=True,
        description="whether the model read the passages; false where it read only the "
        "relations and the passages are their support (kags)",
    )


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    llm_calls: int
    parse_failures: int


class AnswerResponse(BaseModel):
    method: str
    question: str
    answer: str
    error: str = Field(default="", description="set when the method could not finish")
    citations: Citations
    steps: list[dict[str, Any]] = Field(description="the method's typed steps ({kind, ...})")
    retrievals: list[RetrieveResponse] = Field(
        description="each retrieval the method made, with its activated subgraph"
    )
    usage: Usage
    seconds: float


# --- documents and jobs ----------------------------------------------------------------


class DocumentIn(_Body):
    text: str = Field(min_length=1)
    title: str = ""
    source: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)


class DocumentsIn(_Body):
    documents: list[DocumentIn] = Field(min_length=1)


class DocumentOut(BaseModel):
    id: str
    title: str
    source: str
    status: Literal["pending", "processing", "processed", "failed"]
    error: str
    chunks: int
    characters: int


class DocumentDetail(DocumentOut):
    text: str
    chunk_ids: list[str]


class DocumentPage(BaseModel):
    total: int
    offset: int
    limit: int
    documents: list[DocumentOut]


class FailureOut(BaseModel):
    source: str
    error: str
    doc_id: str = ""
    title: str = ""


class JobOut(BaseModel):
    id: str
    workspace: str
    kind: Literal["add", "delete"]
    state: Literal[
        "queued", "running", "cancelling", "succeeded", "partial", "failed", "cancelled"
    ] = Field(description="partial: finished with some documents refused, each listed in failures")
    created: float
    updated: float
    documents_total: int
    documents_done: int
    documents_failed: int = Field(description="documents (or files) refused: len(failures)")
    stage: str = Field(description="ingest, graph, embed:chunks, embed:texts, bm25, ...")
    stage_done: int
    stage_total: int
    failures: list[FailureOut]
    error: str
    doc_ids: list[str]
    report: dict[str, Any]
    resumed: int = Field(description="times a restarted server took the job up again")


class JobPage(BaseModel):
    total: int
    offset: int
    limit: int
    jobs: list[JobOut]


# --- graph -------------------------------------------------------------------------------


class EntityHit(BaseModel):
    id: int
    name: str
    type: str
    aliases: list[str]
    degree: int = Field(description="relations the entity takes part in")


class EntityPage(BaseModel):
    total: int
    offset: int
    limit: int
    entities: list[EntityHit]


class EntityDescription(BaseModel):
    text: str
    chunk_id: str


class GraphEdge(BaseModel):
    relation: int
    source: int
    target: int
    predicate: str
    description: str
    sentence: str
    chunk_id: str


class SourcePassage(BaseModel):
    chunk_id: str
    title: str
    text: str


class Neighbourhood(BaseModel):
    """An entity, the entities it is related to (typed nodes), the relations (edges)
    with their source sentences, and the passages they were read from; edges paginated."""

    entity: EntityHit
    descriptions: list[EntityDescription]
    nodes: list[EntityHit]
    edges: list[GraphEdge]
    passages: list[SourcePassage]
    total_edges: int
    offset: int
    limit: int


class LinksRequest(_Body):
    """Entities and passages already on screen, whose links the UI wants to draw."""

    entities: list[int] = Field(max_length=2000, description="entity ids (the subgraph's)")
    chunk_ids: list[str] = Field(max_length=500, description="passages' chunk ids")


class DescriptionNode(BaseModel):
    id: int = Field(description="the description's index in the graph")
    entity: int
    text: str
    chunk_id: str = Field(description="the passage the description was read from")


class Mention(BaseModel):
    chunk_id: str
    entity: int


class GraphLinks(BaseModel):
    """The graph's links between given entities and passages: which passages describe
    which entities, and the entities' description nodes read from those passages."""

    mentions: list[Mention]
    descriptions: list[DescriptionNode]
