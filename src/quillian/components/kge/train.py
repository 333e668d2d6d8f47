"""Training ComplEx in torch: N3, reciprocal relations, Adagrad (Lacroix et al. 2018).

Every training triple ``(h, r, t)`` gives two examples, ``(h, r) -> t`` and
``(t, r^-1) -> h``, shuffled together each epoch. An example's loss is the
cross-entropy of its answer against

* every entity (``1vsall``, Lacroix et al.'s objective), or
* a sample of ``negatives`` entities shared by the whole batch (``negatives``), whose
  cost and memory do not grow with the number of entities: each step touches only the
  batch's rows and the sample's, through sparse gradients, so Adagrad updates just
  those rows. A sampled entity that happens to be the example's answer is masked out.

plus the N3 regulariser of the example's head, relation and tail (:func:`n3_penalty`).
Embeddings start as ``N(0, 1) * init_scale``.

With a validation set the filtered MRR on it is measured every ``eval_every`` epochs;
the best weights are kept and training stops after ``patience`` measurements without
improvement. With a checkpoint path the run writes its full state there (weights,
Adagrad's accumulators, the random generator, the early-stopping state) every
``checkpoint_every`` epochs, atomically, and a later run with the same graph and
settings resumes from it. :func:`train_and_save` adds the model directory: it is
written only when training has finished, so an interrupted run leaves the model saved
before it untouched.

Progress: ``progress("batch", examples_done, examples_per_epoch)`` within an epoch,
``progress("train", epochs_done, epochs)`` after each, ``progress("save", 0|1, 1)``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from quillian.components.kg.report import Progress, no_progress
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.evaluate import KnownAnswers, evaluate
from quillian.components.kge.scoring import ComplEx
from quillian.components.kge.storage import save_model
from quillian.components.kge.triples import TripleSet, hold_out
from quillian.errors import InputError
from quillian.stores.embedded.files import write_atomic

__all__ = [
    "TrainResult",
    "checkpoint_path",
    "complex_product",
    "n3_penalty",
    "torch_threads",
    "train_and_save",
    "train_complex",
]

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = 1


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` torch threads (None: as set), restoring the count after.
    Training on every core is fastest on an idle machine (a short run on HotpotQA's
    document graph, commit 3855ed0, whose epochs were not recorded: 14.7 s against
    21.7 s on one thread) but collapses when another process keeps the cores busy: the
    same training took 469.5 s beside a running ``bench qa``, as torch's threads wait
    on each other; one thread then degrades gracefully."""
    if threads is None:
        yield
        return
    if threads < 1:
        raise ValueError(f"threads must be at least 1, got {threads}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


#: Settings that may change between an interrupted run and its resumption.
_RESUMABLE_CHANGES = ("epochs", "checkpoint_every", "patience", "eval_every")
#: A validation MRR must beat the best by this much to count as better.
_MIN_GAIN = 1e-4


def complex_product(heads: torch.Tensor, relations: torch.Tensor) -> torch.Tensor:
    """Rows ``[q_re | q_im]`` of ``h * r`` per complex coordinate (torch, differentiable)."""
    half = heads.shape[-1] // 2
    h_re, h_im = heads[..., :half], heads[..., half:]
    r_re, r_im = relations[..., :half], relations[..., half:]
    return torch.cat([h_re * r_re - h_im * r_im, h_re * r_im + h_im * r_re], dim=-1)


def n3_penalty(
    heads: torch.Tensor, relations: torch.Tensor, tails: torch.Tensor, weight: float
) -> torch.Tensor:
    """N3 (Lacroix et al. 2018): ``weight / batch * sum |z|^3`` over every complex
    coordinate ``z`` of the batch's head, relation and tail rows (|z| the modulus)."""
    half = heads.shape[-1] // 2
    total = heads.new_zeros(())
    for rows in (heads, relations, tails):
        total = total + (rows[..., :half] ** 2 + rows[..., half:] ** 2).pow(1.5).sum()
    return weight * total / heads.shape[0]


@dataclass(frozen=True)
class TrainResult:
    """What a training run produced."""

    model: ComplEx
    """The kept weights: the best on validation, else the last epoch's."""
    mode: str
    """``1vsall`` or ``negatives``."""
    epochs: int
    """Epochs trained (all sessions of a resumed run)."""
    best_epoch: int
    """The epoch whose weights were kept."""
    stopped_early: bool
    seconds: float
    """Training time, validation included, over all sessions of a resumed run."""
    resumed_from: int
    """The epoch a checkpoint resumed this run from (0: a fresh start)."""
    valid_metrics: dict[str, float]
    """Filtered metrics on the validation set at ``best_epoch`` (empty without one)."""
    history: tuple[dict[str, float], ...]
    """One row per validation: epoch, mean training loss, validation MRR and hits."""


def checkpoint_path(model_directory: str | Path) -> Path:
    """The checkpoint file of a run that will write ``model_directory``."""
    path = Path(model_directory)
    return path.with_name(path.name + ".checkpoint.pt")


class _Run:
    """The mutable state of a training run (what a checkpoint holds)."""

    def __init__(self, triples: TripleSet, config: ComplExConfig) -> None:
        self.generator = torch.Generator().manual_seed(config.seed)
        shape_e = (triples.n_entities, config.dim)
        shape_r = (2 * triples.n_relations, config.dim)
        init = config.init_scale
        self.entity = torch.nn.Parameter(torch.randn(shape_e, generator=self.generator) * init)
        self.relation = torch.nn.Parameter(torch.randn(shape_r, generator=self.generator) * init)
        self.optimizer = torch.optim.Adagrad([self.entity, self.relation], lr=config.learning_rate)
        self.epoch = 0
        self.seconds = 0.0
        self.best_mrr = -1.0
        self.best_epoch = 0
        self.best: tuple[torch.Tensor, torch.Tensor] | None = None
        self.best_metrics: dict[str, float] = {}
        self.bad_evals = 0
        self.stopped = False
        self.history: list[dict[str, float]] = []

    def state(self, identity: dict[str, Any]) -> dict[str, Any]:
        return {
            **identity,
            "entity": self.entity.detach(),
            "relation": self.relation.detach(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.generator.get_state(),
            "epoch": self.epoch,
            "seconds": self.seconds,
            "best_mrr": self.best_mrr,
            "best_epoch": self.best_epoch,
            "best": list(self.best) if self.best is not None else None,
            "best_metrics": self.best_metrics,
            "bad_evals": self.bad_evals,
            "stopped": self.stopped,
            "history": self.history,
        }

    def restore(self, state: dict[str, Any]) -> None:
        with torch.no_grad():
            self.entity.copy_(state["entity"])
            self.relation.copy_(state["relation"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.generator.set_state(state["generator"])
        self.epoch = int(state["epoch"])
        self.seconds = float(state["seconds"])
        self.best_mrr = float(state["best_mrr"])
        self.best_epoch = int(state["best_epoch"])
        best = state["best"]
        self.best = (best[0], best[1]) if best is not None else None
        self.best_metrics = dict(state["best_metrics"])
        self.bad_evals = int(state["bad_evals"])
        self.stopped = bool(state["stopped"])
        self.history = list(state["history"])

    def model(self, best: bool) -> ComplEx:
        entity, relation = (
            self.best
            if best and self.best is not None
            else (
                self.entity.detach(),
                self.relation.detach(),
            )
        )
        return ComplEx(entity.numpy(), relation.numpy())


def train_complex(
    triples: TripleSet,
    config: ComplExConfig | None = None,
    *,
    valid: TripleSet | None = None,
    known: KnownAnswers | None = None,
    checkpoint: str | Path | None = None,
    progress: Progress = no_progress,
) -> TrainResult:
    """Train ComplEx on ``triples``.

    ``valid`` (same numbering) turns on early stopping on its filtered MRR, filtered
    against ``known`` (default: the training and validation triples). ``checkpoint``
    makes the run resumable (see the module docstring); a checkpoint of another graph or
    other settings is ignored (and replaced).
    """
    config = config or ComplExConfig()
    if not len(triples):
        raise InputError("no triples to train on")
    if valid is not None and (valid.n_entities, valid.n_relations) != (
        triples.n_entities,
        triples.n_relations,
    ):
        raise InputError("the validation triples are numbered for another graph")
    if valid is not None and known is None:
        known = KnownAnswers([triples, valid])
    mode = config.resolved_mode(triples.n_entities, len(triples))
    run = _Run(triples, config)
    identity = {
        "format": CHECKPOINT_FORMAT,
        "fingerprint": triples.fingerprint,
        "valid": valid.fingerprint if valid is not None else "",
        "config": config.to_dict(),
    }
    path = Path(checkpoint) if checkpoint is not None else None
    resumed_from = _resume(run, path, identity) if path is not None else 0
    examples = _Examples(triples)
    while run.epoch < config.epochs and not run.stopped:
        started = time.perf_counter()
        loss = _epoch(run, examples, config, mode, progress)
        run.epoch += 1
        if valid is not None and known is not None and _due(run.epoch, config):
            _validate(run, valid, known, loss)
            run.stopped = bool(config.patience) and run.bad_evals >= config.patience
        elif valid is None:
            run.best_epoch = run.epoch
        run.seconds += time.perf_counter() - started
        if (
            path is not None
            and config.checkpoint_every
            and (
                run.epoch % config.checkpoint_every == 0
                or run.epoch == config.epochs
                or run.stopped
            )
        ):
            _write_checkpoint(path, run.state(identity))
        progress("train", run.epoch, config.epochs)
    return TrainResult(
        model=run.model(best=valid is not None),
        mode=mode,
        epochs=run.epoch,
        best_epoch=run.best_epoch,
        stopped_early=run.stopped,
        seconds=run.seconds,
        resumed_from=resumed_from,
        valid_metrics=dict(run.best_metrics),
        history=tuple(run.history),
    )


def train_and_save(
    triples: TripleSet,
    directory: str | Path,
    config: ComplExConfig | None = None,
    *,
    valid: TripleSet | None = None,
    known: KnownAnswers | None = None,
    resume: bool = True,
    progress: Progress = no_progress,
) -> TrainResult:
    """Train (resuming an interrupted run unless ``resume=False``) and save the model to
    ``directory`` (:func:`~quillian.components.kge.storage.save_model`) as the model of
    the graph ``triples``; the checkpoint (:func:`checkpoint_path`) is removed once the
    model is saved. With no ``valid``, ``config.valid_share`` of the triples are held
    out of training to stop on (:func:`~quillian.components.kge.triples.hold_out`)."""
    config = config or ComplExConfig()
    graph = triples
    if valid is None and config.valid_share > 0:
        triples, held = hold_out(graph, config.valid_share, config.seed)
        if len(held):
            valid = held
            known = known or KnownAnswers.for_questions(graph, held)
    ckpt = checkpoint_path(directory)
    if not resume:
        ckpt.unlink(missing_ok=True)
    result = train_complex(
        triples, config, valid=valid, known=known, checkpoint=ckpt, progress=progress
    )
    progress("save", 0, 1)
    save_model(
        directory,
        result.model,
        fingerprint=graph.fingerprint,
        n_triples=len(graph),
        epochs=result.epochs,
        config=config.to_dict(),
        metrics={f"valid_{k}": v for k, v in result.valid_metrics.items()},
        extra={
            "mode": result.mode,
            "best_epoch": result.best_epoch,
            "stopped_early": result.stopped_early,
            "train_seconds": round(result.seconds, 3),
            "held_out": len(valid) if valid is not None else 0,
        },
    )
    ckpt.unlink(missing_ok=True)
    progress("save", 1, 1)
    return result


class _Examples:
    """The training examples: triple ``i < n`` read forwards, ``n + i`` reciprocally."""

    def __init__(self, triples: TripleSet) -> None:
        self.n = len(triples)
        self.n_relations = triples.n_relations
        self.heads = torch.from_numpy(triples.heads)
        self.relations = torch.from_numpy(triples.relations)
        self.tails = torch.from_numpy(triples.tails)

    def __len__(self) -> int:
        return 2 * self.n

    def batch(self, index: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(heads, relation rows, tails)`` of examples ``index``."""
        index = index.long()
        inverse = index >= self.n
        base = index - inverse.long() * self.n
        h, r, t = self.heads[base].long(), self.relations[base].long(), self.tails[base].long()
        heads = torch.where(inverse, t, h)
        tails = torch.where(inverse, h, t)
        return heads, r + inverse.long() * self.n_relations, tails


def _epoch(
    run: _Run, examples: _Examples, config: ComplExConfig, mode: str, progress: Progress
) -> float:
    """One pass over the examples in a fresh random order; returns the mean loss."""
    total = len(examples)
    order = torch.randperm(total, generator=run.generator, dtype=torch.int32)
    step = _one_vs_all_step if mode == "1vsall" else _negatives_step
    steps = (total + config.batch_size - 1) // config.batch_size
    report_every = max(1, steps // 20)
    loss_sum = 0.0
    progress("batch", 0, total)  # the epoch's start, for the pace and the time left
    for i, start in enumerate(range(0, total, config.batch_size)):
        heads, rows, tails = examples.batch(order[start : start + config.batch_size])
        loss = step(run, heads, rows, tails, config)
        run.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        # Adagrad builds sparse updates from coalesced gradients: valid by construction
        with torch.sparse.check_sparse_tensor_invariants(enable=False):
            run.optimizer.step()
        loss_sum += float(loss.detach()) * len(heads)
        if (i + 1) % report_every == 0 or i + 1 == steps:
            progress("batch", min(start + config.batch_size, total), total)
    return loss_sum / total


def _one_vs_all_step(
    run: _Run, heads: torch.Tensor, rows: torch.Tensor, tails: torch.Tensor, config: ComplExConfig
) -> torch.Tensor:
    h, r, t = run.entity[heads], run.relation[rows], run.entity[tails]
    logits = complex_product(h, r) @ run.entity.T
    return F.cross_entropy(logits, tails) + n3_penalty(h, r, t, config.n3_weight)


def _negatives_step(
    run: _Run, heads: torch.Tensor, rows: torch.Tensor, tails: torch.Tensor, config: ComplExConfig
) -> torch.Tensor:
    sample = torch.randint(
        run.entity.shape[0], (config.negatives,), generator=run.generator, dtype=torch.long
    )
    h = F.embedding(heads, run.entity, sparse=True)
    r = F.embedding(rows, run.relation, sparse=True)
    t = F.embedding(tails, run.entity, sparse=True)
    negatives = F.embedding(sample, run.entity, sparse=True)
    query = complex_product(h, r)
    positive = (query * t).sum(dim=-1, keepdim=True)
    against = (query @ negatives.T).masked_fill(sample[None, :] == tails[:, None], float("-inf"))
    logits = torch.cat([positive, against], dim=1)
    target = torch.zeros(len(heads), dtype=torch.long)
    return F.cross_entropy(logits, target) + n3_penalty(h, r, t, config.n3_weight)


def _due(epoch: int, config: ComplExConfig) -> bool:
    return epoch % config.eval_every == 0 or epoch == config.epochs


def _validate(run: _Run, valid: TripleSet, known: KnownAnswers, loss: float) -> None:
    metrics = evaluate(run.model(best=False), valid, known)
    run.history.append({"epoch": run.epoch, "loss": loss, **metrics})
    log.debug("epoch %d: loss %.4f, valid MRR %.4f", run.epoch, loss, metrics["mrr"])
    if metrics["mrr"] > run.best_mrr + _MIN_GAIN:
        run.best_mrr = metrics["mrr"]
        run.best_epoch = run.epoch
        run.best = (run.entity.detach().clone(), run.relation.detach().clone())
        run.best_metrics = metrics
        run.bad_evals = 0
    else:
        run.bad_evals += 1


def _comparable(identity: dict[str, Any]) -> dict[str, Any]:
    config = {k: v for k, v in identity["config"].items() if k not in _RESUMABLE_CHANGES}
    return {**identity, "config": config}


def _resume(run: _Run, path: Path, identity: dict[str, Any]) -> int:
    """Load the checkpoint at ``path`` into ``run`` when it belongs to this run; returns
    the epoch resumed from (0 when there is none or it belongs to another run)."""
    if not path.is_file():
        return 0
    try:
        state = torch.load(path, weights_only=True)
    except Exception as exc:  # any unreadable checkpoint means a fresh start
        log.warning("%s: unreadable checkpoint (%s); training from the start", path, exc)
        return 0
    stored = {k: state.get(k) for k in identity}
    if not isinstance(stored.get("config"), dict) or _comparable(stored) != _comparable(identity):
        log.warning("%s: a checkpoint of another graph or settings; training from the start", path)
        return 0
    run.restore(state)
    if run.stopped and identity["config"]["patience"] != stored["config"].get("patience"):
        run.stopped = False
    log.info("%s: resuming after epoch %d", path, run.epoch)
    return run.epoch


def _write_checkpoint(path: Path, state: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, lambda handle: torch.save(state, handle))
