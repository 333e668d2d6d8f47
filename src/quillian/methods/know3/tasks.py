"""Know3-RAG's LLM steps as typed tasks over its five prompts
(:mod:`quillian.components.prompts.know3`), and how each shows its input.

What a failure means after the repair attempt, always recorded in the transcript: a
triple list that cannot be read is no triples (the text is then unscorable); a verdict
that cannot be read is "no" (the authors' reading); an answer with no "The answer is"
sentence gives its last line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pydantic import BaseModel

from quillian.components.generation.know3_outputs import (
    ANSWER_GRAMMAR,
    EXAMPLES_HINT,
    VERDICT_GRAMMAR,
    ChainAnswer,
    TripleList,
    parse_chain_answer,
    parse_reference,
    parse_triple_list,
    parse_verdict,
    repeats_examples,
    salvage_chain_answer,
)
from quillian.components.generation.outputs import parse_line
from quillian.components.generation.polar import asks_yes_or_no, refusing_yes_or_no
from quillian.components.llm.base import ChatMessage, Decoding
from quillian.components.llm.structured import held_to
from quillian.components.llm.tasks import Task, refusing

__all__ = [
    "ANSWER",
    "ENTITY_NOTE",
    "OPEN_ANSWER",
    "QUERY",
    "REFERENCE",
    "RELEVANCE",
    "TRIPLES",
    "answer_task",
    "example_turns",
    "format_references",
    "numbered_entities",
]

#: P1, 3-shot chain of thought (the code allows 1024 tokens; 512 holds a few steps).
ANSWER: Task[ChainAnswer] = Task(
    "know3.answer",
    parse_chain_answer,
    Decoding(max_tokens=512, grammar=ANSWER_GRAMMAR),
    salvage_chain_answer,
    "Your reply could not be used: {error}. Reply again: explain briefly, then end with "
    '"The answer is X."',
)


#: P1 for a question that does not ask yes or no: the same prompt and reply form, a
#: reply with no answer sentence repaired asking for what the question wants (a bare
#: yes or no is refused by :func:`answer_task`).
OPEN_ANSWER: Task[ChainAnswer] = replace(
    ANSWER,
    repair=ANSWER.repair + " where X is the name, place, date or value the question asks for.",
)


def _answer(value: ChainAnswer) -> str:
    return value.answer


def answer_task(
    question: str, open_answers: bool = True, examples: str = "", turn: str = ""
) -> Task[ChainAnswer]:
    """P1's task for ``question``. Unless ``open_answers`` is off (the paper's prompt
    alone) or the question asks yes or no
    (:func:`~quillian.components.generation.polar.asks_yes_or_no`), :data:`OPEN_ANSWER`
    refusing a bare yes or no.

    With ``examples`` (the text of P1's example turns) and ``turn`` (its last turn, as
    rendered: the question and its references; see :func:`example_turns`), an answer
    that repeats the examples instead is refused too (asked again with
    ``EXAMPLES_HINT``). Either refusal is recorded as a parse failure, and a second
    refused reply keeps its answer as written."""
    task = ANSWER
    if open_answers and not asks_yes_or_no(question):
        task = refusing_yes_or_no(OPEN_ANSWER, question, _answer)
    if not examples:
        return task

    def copied(value: ChainAnswer) -> tuple[str, str] | None:
        if not repeats_examples(value.answer, examples, turn):
            return None
        why = f'the answer "{value.answer}" is taken from the examples, not from this question'
        return why + " or its references", EXAMPLES_HINT

    return refusing(task, copied)


def example_turns(messages: Sequence[ChatMessage]) -> tuple[str, str]:
    """A few-shot prompt's rendered messages as the text of its example turns (all but
    the last) and its last turn, the one that asks."""
    return "\n".join(m.content for m in messages[:-1]), messages[-1].content if messages else ""


#: P2, one reference paragraph (the Knowledge Card models decode 128 tokens).
REFERENCE: Task[str] = Task("know3.reference", parse_reference, Decoding(max_tokens=256))
#: P3, one new question.
QUERY: Task[str] = Task("know3.query", parse_line, Decoding(max_tokens=64))


class _SPO(BaseModel):
    """One item of P4's list, as the prompt shows it (the schema a reply is held to)."""

    subject: str
    predicate: str
    object: str


#: P4, a JSON list of triples or None.
TRIPLES: Task[TripleList] = Task(
    "know3.triples",
    parse_triple_list,
    # held to a list of triples where the backend can: the prompt's "None" is then []
    held_to(list[_SPO], 384),
    lambda raw: TripleList(dropped=("unreadable triple list",)),
    "Your reply could not be used: {error}. Reply with only a JSON list of "
    '{"subject": "...", "predicate": "...", "object": "..."} objects, or None.',
)
#: P5, reasoning ending in "The reliability of the passage is yes/no."
RELEVANCE: Task[bool] = Task(
    "know3.relevance",
    parse_verdict,
    Decoding(max_tokens=256, grammar=VERDICT_GRAMMAR),
    lambda raw: False,
    'Your reply could not be used: {error}. End your reply with "The reliability of '
    'the passage is yes." or "The reliability of the passage is no."',
)

#: P2's entity sentence, present only with entities (the authors' code omits it).
ENTITY_NOTE = (
    "\nTo make your reference passages more accurate, I'm going to provide you with some "
    "entities inside the question that you can refer to them, but they're not "
    "necessarily accurate."
)


def format_references(references: Sequence[str]) -> str:
    """P1 and P3's reference block: ``Reference {i}: {text}`` lines, or the code's
    ``Reference: No reference available.``"""
    if not references:
        return "Reference: No reference available."
    return "\n".join(f"Reference {i}: {text}" for i, text in enumerate(references, 1))


def numbered_entities(lines: Sequence[str]) -> str:
    """``\\n{i}. {line}`` per entity (P2's "Related Entities" lines)."""
    return "".join(f"\n{i}. {line}" for i, line in enumerate(lines, 1))
