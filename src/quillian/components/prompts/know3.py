# Prompt text is data copied from the paper, one paper line per source line: long lines stay.
# ruff: noqa: E501
"""The Know3-RAG paper's prompts (Appendix D, Figs. 6-10), with the structure of the
authors' code where the paper shows only the user turn.

Transcribed from a text extraction of the paper (see
``../shared/specs/know3-rag-and-kags.md`` section 11); what it garbled or lost, and how
it was rebuilt:

* PDF artefacts are normalised (``step -by-``, ``I \\'d``, stray quote marks); Fig. 6's
  literal ``\\n`` before "Let's think step by step." is a line break.
* P1 (answer): the paper's ``Reference: {Reference}`` line becomes ``{references}``,
  rendered as the code does: ``Reference {i}: {text}`` lines, or
  ``Reference: No reference available.`` when there is none. The paper's three dev
  exemplars (with reasoning) are not published; three exemplars written for Quillian
  (well-known facts, none from a benchmark) stand in, as user/assistant pairs, each
  assistant turn ``{reasoning}\\n\\nThe answer is {answer}.`` as in the code.
* P2 (reference generation): the code omits the entity sentence and the "Related
  Entities" block when there are no entities (the raw-query variant); here they are the
  variables ``entity_note`` and ``entities``, empty in that case. The code's system
  prompt of five hints is paraphrased (its text is not in the paper); its dev few-shot
  pairs are not published and are left out.
* P4 (triple extraction): the instruction block is the system message and the two
  examples are user/assistant turns, as in the code.
* P5 (relevance): Fig. 10 omits the passage; the code includes it and has four
  examples, not two: both extra examples (the fruit entity for a company question, with
  an unrelated and with a relevant passage) are included.
"""

from __future__ import annotations

from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt

__all__ = ["ANSWER", "QUERY", "REFERENCE", "RELEVANCE", "TRIPLES"]

_ANSWER_INSTRUCTION = """Given the following question, references (may or may not be available), explain your reasoning step-by-step based on the references and then provide your best possible answer. If there is no reference or you find the reference irrelevant, please provide an answer based on your knowledge.
{references}
Question: {question}
Your response should end with "The answer is [your_answer_text]", where the [your_answer_text] should be yes, no, or a few words directly answering the question.
Let's think step by step."""

_ANSWER_EXEMPLARS = (
    (
        "Reference: No reference available.",
        "Who was the father of the director of the film Jaws?",
        "The film Jaws (1975) was directed by Steven Spielberg. Steven Spielberg's father was the electrical engineer Arnold Spielberg.",
        "Arnold Spielberg",
    ),
    (
        "Reference 1: The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.\n"
        "Reference 2: The Statue of Liberty stands on Liberty Island in New York Harbor, in the United States.",
        "Are the Eiffel Tower and the Statue of Liberty in the same country?",
        "According to Reference 1, the Eiffel Tower is in Paris, France. According to Reference 2, the Statue of Liberty is in New York Harbor, in the United States. France and the United States are different countries.",
        "no",
    ),
    (
        "Reference: No reference available.",
        "In which year was the university where Alan Turing earned his doctorate founded?",
        "Alan Turing earned his PhD at Princeton University in 1938. Princeton University was founded in 1746.",
        "1746",
    ),
)


def _shots(template: str, shots: list[tuple[dict[str, str], str]]) -> list[ChatMessage]:
    """Few-shot turns: ``template`` filled with each shot's values (braces escaped, so
    only the final turn's placeholders remain), its reply, then ``template`` itself."""
    messages: list[ChatMessage] = []
    for values, reply in shots:
        user = template.format(**values).replace("{", "{{").replace("}", "}}")
        messages += [ChatMessage("user", user), ChatMessage("assistant", reply)]
    return [*messages, ChatMessage("user", template)]


def _answer_messages() -> tuple[ChatMessage, ...]:
    shots = [
        ({"references": r, "question": q}, f"{reasoning}\n\nThe answer is {answer}.")
        for r, q, reasoning, answer in _ANSWER_EXEMPLARS
    ]
    return tuple(_shots(_ANSWER_INSTRUCTION, shots))


ANSWER = Prompt(
    name="know3.answer",
    version=1,
    messages=_answer_messages(),
    variables=frozenset({"references", "question"}),
    description=(
        "Source: Know3-RAG paper, Appendix D, Fig. 6 (question answering, eq. 1), 3-shot "
        "chain of thought. Variables: question, the question as plain text; references, "
        '"Reference {i}: {text}" lines (1-based), or "Reference: No reference '
        'available." at turn 0. Output: reasoning ending in "The answer is X"; the '
        'parser takes the text after the last "answer is", without the final period.'
    ),
)

REFERENCE = Prompt(
    name="know3.reference",
    version=1,
    messages=(
        ChatMessage(
            "system",
            """You write reference paragraphs that help someone else answer a question. Hints:
1. Give the background the question needs.
2. Clarify the key terms and names in the question.
3. Give the dates, figures and events that matter.
4. Be concise but detailed.
5. Use the provided entities only if they are accurate.""",
        ),
        ChatMessage(
            "user",
            """I have a list of open-ended questions, and I'd like you to write a reference paragraph for each question. These paragraphs should provide sufficient background, key concepts, or context to guide the next person in answering the question effectively. You do not need to provide an answer directly, just enough information to help the next person frame their answer concisely and accurately.{entity_note}
Question: {question}{entities}
You should just output "[reference_paragraph]", where the [reference_paragraph] is the reference you write.""",
        ),
    ),
    variables=frozenset({"entity_note", "question", "entities"}),
    description=(
        "Source: Know3-RAG paper, Appendix D, Fig. 7 (knowledge-enhanced reference "
        "generation, eqs. 4-5); system hints after the authors' code. Variables: "
        "question, the query q (the question, or the rewritten query of a later round); "
        'entity_note, "" for the raw query, else a line break and "To make your reference '
        "passages more accurate, I'm going to provide you with some entities inside the "
        "question that you can refer to them, but they're not necessarily accurate.\"; "
        'entities, "" for the raw query, else "\\nRelated Entities:" and one '
        '"\\n{i}. {label}: {description}" line per related entity. Output: one '
        "paragraph, taken as it is."
    ),
)

QUERY = Prompt(
    name="know3.query",
    version=1,
    messages=(
        ChatMessage(
            "user",
            """You will be given references, a question, and an answer. The answer may be incomplete or incorrect. Identify the most critical missing or incorrect information in the references and the answer. Formulate one most important new question that will most effectively help retrieve the necessary information to answer the original question.
Reference :{references}
Question: {question}
Answer: {answer}
Please directly output the new question:""",
        ),
    ),
    variables=frozenset({"references", "question", "answer"}),
    description=(
        "Source: Know3-RAG paper, Appendix D, Fig. 8 (query generation, eq. 3). "
        "Variables: references, rendered as in know3.answer; question, the original "
        "question; answer, the previous turn's whole chain-of-thought response. Output: "
        "one new question (the first non-empty line is taken)."
    ),
)

TRIPLES = Prompt(
    name="know3.triples",
    version=1,
    messages=(
        ChatMessage(
            "system",
            """I have a task to extract relationships between entities from a given text.
You will be provided with a list of possible entities as a reference. Your task is to extract triples representing relationships between entities in the text. Each triple should include a subject, predicate, and object directly from the text. The entities in the triples may or may not match the provided reference list, but use the list to guide your extraction process. If no meaningful relationships are found, return None.
Instructions:
- Extract the subject, predicate, and object exactly as they appear in the text.
- If no valid relationships are found, return None.
- Output only the extracted triples in the format: [list of triples].""",
        ),
        ChatMessage(
            "user",
            """Text: Albert Einstein was born in Ulm, Germany in 1879.
Entities: Albert Einstein, Ulm, Germany""",
        ),
        ChatMessage(
            "assistant",
            """[{{"subject": "Albert Einstein", "predicate": "was born in", "object": "Ulm"}}, {{"subject": "Albert Einstein", "predicate": "was born in", "object": "Germany"}}]""",
        ),
        ChatMessage(
            "user",
            """Text: She is a member of the organization.
Entities: the organization""",
        ),
        ChatMessage("assistant", "None"),
        ChatMessage(
            "user",
            """Text: {text}
Entities: {entities}""",
        ),
    ),
    variables=frozenset({"text", "entities"}),
    description=(
        "Source: Know3-RAG paper, Appendix D, Fig. 9 (triple extraction, Tri(.) in eqs. 1 "
        "and 7), 2-shot, the instruction as the system message as in the authors' code. "
        "Variables: text, an answer's reasoning or a reference passage; entities, the KG "
        'entities linked in the text, comma-separated ("" when none). Output: a JSON list '
        'of {"subject", "predicate", "object"} objects, or None.'
    ),
)

_RELEVANCE_ASK = """Confirm that the article is reliable for the question. Provide your reasoning for the reliability decision, and end your response with: "The reliability of the passage is [yes or no]."
Question: {question}
{entities}Passage: {passage}"""

_RELEVANCE_EXEMPLARS = (
    (
        "What is the nutritional value of an apple?",
        "Entities:\n1. Apple: A fruit known for its nutritional benefits, such as fiber and vitamins.\n",
        "An apple is a nutritious fruit rich in fiber, vitamins, and antioxidants.",
        'The passage provides relevant information about the nutritional value of an apple, aligning with the question. The entity "Apple" refers to the fruit, which matches the context of the question. The reliability of the passage is yes.',
    ),
    (
        "What is the CEO of Apple Inc.?",
        "Entities:\n1. Apple Inc.: A technology company, known for products like the iPhone and Mac computers.\n",
        "Apples are widely consumed fruits that come in different varieties, including Granny Smith and Red Delicious.",
        "The passage discusses apples as a fruit, which is unrelated to the question about the CEO of Apple Inc. The passage does not address the company or its leadership. The reliability of the passage is no.",
    ),
    (
        "What is the CEO of Apple Inc.?",
        "Entities:\n1. Apple: A fruit known for its nutritional benefits, such as fiber and vitamins.\n",
        "Apples are widely consumed fruits that come in different varieties, including Granny Smith and Red Delicious.",
        "The question asks about the company Apple Inc., while both the entity given and the passage are about the fruit. The passage says nothing about the company or its chief executive. The reliability of the passage is no.",
    ),
    (
        "What is the CEO of Apple Inc.?",
        "Entities:\n1. Apple: A fruit known for its nutritional benefits, such as fiber and vitamins.\n",
        "Tim Cook has been the chief executive officer of Apple Inc. since 2011.",
        "The entity given describes the fruit, but the question is about the company Apple Inc. The passage states who the CEO of Apple Inc. is, which answers the question directly. The reliability of the passage is yes.",
    ),
)


def _relevance_messages() -> tuple[ChatMessage, ...]:
    messages = [
        ChatMessage(
            "system",
            """I need your help determining the reliability of a passage in the context of its ability to answer a specific question. I might provide some entities to help you better understand the problem. Here are the key considerations:
1. Passage Relevance: Check if the passage provides information relevant to answering the question. Even if the passage does not directly mention the entities, it should address the key concepts or ideas related to the question. If the passage does not contribute meaningfully to answering the question, it may be unreliable.
2. Entity Accuracy: The entities provided are from the question and may not appear in the passage. These entities are meant to help you understand the context of the question. If the passage conflicts with the entities provided (e.g., incorrect descriptions or relationships), this could affect its reliability.
3. Overall Reliability: Based on the relevance of the passage to the question and the accuracy of the entities, assess whether the passage is reliable for answering the question. If there are doubts or inconsistencies, provide a clear explanation.""",
        )
    ]
    shots = [
        ({"question": q, "entities": e, "passage": p}, verdict)
        for q, e, p, verdict in _RELEVANCE_EXEMPLARS
    ]
    return tuple(messages + _shots(_RELEVANCE_ASK, shots))


RELEVANCE = Prompt(
    name="know3.relevance",
    version=1,
    messages=_relevance_messages(),
    variables=frozenset({"question", "entities", "passage"}),
    description=(
        "Source: Know3-RAG paper, Appendix D, Fig. 10 (relevance check, eq. 6), with the "
        "passage line and the four examples of the authors' code. Variables: question, "
        'the original question; entities, "Entities:" and one "{i}. {label}: '
        '{description}" line per question entity, each line ending in a line break ("" '
        'when none); passage, the candidate reference. Output: reasoning ending in "The '
        'reliability of the passage is yes|no."'
    ),
)
