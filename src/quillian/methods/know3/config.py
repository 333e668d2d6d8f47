"""Know3-RAG's settings (spec section 10) and its adaptive-retrieval threshold (section 4)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from quillian.components.kge.confidence import AGGREGATIONS, Aggregation
from quillian.errors import ConfigError

__all__ = ["DEFAULT_THETA0", "THETA0_PRESETS", "THRESHOLDS", "C", "Know3Config", "threshold"]

#: c in the threshold (section 5.3: 128; it equals the pretrained model's dimension).
C = 128.0

#: θ0 when neither ``theta0`` nor ``theta0_preset`` is given.
DEFAULT_THETA0 = 1.0

#: θ0 of the paper's Table 6, by ``data set/QA model`` (``theta0_preset``).
THETA0_PRESETS: dict[str, float] = {
    "hotpotqa/glm4-9b": 10.0,
    "hotpotqa/qwen2.5-32b": 1.0,
    "hotpotqa/gpt-4o-mini": 13.0,
    "2wiki/glm4-9b": 2.0,
    "2wiki/qwen2.5-32b": 0.2,
    "2wiki/gpt-4o-mini": 2.0,
    "popqa/glm4-9b": 0.1,
    "popqa/qwen2.5-32b": 0.02,
    "popqa/gpt-4o-mini": 0.01,
}


def _paper(theta0: float, turn: int, c: float) -> float:
    """The literal reading of the garbled formula: θ0·c / (1 + e^(1 − θ0·t))."""
    return theta0 * c / (1.0 + math.exp(1.0 - theta0 * turn))


def _turn_only(theta0: float, turn: int, c: float) -> float:
    """The spec's alternative B: θ0·c / (1 + e^(1 − t)) (same value at t = 0)."""
    return theta0 * c / (1.0 + math.exp(1.0 - turn))


#: Threshold functions θ(θ0, t, c) by name; both increase with t for θ0 > 0.
THRESHOLDS: dict[str, Callable[[float, int, float], float]] = {
    "paper": _paper,
    "turn": _turn_only,
}


def threshold(theta0: float, turn: int, *, c: float = C, kind: str = "paper") -> float:
    """θ_t: an answer at turn ``turn`` whose score is below it is output."""
    try:
        function = THRESHOLDS[kind]
    except KeyError:
        raise ConfigError(
            f"unknown threshold {kind!r}; choose one of {', '.join(THRESHOLDS)}"
        ) from None
    return function(theta0, turn, c)


@dataclass(frozen=True)
class Know3Config:
    """Know3-RAG; defaults from the paper (section 5.3) and the authors' code."""

    theta0: float = DEFAULT_THETA0
    """θ0 of the adaptive-retrieval threshold θ_t = θ0·c/(1+e^(1−θ0·t)) (Table 6: 0.01
    to 13 by data set and model; the scale of scores depends on the KG and its model, so
    pick it with `quillian know3 calibrate`; 0 never accepts an answer before T)."""
    theta0_preset: str = ""
    """θ0 from the paper's Table 6 by DATASET/MODEL: hotpotqa, 2wiki or popqa with
    glm4-9b, qwen2.5-32b or gpt-4o-mini (e.g. popqa/gpt-4o-mini = 0.01). The paper's
    values fit its Wikidata5M model; on another KG calibrate instead. Not together with
    theta0."""
    theta_c: float = C
    """c of the threshold (section 5.3: 128)."""
    threshold: str = "paper"
    """Threshold function: paper (θ0·c/(1+e^(1−θ0·t))) or turn (θ0·c/(1+e^(1−t)))."""
    max_turns: int = 2
    """T, the last turn; its answer is output whatever its score (section 5.3: 2)."""
    k: int = 5
    """References kept per retrieval round: k + t at turn t (section 5.3: k = 5)."""
    aggregation: str = "mean"
    """How a text's triple scores combine: mean (the authors' code) or sum (eq. 1)."""
    knowledge_models: str = ""
    """Comma-separated LLM specs that write references ("" = the answering model)."""
    corpus_passages: int = 0
    """Beyond the paper: this many top passages of the index's retriever join the
    candidate references each round, through the same filter (needs a retriever)."""
    local_tails: int = 3
    """Algorithm 1: tails kept along the query's best relation, by KGE score (code: 3)."""
    global_relations: int = 3
    """Algorithm 1: query-similar relations tried for the KGE-predicted entity (code: 3)."""
    max_query_entities: int = 5
    """Question entities expanded by the related-entity search."""
    description_chars: int = 300
    """Characters of an entity's description shown in prompts."""
    reference: bool = True
    """Generate references at all (Table 3's "w/o Reference" = chain of thought)."""
    raw_query: bool = True
    """References for the raw query q (Table 3: "w/o raw query")."""
    kg_query: bool = True
    """References for the entity-enhanced query [E; q] (Table 3: "w/o KG query")."""
    relevance_check: bool = True
    """The LLM relevance check of each reference (Table 3: "w/o Rel-check")."""
    triple_check: bool = True
    """Rank relevant references by their triples' relative score (Table 3: "w/o
    Tri-check"); without it they keep the order they were written in."""
    adaptive: bool = True
    """Stop early when an answer's score is below θ_t (Table 3: "w/o Adaptive
    Retrieval" = adaptive false with max_turns 1: one fixed round)."""
    open_answers: bool = True
    """Beyond the paper: a question that does not ask yes or no (its first word is no
    auxiliary verb) cannot be answered "yes" or "no" (a parse failure, recorded, and a
    repair that asks for the answer). P1 asks for "yes, no, or a few words directly
    answering the question", and the local 0.5B model answered yes or no to 9 of 20
    HotpotQA questions asking for a name or a value. False: the paper's P1."""
    example_check: bool = True
    """Beyond the paper: an answer whose words occur in P1's few-shot examples but not
    in the question or its references is refused once (a parse failure, recorded) and
    asked again with a hint; a second such reply keeps its answer. Asked again after a refused yes,
    the local 0.5B model named the third example's subject ("Alan Turing") for 11 of 12
    such HotpotQA questions. False: no such check."""

    def __post_init__(self) -> None:
        if self.theta0_preset:
            object.__setattr__(self, "theta0", self._preset_theta0())
        if self.max_turns < 0:
            raise ConfigError(f"max_turns must be >= 0, got {self.max_turns}")
        for name in ("k", "local_tails", "global_relations", "max_query_entities"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be greater than 0, got {getattr(self, name)}")
        if self.corpus_passages < 0:
            raise ConfigError(f"corpus_passages must be >= 0, got {self.corpus_passages}")
        if self.description_chars < 20:
            raise ConfigError(f"description_chars must be >= 20, got {self.description_chars}")
        if self.theta0 < 0 or not math.isfinite(self.theta0):
            raise ConfigError(f"theta0 must be a finite number >= 0, got {self.theta0}")
        if self.aggregation not in AGGREGATIONS:
            raise ConfigError(
                f"aggregation must be one of {', '.join(AGGREGATIONS)}, got {self.aggregation!r}"
            )
        if self.threshold not in THRESHOLDS:
            raise ConfigError(
                f"threshold must be one of {', '.join(THRESHOLDS)}, got {self.threshold!r}"
            )
        if self.reference and not (self.raw_query or self.kg_query or self.corpus_passages):
            raise ConfigError("raw_query, kg_query and corpus_passages are all off: no references")

    def _preset_theta0(self) -> float:
        """θ0 of ``theta0_preset`` (case ignored); refused with an explicit θ0 that
        differs (the resolved value itself is accepted, so ``replace`` keeps working)."""
        value = THETA0_PRESETS.get(self.theta0_preset.strip().lower())
        if value is None:
            raise ConfigError(
                f"unknown theta0_preset {self.theta0_preset!r}; the paper's Table 6 has "
                f"{', '.join(THETA0_PRESETS)}"
            )
        if self.theta0 not in (DEFAULT_THETA0, value):
            raise ConfigError(
                f"give theta0 or theta0_preset, not both (theta0={self.theta0:g}, "
                f"theta0_preset={self.theta0_preset} is θ0 = {value:g})"
            )
        return value

    @property
    def how(self) -> Aggregation:
        return "sum" if self.aggregation == "sum" else "mean"

    def theta(self, turn: int) -> float:
        """θ_t for this configuration."""
        return threshold(self.theta0, turn, c=self.theta_c, kind=self.threshold)

    def model_specs(self) -> list[str]:
        """The knowledge models' LLM specs ([] = the answering model alone)."""
        return [s.strip() for s in self.knowledge_models.split(",") if s.strip()]
