"""What the commands print on stdout: plain lines, the same on a terminal and in a pipe."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from quillian.cli.console import one_line
from quillian.cli.steps import step_lines
from quillian.components.ingestion.pipeline import IngestFailure
from quillian.components.retrieval.base import RetrievalResult
from quillian.components.retrieval.reasoning import ReasoningPath, reasoning_paths
from quillian.index import BuildReport
from quillian.methods.base import AnswerResult
from quillian.methods.know3.check import Verification
from quillian.methods.spec import MethodSpec

__all__ = [
    "failure_name",
    "method_line",
    "method_record",
    "print_answer",
    "print_build",
    "print_methods",
    "print_retrieval",
    "print_verification",
    "score_text",
]


def _flat(text: str, limit: int) -> str:
    return " ".join(text.split())[:limit]


def score_text(score: float) -> str:
    """A score with four significant digits, so small ones stay apart (PPR's 0.0058
    and 0.0002, a filler's -1e-06) where a fixed three decimals would print 0.000."""
    return f"{score:.4g}"


def _mentions(text: str, answer: str) -> bool:
    """Whether ``text`` contains ``answer`` (case and spacing aside)."""
    needle = " ".join(answer.split()).casefold()
    return bool(needle) and needle in " ".join(text.split()).casefold()


def print_retrieval(result: RetrievalResult) -> None:
    print(f"{result.method}: {len(result.passages)} passages for {result.query!r}")
    for rank, p in enumerate(result.passages, start=1):
        print(f"{rank:2d}. [{score_text(p.score)}] {p.title}: {_flat(p.text, 160)}")
    trace = result.trace
    if trace.seeds:
        print("seeds:", ", ".join(f"{s.name} ({s.source} {s.score:.2f})" for s in trace.seeds))
    if trace.activated:
        print("activated:", ", ".join(f"{a.name} {a.activation:.2f}" for a in trace.activated[:15]))
    for r in trace.relations[:10]:
        sentence = _flat(r.sentence or r.description, 140)
        hop = f" hop {r.hop}" if r.hop else ""
        print(f"relation [{r.weight:.2f}]{hop} {r.subject} -{r.predicate}- {r.object}: {sentence}")
    for path in reasoning_paths(trace.paths):
        if path.title:  # why a returned passage came up: the path to its entity
            _print_path(f"path to {path.title}'s passage", path)


def _print_path(label: str, path: ReasoningPath) -> None:
    hops = len(path.steps)
    print(f"{label} ({hops} hop{'s' if hops > 1 else ''}):")
    for step in path.steps:
        sentence = _flat(step.sentence, 140)
        print(f"  {step.subject} -{step.predicate}- {step.object}: {sentence}")


def print_answer(result: AnswerResult, trace: bool = False) -> None:
    """The answer, its evidence and cost; with ``trace``, the steps that led to it."""
    print(f"answer: {result.answer or '(none)'}")
    if result.error:
        print(f"failed: {result.error}")
    passages = result.evidence.passages
    marked = [_mentions(p.text, result.answer or "") for p in passages]
    if passages:
        note = " (* states the answer)" if any(marked) else ""
        read = result.evidence.passages_read
        label = "passages given to the model" if read else "supporting passages (not read)"
        print(f"{label}{note}:")
    for i, (p, star) in enumerate(zip(passages, marked, strict=True), start=1):
        print(f" {'*' if star else ' '}[{i}] {p.title}: {_flat(p.text, 140)}")
    if result.evidence.references:
        print("references given to the model (source, KG-consistency score):")
    for ref in result.evidence.references:
        score = "unscored" if ref.score is None else f"{ref.score:.3g}"
        print(f"  [{ref.source}, {score}] {_flat(ref.text, 140)}")
    if result.evidence.relations:
        print("relations given to the model, with their source sentences:")
    for r in result.evidence.relations:
        sentence = _flat(r.sentence or r.description, 140)
        print(f"  {r.subject} -{r.predicate}- {r.object}: {sentence}")
    if result.evidence.kg_triples:
        print("knowledge-graph triples given to the model:")
    for t in result.evidence.kg_triples:
        sentence = f": {_flat(t.sentence, 140)}" if t.sentence else ""
        print(f"  <{t.subject_name} | {t.relation} | {t.object_name}>{sentence}")
    for path in reasoning_paths(result.evidence.paths):
        if result.answer and _mentions(path.entity.name, result.answer):
            _print_path(f"how retrieval reached {path.entity.name}", path)
    usage = result.transcript.usage
    print(
        f"{len(result.transcript.calls)} LLM calls, {usage.prompt_tokens} prompt + "
        f"{usage.completion_tokens} completion tokens, {result.transcript.parse_failures} "
        f"parse failures, {result.seconds:.1f} s"
    )
    if trace:
        print("steps:")
        for step in result.steps:
            for line in step_lines(step):
                print(f"  {line}")


def print_build(report: BuildReport, out: Path, refused: Sequence[Exception] = ()) -> None:
    """What a build or a deletion did, and the index's counts: each failed document
    (and each input entry ``refused`` before the build) on one line with its reason."""
    ingest = report.ingest
    if ingest is not None:
        counts = f"{ingest.new} new, {ingest.skipped} already indexed, {ingest.failed} failed"
        print(f"documents: {counts}" + (f", {len(refused)} refused" if refused else ""))
        for failure in ingest.failures:
            print(f"  failed: {failure_name(failure)}: {one_line(failure.error)}")
    for error in refused:
        print(f"  refused: {one_line(str(error))}")
    if report.deleted:
        print(f"removed {len(report.deleted)} documents: {', '.join(report.deleted)}")
    print("index:", ", ".join(f"{k} {v}" for k, v in report.counts.items()))
    if report.reused:
        print(f"unchanged: nothing new, same settings and stages as the build in {out}")
        return
    print(f"written to {out}")


def failure_name(failure: IngestFailure) -> str:
    """A failed document as a user finds it: its file, and its title where the file
    holds many (a corpus), else its id."""
    if not failure.source:
        return f"{failure.title} ({failure.doc_id})" if failure.title else failure.doc_id
    titled = failure.title and Path(failure.source).stem != failure.title
    return f"{failure.source} ({failure.title})" if titled else failure.source


def method_record(spec: MethodSpec) -> dict[str, Any]:
    """A method as JSON: name, summary, default retriever, needs and options."""
    return {
        "name": spec.name,
        "summary": spec.summary,
        "aliases": list(spec.aliases),
        "retriever": spec.retriever,
        "needs_kg": spec.needs_graph,
        "needs_kge": spec.needs_kge,
        "build_stages": [stage.name for stage in spec.index_stages],
        "options": [
            {"name": o.name, "type": o.type_name, "default": o.default, "help": o.help}
            for o in spec.options
        ],
    }


def method_line(spec: MethodSpec) -> str:
    """One line for help texts: name, aliases, summary and options with defaults."""
    aliases = f" (alias {', '.join(spec.aliases)})" if spec.aliases else ""
    options = ", ".join(f"{o.name}={_value(o.default)}" for o in spec.options)
    needs = "; needs --kg" if spec.needs_graph else ""
    if spec.needs_kge:
        needs = "; needs a trained KG-embedding model (--kg KG, or the index's own graph)"
    return f"{spec.name}{aliases}: {spec.summary}{needs}; options: {options or 'none'}"


def print_methods(specs: Iterable[MethodSpec]) -> None:
    """The method table: per method its summary, retriever, graph and options."""
    for spec in specs:
        aliases = f" (alias {', '.join(spec.aliases)})" if spec.aliases else ""
        print(f"{spec.name}{aliases}: {spec.summary}")
        retriever = spec.retriever or "none (no retrieval)"
        graph = "needed" if spec.needs_graph else "not used"
        if spec.needs_kge:
            graph = "KG and its trained KG-embedding model (default: the index's graph)"
        print(f"  retriever: {retriever}; --kg: {graph}")
        if not spec.options:
            print("  options: none")
        for o in spec.options:
            print(f"  --option {o.name}={o.type_name.upper()} (default {_value(o.default)})")
            if o.help:
                print(f"      {o.help}")


def _value(value: Any) -> str:
    """A default as typed after ``--option key=`` (JSON but for strings)."""
    return value if isinstance(value, str) else json.dumps(value, default=str)


def print_verification(verification: Verification) -> None:
    """The KG-embedding verdict on an answer, with the triples behind it."""
    check = verification.check
    verdict = "verified" if verification.verified else "not verified"
    print(f"\nKGE verification: {verdict}")
    for line in step_lines(check):
        print(f"  {line}")
