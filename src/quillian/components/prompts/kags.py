# Prompt text is data: long lines stay.
# ruff: noqa: E501
"""KAGS's prompts (the paper's supplement, section 2, and its authors' code, ``kgc.py``
and ``kga.py``; see the implementation spec, Part II, sections 16 and 18).

The paper shows no prompt text; the spec paraphrases the authors' code and asks for our
own wording. What is kept from the code: the extraction output is one
``["head", "relationship", "tail", "sentences"]`` array per line, ``sentences`` being
the sentence(s) the triple was read from, with one worked example; the answer prompt
asks for an answer based only on the context, said clearly when the context does not
hold it, and ends in ``Answer:``.
"""

from __future__ import annotations

from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt

__all__ = ["ANSWER", "EXTRACT", "JUDGE_QUESTION", "JUDGE_STATEMENTS", "JUDGE_VERDICT"]

_EXAMPLE_TEXT = (
    "Stoke City F.C.\n"
    "Stoke City Football Club is a professional football club based in Stoke-on-Trent, "
    "Staffordshire, England. Arthur Owen Turner (1 April 1909 - 12 January 1994) was an "
    "English football player and manager who played for Stoke City. He managed Birmingham "
    "City, which he took to the 1956 FA Cup Final."
)

_EXAMPLE_OUTPUT = "\n".join(
    [
        '["Stoke City F.C.", "is", "a professional football club", "Stoke City Football Club is a professional football club based in Stoke-on-Trent, Staffordshire, England."]',
        '["Stoke City F.C.", "is based in", "Stoke-on-Trent", "Stoke City Football Club is a professional football club based in Stoke-on-Trent, Staffordshire, England."]',
        '["Arthur Owen Turner", "born on", "1 April 1909", "Arthur Owen Turner (1 April 1909 - 12 January 1994) was an English football player and manager who played for Stoke City."]',
        '["Arthur Owen Turner", "died on", "12 January 1994", "Arthur Owen Turner (1 April 1909 - 12 January 1994) was an English football player and manager who played for Stoke City."]',
        '["Arthur Owen Turner", "played for", "Stoke City F.C.", "Arthur Owen Turner (1 April 1909 - 12 January 1994) was an English football player and manager who played for Stoke City."]',
        '["Arthur Owen Turner", "managed", "Birmingham City", "He managed Birmingham City, which he took to the 1956 FA Cup Final."]',
        '["Birmingham City", "reached", "1956 FA Cup Final", "He managed Birmingham City, which he took to the 1956 FA Cup Final."]',
    ]
)

_EXTRACT_SYSTEM = """You turn text into knowledge-graph triples, each kept with the sentence it comes from.

For every fact the text states, write one line holding a JSON array of exactly four strings:
["head", "relationship", "tail", "sentences"]
- head and tail are entities or values named in the text (people, places, organisations, works, dates, numbers); use the full name, not a pronoun.
- relationship is a short verb phrase linking them.
- sentences is the sentence (or sentences) of the text the triple was read from, copied word for word. Keep explanations and reasons: a sentence saying why or how something happened belongs to the triples it supports.

Write only these lines: no header row, no numbering, no commentary, and no triple twice. If the text states no fact, write []."""

#: KAGS extraction (``kgc.py``): 4-tuples ``[head, relationship, tail, source sentence(s)]``.
EXTRACT = Prompt(
    name="kags.extract",
    version=1,
    messages=(
        ChatMessage("system", _EXTRACT_SYSTEM),
        ChatMessage(
            "user",
            "Here is the context. Extract all valid triples from this:\n\n" + _EXAMPLE_TEXT,
        ),
        ChatMessage("assistant", _EXAMPLE_OUTPUT),
        ChatMessage(
            "user", "Here is the context. Extract all valid triples from this:\n\n{context}"
        ),
    ),
    variables=frozenset({"context"}),
    description=(
        "Source: KAGS knowledge-graph construction with metadata (supplement section 2, "
        "Fig. 4; the authors' kgc.py). {context}: the chunk, its title on the first line. Output: one "
        'JSON array of four strings per line, ["head", "relationship", "tail", "sentences"], '
        "or [] for none; parsed strictly by kags_tasks.parse_quads."
    ),
)

_ANSWER_SYSTEM = (
    "You are an expert at answering questions based only on the context given. Answer "
    "with the answer alone, in a few words. If the context does not contain the answer, "
    "say clearly that it does not."
)

#: KAGS answer generation (``kga.py``): context of grouped relations, then the question.
ANSWER = Prompt(
    name="kags.answer",
    version=1,
    messages=(
        ChatMessage("system", _ANSWER_SYSTEM),
        ChatMessage("user", "Context:\n{context}\n\nQuestion: {question}\nAnswer:"),
    ),
    variables=frozenset({"context", "question"}),
    description=(
        "Source: KAGS answer generation (the authors' kga.py; the supplement's Fig. 3 "
        "motivates passing source sentences). {context}: the retrieved relations grouped by hop "
        "and predicate, with their source sentences unless switched off; {question}: the "
        "question. Output: the answer; the text after the last 'Answer:', first line, "
        "quotes stripped."
    ),
)

# --- judges of the answer metrics (supplement section 3; the authors' metrics.py) ---

#: Faithfulness, step (a): the answer split into statements (eq. 8's sigma_q).
JUDGE_STATEMENTS = Prompt(
    name="kags.judge-statements",
    version=1,
    messages=(
        ChatMessage(
            "system",
            "You break an answer into its factual statements. Write each statement on its "
            "own line, starting with 'Statement:'. Each statement must stand alone (no "
            "pronouns pointing outside it). Write nothing else.",
        ),
        ChatMessage("user", "Question: {question}\nAnswer: {answer}\n\nStatements:"),
    ),
    variables=frozenset({"question", "answer"}),
    description=(
        "Source: KAGS faithfulness (supplement section 3, eq. 8; the authors' metrics.py). "
        "{question}: the question; {answer}: the "
        "answer judged. Output: one 'Statement: ...' line per statement."
    ),
)

#: Faithfulness, step (b): one statement judged against the evidence (eq. 8's nu_q).
JUDGE_VERDICT = Prompt(
    name="kags.judge-verdict",
    version=1,
    messages=(
        ChatMessage(
            "system",
            "You check a statement against a context. Write a brief explanation, then "
            "'Verdict: Yes' if the context supports the statement or 'Verdict: No' if it "
            "does not. Judge only by the context.",
        ),
        ChatMessage("user", "Context:\n{context}\n\nStatement: {statement}"),
    ),
    variables=frozenset({"context", "statement"}),
    description=(
        "Source: KAGS faithfulness (supplement section 3, eq. 8; the authors' metrics.py, "
        "which judged all statements in one reply; one call per statement here, which a "
        "small judge model follows far more reliably). {context}: the evidence the method "
        "retrieved; {statement}: one statement of the answer. Output: an explanation, "
        "then 'Verdict: Yes' or 'Verdict: No'."
    ),
)

#: Answer relevance (eq. 9): a question regenerated from the answer.
JUDGE_QUESTION = Prompt(
    name="kags.judge-question",
    version=1,
    messages=(
        ChatMessage(
            "system",
            "Write the one question that the given answer answers. Write only the "
            "question, nothing else.",
        ),
        ChatMessage("user", "Answer: {answer}\nQuestion:"),
    ),
    variables=frozenset({"answer"}),
    description=(
        "Source: KAGS answer relevance (supplement section 3, eq. 9; the authors' "
        "metrics.py). {answer}: the answer judged. Output: one question, "
        "whose embedding is compared with the original question's."
    ),
)
