"""KAGS's generator input and answer (the authors' ``kgr.py`` context and ``kga.py``).

The context lists the retrieved relations grouped by hop, then by predicate, at most
``per_predicate`` lines per predicate (``• source → target``), followed by a summary
line. With ``sentences`` (the default; the paper's point, which the authors' code
drops), each line cites its source sentence as ``[S<n>]`` and the numbered sentences
follow, each once.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from quillian.components.generation.outputs import parse_line
from quillian.components.llm.base import Decoding
from quillian.components.llm.tasks import Task
from quillian.components.retrieval.base import UsedRelation

__all__ = ["ANSWER_KAGS", "format_hop_context", "parse_kags_answer"]

_ANSWER = re.compile(r"answer\s*:", re.IGNORECASE)


def format_hop_context(
    relations: Sequence[UsedRelation], *, sentences: bool = True, per_predicate: int = 10
) -> str:
    """The relations as KAGS's generator context (see the module docs); ``""`` when
    there are none."""
    if not relations:
        return ""
    numbers: dict[str, int] = {}
    lines: list[str] = []
    for hop in sorted({r.hop for r in relations}):
        lines.append(f"Hop {hop}:" if hop else "Hop 0 (matched triples):")
        groups: dict[str, list[UsedRelation]] = {}
        for r in relations:
            if r.hop == hop:
                groups.setdefault(r.predicate, []).append(r)
        for predicate, members in groups.items():
            lines.append(f"  {predicate}:")
            for r in members[:per_predicate]:
                line = f"    • {r.subject} → {r.object}"
                if sentences and r.sentence:
                    line += f" [S{numbers.setdefault(r.sentence, len(numbers) + 1)}]"
                lines.append(line)
    entities = {name for r in relations for name in (r.subject, r.object)}
    lines.append(f"Total unique entities: {len(entities)}; relations: {len(relations)}")
    if numbers:
        lines.append("Source sentences:")
        lines += [f"[S{n}] {sentence}" for sentence, n in numbers.items()]
    return "\n".join(lines)


def parse_kags_answer(raw: str, prompt: str = "") -> str:
    """The text after the last ``Answer:`` (or the whole reply), first non-empty line,
    quotes stripped."""
    *_, last = _ANSWER.split(raw)
    return parse_line(last if last.strip() else raw, prompt)


#: KAGS answer generation (the authors allowed 1024 new tokens; the answer is one line).
ANSWER_KAGS: Task[str] = Task("kags.answer", parse_kags_answer, Decoding(max_tokens=128))
