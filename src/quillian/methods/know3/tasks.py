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
    parse_open_chain_answer,
    parse_reference,
    parse_triple_list,
    parse_verdict,
    repeats_examples,
    salvage_chain_answer,
)
from quillian.components.generation.outputs import parse_line
from quillian.components.generation.polar import asks_yes_or_no
from quillian.components.llm.base import ChatMessage, Decoding
from quillian.components.llm.structured import ParseError, Refusal, held_to
from quillian.components.llm.tasks import Task

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


def _answer_as_written(raw: str) -> ChainAnswer:
    """After two yes/no replies to an open question: the answer as written (both calls
    are recorded as parse failures), else the last line."""
    try:
        return parse_chain_answer(raw)
    except ParseError:
        return salvage_chain_answer(raw)


#: P1 for a question that does not ask yes or no: the same prompt and reply form; a yes
#: or a no is refused by the parser (asked again with the hint of
#: :mod:`~quillian.components.generation.polar`), and a reply with no answer sentence is
#: repaired asking for what the question wants.
OPEN_ANSWER: Task[ChainAnswer] = replace(
    ANSWER,
    parse=parse_open_chain_answer,
    fallback=_answer_as_written,
    repair=ANSWER.repair + " where X is the name, place, date or value the question asks for.",
)


def answer_task(
    question: str, open_answers: bool = True, examples: str = "", turn: str = ""
) -> Task[ChainAnswer]:
    """P1's task for ``question``: :data:`OPEN_ANSWER` unless it asks yes or no
    (:func:`~quillian.components.generation.polar.asks_yes_or_no`) or
    ``open_answers`` is off (the paper's prompt alone).

    With ``examples`` (the text of P1's example turns) and ``turn`` (its last turn, as
    rendered: the question and its references; see :func:`example_turns`), an answer
    that repeats the examples instead is refused too (a parse failure, recorded; asked
    again with ``EXAMPLES_HINT``); a second such reply keeps its answer as written."""
    task = OPEN_ANSWER if open_answers and not asks_yes_or_no(question) else ANSWER
    if not examples:
        return task

    def parse(raw: str) -> ChainAnswer:
        parsed = task.parse(raw)
        if repeats_examples(parsed.answer, examples, turn):
            raise Refusal(
                f'the answer "{parsed.answer}" is taken from the examples, not from this '
                "question or its references",
                raw,
                EXAMPLES_HINT,
            )
        return parsed

    return replace(task, parse=parse, fallback=_answer_as_written)


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
