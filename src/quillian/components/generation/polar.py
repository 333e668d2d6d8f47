"""Yes/no questions and yes/no answers: an answer that is only "yes" or "no" answers
nothing when the question asks for a name, a place or a value.

The local 0.5B model answered "yes" or "no" to 9 of the first 20 HotpotQA questions
under Know3-RAG's P1, and SA-RAG's JSON answer ended in a bare "yes" or "no" for 9 of
the first 50 MuSiQue questions, none of which asks one. :func:`refusing_yes_or_no`
makes such a reply a parse failure (a :class:`~quillian.components.llm.structured.Refusal`,
recorded), then asks again from the prompt with :data:`OPEN_HINT`; a second such reply is
kept as written. Asked with the refused reply shown (the usual repair), the model
repeated it every time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TypeVar

from quillian.components.llm.tasks import Task, refusing

__all__ = ["OPEN_HINT", "POLAR_OPENERS", "asks_yes_or_no", "is_yes_or_no", "refusing_yes_or_no"]

T = TypeVar("T")

#: Words that open an English yes/no question ("Are both ...", "Did ...", "Is ...").
POLAR_OPENERS = frozenset(
    {"am", "is", "are", "was", "were", "do", "does", "did", "have", "has", "had"}
    | {"can", "could", "will", "would", "shall", "should", "may", "might", "must"}
)
#: Added to the prompt when a yes or a no to such a question is refused.
OPEN_HINT = "Give the name, place, date or value the question asks for, not yes or no."
_FIRST_WORD = re.compile(r"[^\W\d_]+")
#: An answer that is only "yes" or "no": alone, in quotes, brackets or bold, or opening
#: a sentence ("yes. Both magazines ..."); "No Doubt" or "Nope" are answers, not a yes
#: or a no. Refused by a parser, not by an answer's grammar: held there (a negated
#: lexeme), the model goes on from "yes" to a longer non-answer ("yes sir") that no
#: parser could refuse, while the repair asks it for the answer.
_YES_NO = re.compile(r"""(?i:[\["'*( ]*(yes|no)([ .,;:!?'"*\])]*|[.,;:!][^\n]*))""")


def asks_yes_or_no(question: str) -> bool:
    """Whether ``question`` is a yes/no question: its first word is an auxiliary verb
    ("Are", "Did", "Can" ...), as English forms them. A title that opens with such a
    word ("Do Lafzon Ki Kahani, ...") only lets a yes or a no through."""
    first = _FIRST_WORD.search(question)
    return first is not None and first.group().lower() in POLAR_OPENERS


def is_yes_or_no(answer: str) -> bool:
    """Whether ``answer`` is only a yes or a no (see ``_YES_NO``)."""
    return _YES_NO.fullmatch(answer) is not None


def refusing_yes_or_no(task: Task[T], question: str, answer_of: Callable[[T], str]) -> Task[T]:
    """``task`` for ``question``: unless the question asks yes or no, a reply whose
    answer (``answer_of`` the parsed value) is only a yes or a no is refused, recorded,
    and the model asked again with :data:`OPEN_HINT`; a second such reply is kept as
    written (:func:`~quillian.components.llm.tasks.refusing`)."""
    if asks_yes_or_no(question):
        return task

    def refuse(value: T) -> tuple[str, str] | None:
        answer = answer_of(value).strip()
        if not is_yes_or_no(answer):
            return None
        return f'the answer is "{answer}", but the question does not ask yes or no', OPEN_HINT

    return refusing(task, refuse)
