"""Settings of a ComplEx model and of its training, with the defaults of the sources.

The sources: Lacroix et al. (2018), *Canonical Tensor Decomposition for Knowledge Base
Completion*, and their code (facebookresearch/kbc): Adagrad at learning rate 0.1,
embeddings initialised as N(0, 1) times 1e-3, 1-vs-all cross-entropy over every entity,
reciprocal relations, N3 on the factors of each batch. The size is the one Know3-RAG's
ComplEx uses (LibKGE's Wikidata5M model, ``../shared/specs/know3-rag-and-kags.md``
section 9): 128 reals, that is 64 complex coordinates, and a batch of 1024.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from quillian.errors import ConfigError

__all__ = ["MODES", "ComplExConfig"]

#: Training objectives: ``1vsall`` scores every entity, ``negatives`` a shared sample,
#: ``auto`` picks by the size of a 1-vs-all epoch (:meth:`ComplExConfig.resolved_mode`).
MODES = ("auto", "1vsall", "negatives")


@dataclass(frozen=True)
class ComplExConfig:
    """How a ComplEx model is shaped and trained (defaults: Lacroix et al. 2018, LibKGE)."""

    dim: int = 128
    """Reals per embedding: dim/2 complex coordinates, the real half then the imaginary
    half (LibKGE's Wikidata5M ComplEx: 128). Must be even."""

    learning_rate: float = 0.1
    """Adagrad learning rate (Lacroix et al.'s code: 0.1)."""

    n3_weight: float = 0.01
    """Weight of the N3 regulariser: the weight times the sum, over the head, relation and
    tail of each training example of a batch, of the cubed moduli of their complex
    coordinates, divided by the batch size (as in Lacroix et al.'s code, which folds the
    paper's 1/3 into the weight). 0 turns it off. Lacroix et al. tune it per data set
    (1e-2 for FB15k at rank 500); 0.01 gave the best validation MRR at dim 128 on
    Kinships, UMLS and Nations alike."""

    batch_size: int = 1024
    """Training examples per step; each triple gives two (tail and reciprocal head)."""

    init_scale: float = 1e-3
    """Embeddings start as standard normal values times this (Lacroix et al.: 1e-3)."""

    epochs: int = 100
    """Passes over the training triples; with a validation set, the maximum."""

    mode: str = "auto"
    """Objective: ``1vsall`` (cross-entropy over every entity), ``negatives`` (over the
    true tail and a sample of entities shared by the batch, for graphs too large to score
    every entity per example) or ``auto`` (1vsall while an epoch of it stays within
    max_1vsall_entities and max_1vsall_work)."""

    negatives: int = 1024
    """Entities in the shared negative sample of each batch (mode ``negatives``)."""

    max_1vsall_entities: int = 100_000
    """Mode ``auto`` trains 1-vs-all up to this many entities, with negatives above."""

    max_1vsall_work: float = 2.5e11
    """Mode ``auto`` also trains with negatives when a 1-vs-all epoch would take more
    than this many multiply-adds: training examples (two per triple) times entities
    times ``dim``. 1-vs-all on WordNet (239,706 triples, 95,657 entities, dim 128:
    5.9e12) took about 27 minutes an epoch on two cores, negatives 41 s; 2.5e11 is
    about a minute an epoch. Kinships, UMLS and Nations stay far below it (2e8)."""

    eval_every: int = 5
    """With a validation set: epochs between two filtered-MRR measurements on it."""

    patience: int = 4
    """With a validation set: stop after this many measurements without a better MRR
    (the best weights are kept); 0 never stops early."""

    valid_share: float = 0.02
    """Trained with no validation set (:func:`~quillian.components.kge.train.
    train_and_save`), the share of the graph's triples held out as one (at most 2,000;
    none below 100; :func:`~quillian.components.kge.triples.hold_out`): training stops
    on their filtered MRR and the model records it. A graph has no validation split of
    its own; without one every run took all ``epochs`` and told nothing of what the model
    learnt. 0 trains on every triple for all the epochs."""

    checkpoint_every: int = 1
    """Epochs between two checkpoints of a resumable run (weights, optimiser state)."""

    seed: int = 0
    """Seed of the initialisation, the shuffling and the negative samples."""

    def __post_init__(self) -> None:
        positive = {
            "dim": self.dim,
            "learning_rate": self.learning_rate,
            "batch_size": self.batch_size,
            "init_scale": self.init_scale,
            "epochs": self.epochs,
            "negatives": self.negatives,
            "eval_every": self.eval_every,
        }
        for name, value in positive.items():
            if isinstance(value, bool) or not value > 0:
                raise ConfigError(f"{name} must be greater than 0, got {value!r}")
        if self.dim % 2:
            raise ConfigError(f"dim must be even (real and imaginary halves), got {self.dim}")
        for name in (
            "n3_weight",
            "patience",
            "checkpoint_every",
            "max_1vsall_entities",
            "max_1vsall_work",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if not 0.0 <= self.valid_share < 1.0:
            raise ConfigError(f"valid_share must be in [0, 1), got {self.valid_share!r}")
        if self.mode not in MODES:
            raise ConfigError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")

    @property
    def rank(self) -> int:
        """Complex coordinates per embedding (``dim / 2``)."""
        return self.dim // 2

    def resolved_mode(self, n_entities: int, n_triples: int = 0) -> str:
        """``1vsall`` or ``negatives``: what ``auto`` means for a graph of this many
        entities and training triples."""
        if self.mode != "auto":
            return self.mode
        work = 2 * n_triples * n_entities * self.dim
        small = n_entities <= self.max_1vsall_entities and work <= self.max_1vsall_work
        return "1vsall" if small else "negatives"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ComplExConfig:
        """The configuration a manifest or checkpoint recorded (unknown keys refused)."""
        try:
            return cls(**data)
        except TypeError as exc:
            raise ConfigError(f"KGE configuration: {exc}") from exc
