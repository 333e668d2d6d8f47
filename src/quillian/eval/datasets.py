"""Multi-hop QA questions with their gold passages, read in their published formats.

* 2WikiMultihopQA (fast-graphrag's sample): JSONL with ``supporting_titles``,
  ``multihop`` and ``peer_top8`` (the titles four peer systems retrieved);
* MuSiQue: JSONL with ``paragraphs`` (``title``, ``paragraph_text``, ``is_supporting``),
  ``answer`` and ``answer_aliases``;
* HotpotQA: a JSON list with ``supporting_facts`` ([title, sentence index]).

Gold passages are identified by a key: the normalised title for 2Wiki and HotpotQA
(titles are unique there) and title plus text for MuSiQue, whose corpus repeats titles.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from quillian.errors import InputError

__all__ = ["Dataset", "Question", "load_questions", "passage_key"]

Dataset = Literal["2wiki", "musique", "hotpotqa"]


def passage_key(dataset: str, title: str, text: str = "") -> str:
    """The key that identifies a passage for scoring in ``dataset``."""
    base = " ".join(title.split()).casefold()
    if dataset == "musique":
        return base + "\n" + " ".join(text.split()).casefold()
    return base


@dataclass(frozen=True)
class Question:
    id: str
    question: str
    gold: frozenset[str]
    answers: tuple[str, ...] = ()
    multihop: bool = True
    peers: dict[str, list[str]] = field(default_factory=dict)
    kind: str = ""
    """The data set's own class of the question, where it has one: HotpotQA's and
    2Wiki's ``type`` (``bridge``, ``comparison``, ...), MuSiQue's hop count from its id
    (``2hop``, ``3hop1``, ...); empty where the record says none."""
    hop_answers: tuple[tuple[str, ...], ...] = ()
    """The gold answer of each hop of the question's decomposition, where the data set
    gives one (MuSiQue's ``question_decomposition``; the last hop's with the question's
    aliases): what a multi-step method's intermediate answers can be checked against."""


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", path=str(path), line=number) from exc
            if not isinstance(record, dict):
                raise InputError("expected a JSON object", path=str(path), line=number)
            yield number, record


def _field(record: dict[str, Any], name: str, path: Path, line: int) -> Any:
    if name not in record:
        raise InputError("missing field", path=str(path), line=line, field=name)
    return record[name]


def load_questions(dataset: Dataset, path: str | Path) -> list[Question]:
    """Read ``dataset`` questions from ``path``; errors name the file, line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("questions file not found", path=str(path))
    if dataset == "2wiki":
        return [_twowiki(r, path, n) for n, r in _jsonl(path)]
    if dataset == "musique":
        return [_musique(r, path, n) for n, r in _jsonl(path)]
    if dataset == "hotpotqa":
        return _hotpotqa(path)
    raise InputError(f"unknown dataset {dataset!r} (expected 2wiki, musique or hotpotqa)")


def _twowiki(record: dict[str, Any], path: Path, line: int) -> Question:
    titles = _field(record, "supporting_titles", path, line)
    peers = record.get("peer_top8", {})
    return Question(
        id=str(record.get("id", line)),
        question=_field(record, "question", path, line),
        gold=frozenset(passage_key("2wiki", t) for t in titles),
        answers=tuple(a for a in [record.get("answer")] if a),
        multihop=bool(record.get("multihop", True)),
        kind=str(record.get("type") or ""),
        peers={name: [passage_key("2wiki", t) for t in top] for name, top in peers.items()},
    )


def _musique(record: dict[str, Any], path: Path, line: int) -> Question:
    paragraphs = _field(record, "paragraphs", path, line)
    gold = frozenset(
        passage_key("musique", p["title"], p["paragraph_text"])
        for p in paragraphs
        if p.get("is_supporting")
    )
    answers = tuple(a for a in (record.get("answer", ""), *record.get("answer_aliases", [])) if a)
    qid = str(record.get("id", line))
    return Question(
        id=qid,
        question=_field(record, "question", path, line),
        gold=gold,
        answers=answers,
        kind=qid.split("__", 1)[0] if "__" in qid else "",
        hop_answers=_hop_answers(record.get("question_decomposition") or [], answers),
    )


def _hop_answers(
    hops: list[dict[str, Any]], answers: tuple[str, ...]
) -> tuple[tuple[str, ...], ...]:
    """Each hop's gold answer; the last hop answers the question, so its aliases are
    the question's too."""
    out = [(str(h["answer"]),) if isinstance(h, dict) and h.get("answer") else () for h in hops]
    if out and answers:
        out[-1] = tuple(dict.fromkeys((*out[-1], *answers)))
    return tuple(out)


def _hotpotqa(path: Path) -> list[Question]:
    try:
        records = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(f"invalid JSON: {exc.msg}", path=str(path), line=exc.lineno) from exc
    if not isinstance(records, list):
        raise InputError("expected a JSON list of questions", path=str(path))
    out = []
    for i, record in enumerate(records):
        facts = _field(record, "supporting_facts", path, i + 1)
        out.append(
            Question(
                id=str(record.get("_id", i)),
                question=_field(record, "question", path, i + 1),
                gold=frozenset(passage_key("hotpotqa", title) for title, _ in facts),
                answers=(record.get("answer", ""),),
                kind=str(record.get("type") or ""),
            )
        )
    return out
