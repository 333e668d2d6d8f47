"""Answer metrics for multi-hop QA, scored against every gold alias.

* exact match and token F1 with SQuAD's normalisation (lower case, punctuation and the
  articles a/an/the removed, white space collapsed), as in the official SQuAD v1.1
  evaluation script that MuSiQue, HotpotQA and 2WikiMultihopQA reuse;
* accuracy: the normalised gold answer is contained in the normalised prediction, the
  lenient measure KG-Infused RAG and SA-RAG report beside EM;
* token and fuzzy containment, KAGS's measures (the authors' ``metrics.py``): the share
  of the gold answer's word tokens found in the prediction, and the best
  ``difflib`` similarity between the gold answer and any window of as many words of
  the prediction (1 when it occurs whole).

Each metric takes the best score over the gold answer and its aliases (MuSiQue's
``answer_aliases``).
"""

from __future__ import annotations

import difflib
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = [
    "AnswerScores",
    "accuracy",
    "exact_match",
    "f1",
    "fuzzy_containment",
    "normalize_answer",
    "score_answer",
    "token_containment",
]

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """SQuAD normalisation: lower case, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(gold: str | Iterable[str]) -> list[str]:
    answers = [gold] if isinstance(gold, str) else list(gold)
    if not answers:
        raise ValueError("no gold answer given")
    return answers


def exact_match(prediction: str, gold: str | Iterable[str]) -> float:
    """1.0 when the normalised prediction equals a normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(gold)))


def _f1_one(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def f1(prediction: str, gold: str | Iterable[str]) -> float:
    """Best token-overlap F1 between the prediction and any gold answer."""
    return max(_f1_one(prediction, g) for g in _golds(gold))


def accuracy(prediction: str, gold: str | Iterable[str]) -> float:
    """1.0 when a non-empty normalised gold answer occurs in the normalised prediction."""
    pred = f" {normalize_answer(prediction)} "
    return float(
        any((g := normalize_answer(answer)) and f" {g} " in pred for answer in _golds(gold))
    )


_WORD = re.compile(r"\w+")


def _token_containment(prediction: str, gold: str) -> float:
    wanted = set(_WORD.findall(gold.lower()))
    found = set(_WORD.findall(prediction.lower()))
    if not wanted:
        return float(not found)
    return len(wanted & found) / len(wanted)


def token_containment(prediction: str, gold: str | Iterable[str]) -> float:
    """Share of the gold answer's ``\\w+`` tokens (lower-cased, as a set) that occur in
    the prediction; a gold answer without tokens scores 1 only against a prediction
    without tokens. Best over the gold aliases."""
    return max(_token_containment(prediction, g) for g in _golds(gold))


def _fuzzy_containment(prediction: str, gold: str) -> float:
    wanted, pred = gold.lower(), prediction.lower()
    if wanted in pred:
        return 1.0
    width = len(wanted.split())
    words = pred.split()
    if len(words) < width:
        return 0.0
    return max(
        difflib.SequenceMatcher(None, wanted, " ".join(words[i : i + width])).ratio()
        for i in range(len(words) - width + 1)
    )


def fuzzy_containment(prediction: str, gold: str | Iterable[str]) -> float:
    """1 when the lower-cased gold answer occurs in the lower-cased prediction; else the
    best ``difflib.SequenceMatcher`` ratio between the gold answer and a window of as
    many words of the prediction (0 when the prediction is shorter). Best over the
    gold aliases."""
    return max(_fuzzy_containment(prediction, g) for g in _golds(gold))


@dataclass(frozen=True, slots=True)
class AnswerScores:
    em: float
    f1: float
    accuracy: float


def score_answer(prediction: str, gold: str | Sequence[str]) -> AnswerScores:
    """All three metrics for one prediction."""
    return AnswerScores(
        exact_match(prediction, gold), f1(prediction, gold), accuracy(prediction, gold)
    )
