"""The request and response bodies of the API, in pydantic: the edge's types, which
the OpenAPI schema publishes and the web UI reads."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from quillian.components.factories import RETRIEVERS
from quillian.engine.engine import MAX_QUESTION_CHARS
from quillian.methods.table import method_names
from quillian.server.ids import ENTITY_ID_HELP, ENTITY_ID_PATTERN, refuse_position

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
    "OpenAIErrorBody",
    "Passage",
    "PathEntity",
    "PathStep",
    "ReasoningPath",
    "RetrieveRequest",
    "RetrieveResponse",
    "StepEvent",
    "StreamError",
    "Subgraph",
    "TokenEvent",
    "Usage",
    "WorkspaceInfo",
    "error_content",
    "openai_error",
]


class _Body(BaseModel):
    """A request body: unknown fields refused, and every value of its declared type
    (strict: ``"stream": 0`` is not a bool, ``"k": "3"`` not an int)."""

    model_config = ConfigDict(extra="forbid", strict=True)


#: The largest offset a page may start at (SQLite and numpy take 64-bit integers).
MAX_OFFSET = 2**31 - 1


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An integer as JSON Schema has it: ``8`` or ``8.0``, never ``"8"`` or ``true``.
WholeNumber = Annotated[int, BeforeValidator(_whole)]

#: A retriever's name; the schema lists them.
RetrieverName = Annotated[str, Field(json_schema_extra={"enum": list(RETRIEVERS)})]

#: A method's name (or alias); the schema lists them.
MethodName = Annotated[str, Field(json_schema_extra={"enum": method_names(with_aliases=True)})]

#: The pattern of text with something besides whitespace.
NOT_BLANK = r"\S"

#: Text with something besides whitespace.
NonBlank = Annotated[str, Field(min_length=1, pattern=NOT_BLANK)]


#: Ids are content-derived (see :mod:`quillian.server.ids`): valid across uploads,
#: deletes and rebuilds, never a position in the current graph.
EntityId = Annotated[
    str,
    Field(pattern=ENTITY_ID_PATTERN, description=ENTITY_ID_HELP, examples=["ent-5d1f0a1c9e8b7a62"]),
]
RelationId = Annotated[
    str,
    Field(
        pattern=r"^rel-[0-9a-f]{16}$",
        description="a relation's id: 'rel-' and 16 hex digits derived from its ends' "
        "names, its predicate and its source sentence (the same fact read from the same "
        "sentence twice has one id); the same across uploads, deletes and rebuilds",
    ),
]
ChunkId = Annotated[
    str,
    Field(
        description="a passage's id: 'chunk-' and 16 hex digits derived from its document, "
        "its place there and its text; the same across uploads, deletes and rebuilds"
    ),
]
DescriptionId = Annotated[
    str,
    Field(
        pattern=r"^desc-[0-9a-f]{16}$",
        description="a description's id: 'desc-' and 16 hex digits derived from its "
        "entity, its passage and its text; the same across rebuilds",
    ),
]


class ErrorBody(BaseModel):
    """Every 4xx and 5xx outside ``/v1``: what went wrong, in a sentence."""

    detail: str


class OpenAIError(BaseModel):
    """What went wrong, as OpenAI's API says it."""

    message: str
    type: str = Field(description="invalid_request_error, rate_limit_error or server_error")
    param: str | None = None
    code: str | None = Field(description="invalid_api_key, not_found, request_too_large...")


class OpenAIErrorBody(BaseModel):
    """Every 4xx and 5xx under ``/v1``: OpenAI's error object, which its clients show."""

    error: OpenAIError


#: The OpenAI-compatible routes' prefix: their errors take OpenAI's shape.
OPENAI_PREFIX = "/v1/"

_OPENAI_CODES = {
    401: "invalid_api_key",
    403: "permission_denied",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "request_too_large",
    429: "rate_limit_exceeded",
}


def openai_error(status: int, message: str) -> OpenAIErrorBody:
    """OpenAI's error object for a refusal (or failure) with HTTP ``status``."""
    if status >= 500:
        kind, code = "server_error", "server_error"
    else:
        kind = "rate_limit_error" if status == 429 else "invalid_request_error"
        code = _OPENAI_CODES.get(status, "invalid_request")
    return OpenAIErrorBody(error=OpenAIError(message=message, type=kind, code=code))


def error_content(path: str, status: int, message: str) -> dict[str, Any]:
    """The body of an error at ``path``: :class:`ErrorBody`, or :class:`OpenAIErrorBody`
    under ``/v1``."""
    if path.startswith(OPENAI_PREFIX):
        return openai_error(status, message).model_dump()
    return ErrorBody(detail=message).model_dump()


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
    query: NonBlank = Field(max_length=MAX_QUESTION_CHARS, description="the query text")
    method: RetrieverName = Field(default="sa", description="the retriever")
    k: WholeNumber = Field(default=8, ge=1, le=100, description="passages to return")


class Passage(BaseModel):
    rank: int
    chunk_id: ChunkId
    title: str
    text: str
    score: float


class SeedNode(BaseModel):
    entity: EntityId
    name: str
    score: float
    source: str = Field(description="why it was seeded: description or lexical match")


class ActivatedNode(BaseModel):
    entity: EntityId
    name: str
    activation: float
    hop: int


class UsedEdge(BaseModel):
    relation: RelationId
    subject: str
    predicate: str
    object: str
    description: str
    sentence: str = Field(description="the source sentence the relation was read from")
    weight: float


class PathEntity(BaseModel):
    entity: EntityId
    name: str


class PathStep(BaseModel):
    """One hop of a reasoning path: from ``source`` (nearer the seed) to ``target``
    through a relation, given as it was read, with its source sentence."""

    hop: int = Field(description="the hop at which activation reached ``target``")
    source: PathEntity
    target: PathEntity
    relation: RelationId
    subject: str
    predicate: str
    object: str
    sentence: str = Field(description="the source sentence the relation was read from")


class ReasoningPath(BaseModel):
    """How the graph reached a returned passage: from a seed of the question, step by
    step, to the entity the passage is about."""

    seed: PathEntity = Field(
        description="where the path starts: a seed of the question, or the entity "
        "activation reached from one through a link that is no relation (a shared passage)"
    )
    entity: PathEntity = Field(description="where it ends: an entity of a returned passage")
    steps: list[PathStep] = Field(description="the hops from the seed, in order")
    chunk_id: ChunkId = Field(
        description="the returned passage the entity is about ('' where the passages "
        "only mention it)"
    )
    title: str = Field(description="that passage's title")


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
    paths: list[ReasoningPath] = Field(
        default_factory=list,
        description="for each passage reached through the graph, the path from the "
        "question's seeds (graph retrievers; empty for dense and BM25)",
    )
    seconds: float


class AnswerRequest(_Body):
    question: NonBlank = Field(max_length=MAX_QUESTION_CHARS)
    method: MethodName = Field(
        default="sa-rag", description="the method (GET /api/methods lists them)"
    )
    retriever: RetrieverName | None = Field(
        default=None, description="a retriever instead of the method's own"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="the method's options")
    stream: bool = Field(default=False, description="server-sent events instead of one JSON body")


class PassageCitation(BaseModel):
    chunk_id: ChunkId
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
    paths: list[ReasoningPath] = Field(
        default_factory=list,
        description="how retrieval reached the passages (shown, never given to the model)",
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


class StepEvent(BaseModel):
    """A step the method recorded, as it happens (``{kind, ...}``, as in ``steps``)."""

    model_config = ConfigDict(extra="allow")
    kind: str


class TokenEvent(BaseModel):
    """Text the model wrote for a prompt, while it writes."""

    prompt: str
    text: str


class StreamError(BaseModel):
    """A stream's last event when it failed: the status the request would have had."""

    status: int
    detail: str


# --- documents and jobs ----------------------------------------------------------------


class DocumentIn(_Body):
    text: str = Field(
        description="the document's text; a blank one, or one no store can hold (a lone "
        'surrogate escape such as "\\ud800"), is refused on its own and listed with its '
        "reason in the job's failures"
    )
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
    id: EntityId
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
    id: DescriptionId
    text: str
    chunk_id: ChunkId


class GraphEdge(BaseModel):
    relation: RelationId
    source: EntityId
    target: EntityId
    predicate: str
    description: str
    sentence: str
    chunk_id: str = Field(description="the passage it was read from ('' when none)")


class SourcePassage(BaseModel):
    chunk_id: ChunkId
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

    entities: list[EntityId] = Field(
        max_length=2000, description=f"the subgraph's entities: each {ENTITY_ID_HELP}"
    )
    chunk_ids: list[str] = Field(max_length=500, description="passages' chunk ids")

    @field_validator("entities", mode="before")
    @classmethod
    def _no_positions(cls, value: object) -> object:
        """Old integer ids are refused with the reason, not as 'not a string'."""
        for item in value if isinstance(value, list) else ():
            refuse_position(item)
        return value


class DescriptionNode(BaseModel):
    id: DescriptionId
    entity: EntityId
    text: str
    chunk_id: str = Field(description="the passage the description was read from")


class Mention(BaseModel):
    chunk_id: ChunkId
    entity: EntityId


class GraphLinks(BaseModel):
    """The graph's links between given entities and passages: which passages describe
    which entities, and the entities' description nodes read from those passages."""

    mentions: list[Mention]
    descriptions: list[DescriptionNode]
