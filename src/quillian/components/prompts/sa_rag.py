# Prompt text is data copied from the paper, one paper line per source line: long lines stay.
# ruff: noqa: E501
"""The SA-RAG paper's prompts (Appendix A, Listings 1-3; Appendix B, Listings 4-7).

Transcribed from a text extraction of the paper. What the extraction garbled or lost,
and how it was rebuilt:

* Line wraps inside the listings (marked with arrows in the extraction) are joined, and
  markdown escapes (``\\*\\*``, ``\\_``) undone. Nested bullet indentation in Listing 4 was
  flattened by the extraction and is restored from the bullet structure.
* Few-shot demonstrations become user/assistant message pairs; the paper's labels
  ("Demonstration", "Input", "Desired output", "Response", "Real input", "Worked
  example") are replaced by the message roles. The demonstration user message has the
  same layout as the real input. Material inside a demonstration that is not an
  input/output pair is kept verbatim: Listing 4's "Forbidden outputs" move to the end of
  the system message; Listing 5's "Reasoning" walk-through stays in the assistant
  message in front of "Response", as the paper shows the model's answer.
* The input sections are not shown for Listing 1 ("Below is a question followed by some
  context"), Listing 2 (its "# Input" section is garbled), Listing 6 (lost) and Listing 7
  (only the "# Input" heading survives). They are rebuilt minimally from each listing's
  own words: "Question:", "Knowledge paragraphs:" and, where the listing mentions a
  "list of key relationships", "Key relationships:".
* Listing 1 has a stray double quote after "'reasoning', which"; it is dropped.
* Listing 3's worked example appears twice in the extraction, once closed and
  malformed (sub-questions "What is the Argentine PGA Championship record holder?" and
  "How many tournaments has the record holder won?") and once as the page continuation
  that the listing's notes follow ("Who is the record holder for the Argentine PGA
  Championship?" and "How many tournaments worldwide has that person won?"). The
  continuation is used. The listing's triple-quote fences are read as ```json fences,
  and its "Notes" move before the worked example, at the end of the system message.
"""

from __future__ import annotations

import json
from typing import Any

from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt

__all__ = [
    "BASELINE_ANSWER",
    "COT",
    "DECOMPOSE",
    "NER",
    "RELATIONS",
    "SA_ANSWER",
    "SA_REASON",
]


def _literal(text: str) -> str:
    """``text`` as template text: braces doubled so rendering leaves them as they are."""
    return text.replace("{", "{{").replace("}", "}}")


def _json_records(records: list[dict[str, Any]]) -> str:
    """A JSON array of objects laid out as in Listing 4: one key per line, values inline."""

    def record(fields: dict[str, Any]) -> str:
        lines = (
            f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in fields.items()
        )
        return " {\n" + ",\n".join(lines) + "\n }"

    return "[\n" + ",\n".join(record(r) for r in records) + "\n]"


_PASSAGES_FORMAT = (
    "one paragraph per retrieved chunk, numbered in rank order and separated by a blank "
    'line: "[1] title: text" ("[1] text" for a chunk without a title). The paper does not '
    "show this layout; it is Quillian's convention"
)
_RELATIONSHIPS_FORMAT = (
    "the textual representations of the relevant related_to links between activated "
    'entities (the paper\'s r_1..r_k2), one per line as "- subject relationship object" '
    '(for example "- Jack Parsons co-founded Jet Propulsion Laboratory"); the paper does not '
    "show this layout"
)
_REASON_JSON_OUTPUT = (
    'a JSON object {"provided_context": str, "answer_possible": bool, "final_answer": str, '
    '"additional_question": str}; final_answer is blank unless answer_possible is true, '
    "additional_question is the follow-up query for the next retrieval step when it is "
    "false. The paper decodes with the LLM's structured-output (JSON) mode"
)


# --- Listing 1: answering prompt for the baseline systems ------------------------------

_BASELINE_ANSWER_SYSTEM = """Below is a question followed by some context from different sources. Please answer the question based on the context. The answer to the question could be either single word, yes/no or consist of multiple words describing single entity. If the provided information is insufficient to answer the question, respond 'Insufficient Information'. Answer directly without explanation. Provide answer in JSON object with two string attributes, 'reasoning', which provides your detailed reasoning about the answer, and 'final_answer' where you provide your short final answer without explaining your reasoning."""

BASELINE_ANSWER = Prompt(
    name="sa-rag.baseline-answer",
    version=1,
    messages=(
        ChatMessage("system", _literal(_BASELINE_ANSWER_SYSTEM)),
        ChatMessage("user", "Question: {question}\n\nContext:\n{passages}"),
    ),
    variables=frozenset({"question", "passages"}),
    description=(
        "Source: SA-RAG paper, Appendix A, Listing 1 (answering prompt shared by the Naive "
        "RAG, CoT RAG and query-decomposition baselines). The user message is "
        "reconstructed: the paper shows only the instruction, which says a question is "
        "followed by context. Variables: question, the multi-hop question; passages, the "
        f"retrieved context, {_PASSAGES_FORMAT}. For the query-decomposition baseline the "
        "context also holds every sub-question with its answer, before the passages "
        '(one "Q: ... A: ..." pair per line; not shown in the paper). Output: a JSON object '
        '{"reasoning": str, "final_answer": str}; final_answer is "Insufficient '
        'Information" when the context does not answer the question.'
    ),
)


# --- Listing 2: reasoning prompt for the CoT RAG baseline ------------------------------

_COT_SYSTEM = """You are given a **multi-hop question** that requires combining information across multiple source documents. Along with the question, you are provided a list of **short knowledge paragraphs**, each with different pieces of information potentially required for answering the query.

## Task description

Your goal is to **understand and reason through the question** using only the information provided.

To achieve this you should:
- **Extract the relevant** facts from the knowledge paragraphs that are needed to answer the question.
- **Paraphrase and organize** these facts into a clear and coherent summary called 'provided_context'. This summary should explain how the relevant entities and relationships come together to support answering the question.
- Based on this reasoning:
  - If the information is **sufficient to directly answer the question**, provide the answer.
  - If important information is **missing**, return a **specific follow-up question** that would help fill the gap.

### Output Format (JSON)

```json
{
 "provided_context": "Summarize only the facts relevant to answering the question, combining them into a clear explanation.",
 "answer_possible": true | false,
 "final_answer": "Give your answer here if 'answer_possible' is true, otherwise leave this blank.",
 "additional_question": "If 'answer_possible' is false, write a clear and specific follow-up question that would help get the missing information."
}
```"""

COT = Prompt(
    name="sa-rag.cot",
    version=1,
    messages=(
        ChatMessage("system", _literal(_COT_SYSTEM)),
        ChatMessage("user", "# Input\n\nQuestion: {question}\n\nKnowledge paragraphs:\n{passages}"),
    ),
    variables=frozenset({"question", "passages"}),
    description=(
        "Source: SA-RAG paper, Appendix A, Listing 2 (reasoning prompt of the CoT RAG "
        "baseline: one step of iterative retrieval, at most three steps). The '# Input' "
        "section is garbled in the extraction; the user message is reconstructed from the "
        "listing's own words. Variables: question, the original multi-hop question; "
        "passages, the knowledge paragraphs: the provided_context summaries of earlier "
        "steps (the short-term memory) and the chunks newly retrieved for the last "
        "follow-up question (the paper says they are combined, not how; Quillian puts the "
        f"summaries first), {_PASSAGES_FORMAT}. Output: {_REASON_JSON_OUTPUT}."
    ),
)


# --- Listing 3: question decomposition -------------------------------------------------

_DECOMPOSE_SYSTEM = """You are a decomposition module for a multi-hop question answering system.
Your task: **given one user query, rewrite it as the smallest possible sequence of simpler, preferably single-hop questions** that, when answered in order, are sufficient to answer the original query.

Follow these rules strictly:

1. **Use only information explicitly present in the original query.**

    * Do **not** introduce new entities, definitions, or clarifying questions that the user did not ask.
    * If the query says "John Phan," do **not** ask "Who is John Phan?" because that is not needed to resolve the chain.

2. **Decompose by inference steps, not by wording.**

    * Each subquestion should retrieve **one missing fact** or **resolve one reference** needed by a later subquestion.
    * Prefer single-hop, factual questions (entity → attribute, entity → location, entity → relation).

3. **Keep only necessary subquestions.**

    * If a fact is already given in the original query, do **not** restate it as a question.
    * Stop decomposing when the main query becomes answerable.

4. **Preserve dependency order.**

    * Later subquestions may refer to entities/answers from earlier ones.
    * Number the subquestions in the order they should be executed.

5. **Output format (JSON):**

    ```json
    {
        "original_question": "<the user question>",
        "subquestions": [
            {"id": 1, "question": "..."},
            {"id": 2, "question": "..."},
            {"id": 3, "question": "..."}
        ]
    }
    ```

6. **If the query is already single-hop, return it as one subquestion** in the same format.

Notes:
* You **must not** create questions like "What is Argentine PGA Championship?" because they are not required to answer the original query.
* You **must not** guess missing constraints.
* Your objective is **faithful, minimal, query-conditioned decomposition**, not general elaboration."""

_DECOMPOSE_EXAMPLE_QUESTION = (
    "The Argentine PGA Championship record holder has won how many tournaments worldwide?"
)
_DECOMPOSE_EXAMPLE_OUTPUT = """{
    "original_question": "The Argentine PGA Championship record holder has won how many tournaments worldwide?",
    "subquestions": [
        {
            "id": 1,
            "question": "Who is the record holder for the Argentine PGA Championship?"
        },
        {
            "id": 2,
            "question": "How many tournaments worldwide has that person won?"
        }
    ]
}"""

DECOMPOSE = Prompt(
    name="sa-rag.decompose",
    version=1,
    messages=(
        ChatMessage("system", _literal(_DECOMPOSE_SYSTEM)),
        ChatMessage("user", _literal(_DECOMPOSE_EXAMPLE_QUESTION)),
        ChatMessage("assistant", _literal(_DECOMPOSE_EXAMPLE_OUTPUT)),
        ChatMessage("user", "{question}"),
    ),
    variables=frozenset({"question"}),
    description=(
        "Source: SA-RAG paper, Appendix A, Listing 3 (question decomposition prompt of the "
        "query-decomposition baseline), with its worked example as a user/assistant pair. "
        "The extraction holds two versions of the example's sub-questions; the page "
        "continuation that the listing's notes follow is used. Variables: question, the "
        "multi-hop question as plain text. Output: a JSON object "
        '{"original_question": str, "subquestions": [{"id": int, "question": str}, ...]} '
        "with ids 1..n in execution order; a single-hop question comes back as one "
        "sub-question."
    ),
)


# --- Listing 4: named entity recognition -----------------------------------------------

_NER_SYSTEM = """Given a textual paragraph, your task is to identify and extract entities from the provided text following the detailed step-by-step procedure described below:

- **Identify all entities explicitly mentioned in the text.**
  - Entities fall into one of four categories:
    - **PERSON**: Individual people.
    - **ORGANIZATION**: Companies, institutions, and organized groups.
    - **GPE** (Geopolitical Entities): Countries, cities, states, regions, or territories.
    - **MISC**: All other notable entities that don't fit the above categories, such as historical events, artworks, patents, buildings, etc.

- **Handle Names and Aliases:**
  - If an entity has multiple mentions (aliases or abbreviations), use the **full official name** as the primary reference.
  - Include all the mentioned aliases in output information

- **Extract factual attributes:**
  - For **PERSON** entities, extract:
    - Birthplace, birth/death dates, nationality, occupation, titles, and achievements explicitly stated in the text.
  - For **ORGANIZATION** entities, extract:
    - Foundation dates, location of headquarters, industry or sectors, associated institutions, co-founders, and explicit criticisms if any.
  - For **GPE** entities, extract:
    - Extract explicitly stated geographical or political details, historical characteristics, capital city, demographics, and cultural or administrative aspects
    - **By any means do not include** information like "birthplace of...", "city of origin of...", or "location where someone died" or any information that describe GPE in context dependent manner
  - For **MISC** entities, extract:
    - Explicitly stated temporal attributes, scale, historical significance, or explicit descriptive facts provided in the text.

- **Strict adherence to text:**
  - **Only** extract details explicitly mentioned in the text.
  - **Do not** infer, assume, or fabricate information not present in the provided text.

Output Format

- Return your response as a JSON array.
- Each element in the array should be a JSON object with exactly four keys: "name", "type", "aliases", and "entity_information"."""


def _entity(name: str, kind: str, info: str, aliases: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"name": name, "type": kind, "aliases": list(aliases), "entity_information": info}


_NER_EXAMPLE_TEXT = "Nikola Tesla (born July 9/10, 1856, Smiljan, Austrian Empire [now in Croatia]-died January 7, 1943, New York, New York, U.S.) was a Serbian American inventor and engineer who discovered and patented the rotating magnetic field, the basis of most alternating-current machinery. He also developed the three-phase system of electric power transmission. He immigrated to the United States in 1884 and sold the patent rights to his system of alternating-current dynamos, transformers, and motors to George Westinghouse. In 1891 he invented the Tesla coil, an induction coil widely used in radio technology."

_NER_EXAMPLE_OUTPUT = [
    _entity(
        "Nikola Tesla",
        "PERSON",
        "Born July 9/10, 1856, in Smiljan, Austrian Empire (now in Croatia), died January 7, 1943, in New York, U.S. Serbian American inventor and engineer who discovered and patented the rotating magnetic field, developed the three-phase system of electric power transmission, immigrated to the United States in 1884, sold patent rights of alternating-current systems to George Westinghouse, and invented the Tesla coil in 1891.",
    ),
    _entity("Smiljan", "GPE", "Place previously in Austrian Empire, currently part of Croatia."),
    _entity("Austrian Empire", "GPE", "Empire existing in 1856."),
    _entity("Croatia", "GPE", "Country in Europe."),
    _entity("New York", "GPE", "City in the United States."),
    _entity("United States", "GPE", "Country.", aliases=("U.S.",)),
    _entity(
        "George Westinghouse",
        "PERSON",
        "Person who purchased patent rights of Nikola Tesla's system of alternating-current dynamos, transformers, and motors.",
    ),
    _entity(
        "Tesla coil",
        "MISC",
        "Induction coil invented by Nikola Tesla in 1891, widely used in radio technology.",
    ),
]

_NER_FORBIDDEN_OUTPUTS = [
    _entity("United States", "GPE", "Country where Nikola Tesla immigrated to in 1884."),
    _entity("New York", "GPE", "City in the United States, where Nikola Tesla died."),
    _entity(
        "Smiljan",
        "GPE",
        "Town in the Austrian Empire (now in Croatia), birthplace of Nikola Tesla.",
    ),
]

NER = Prompt(
    name="sa-rag.ner",
    version=1,
    messages=(
        ChatMessage(
            "system",
            _literal(
                f"{_NER_SYSTEM}\n\nForbidden outputs\n\n{_json_records(_NER_FORBIDDEN_OUTPUTS)}"
            ),
        ),
        ChatMessage("user", _literal(_NER_EXAMPLE_TEXT)),
        ChatMessage("assistant", _literal(_json_records(_NER_EXAMPLE_OUTPUT))),
        ChatMessage("user", "{passage}"),
    ),
    variables=frozenset({"passage"}),
    description=(
        "Source: SA-RAG paper, Appendix B, Listing 4 (NER prompt of the indexing step), "
        "with its one-shot demonstration (the Nikola Tesla paragraph) as a user/assistant "
        "pair; the demonstration's 'Forbidden outputs' close the system message. "
        "Variables: passage, the text of one chunk, as plain text. Output: a JSON array of "
        'objects with exactly the keys "name" (full official name), "type" (one of PERSON, '
        'ORGANIZATION, GPE, MISC), "aliases" (list of strings, possibly empty) and '
        '"entity_information" (a string of descriptive facts).'
    ),
)


# --- Listing 5: relationship extraction ------------------------------------------------

_RELATIONS_SYSTEM = """You are given a textual paragraph and a list of named entities. Your task is to perform relationship extraction by identifying all explicit relationships mentioned in the text that connect two entities from the provided list.

Instructions:
- **Entity Pairing:** Only consider relationships between two entities from the provided named entities list.
- **Triple Format:** For each relationship found, output a triple formatted as a list of three strings: `["entity1", "relationship", "entity2"]`.
- **Pronoun Resolution:** Replace any pronouns with their corresponding specific named entities so that all references are clear.
- **Output Format:** Your final answer must be a JSON dictionary containing a single key `{"triples"}`, whose value is a list of all the extracted triples.
- **Explicit Relationships:** Only include relationships that are explicitly mentioned in the text."""

_RELATIONS_EXAMPLE_TEXT = "Jack Parsons (born October 2, 1914, Los Angeles, California, U.S.-died June 17, 1952, Pasadena, California) was an American rocket scientist and chemist who made significant contributions to the development of rocket technology and missile systems and was a cofounder of the Jet Propulsion Laboratory (JPL) at the California Institute of Technology (Caltech) and of the Aerojet Engineering Corporation."

_RELATIONS_EXAMPLE_ENTITIES = "Jack Parsons, Los Angeles, Pasadena, Jet Propulsion Laboratory, California Institute of Technology, Aerojet Engineering Corporation"

_RELATIONS_EXAMPLE_REASONING = """Reasoning

1. **Identifying Provided Information:**
- **Input Text:** Reading the paragraph about Jack Parsons; Noting key phrases like "born in," "died in," "cofounder," and the association of JPL with Caltech.
- **Entity List:** Recognize the entities: Jack Parsons, Los Angeles, Pasadena, Jet Propulsion Laboratory, California Institute of Technology, Aerojet Engineering Corporation.

2. **Extracting Explicit Relationships:**
- Locating explicit statements in the text that connect two entities. For example, "Jack Parsons was born in Los Angeles" and "died in Pasadena."
- Identifying that Jack Parsons "co-founded" both the Jet Propulsion Laboratory and the Aerojet Engineering Corporation.
- Noting the phrase linking JPL to Caltech: "Jet Propulsion Laboratory at the California Institute of Technology."

3. **Performing Pronoun Resolution:**
- Ensuring that any pronouns referring to named entities are replaced by their proper names; In this case, no pronoun resolution was required since the entities are explicitly named."""

_RELATIONS_EXAMPLE_OUTPUT = """{
 "triples": [
  ["Jack Parsons", "born in", "Los Angeles"],
  ["Jack Parsons", "died in", "Pasadena"],
  ["Jack Parsons", "co-founded", "Jet Propulsion Laboratory"],
  ["Jack Parsons", "co-founded", "Aerojet Engineering Corporation"],
  ["Jet Propulsion Laboratory", "is located at", "California Institute of Technology"]
 ]
}"""

RELATIONS = Prompt(
    name="sa-rag.relations",
    version=1,
    messages=(
        ChatMessage("system", _literal(_RELATIONS_SYSTEM)),
        ChatMessage(
            "user",
            _literal(f"{_RELATIONS_EXAMPLE_TEXT}\n\nEntity list: {_RELATIONS_EXAMPLE_ENTITIES}"),
        ),
        ChatMessage(
            "assistant",
            _literal(f"{_RELATIONS_EXAMPLE_REASONING}\n\nResponse\n\n{_RELATIONS_EXAMPLE_OUTPUT}"),
        ),
        ChatMessage("user", "{passage}\n\nEntity list: {entities}"),
    ),
    variables=frozenset({"passage", "entities"}),
    description=(
        "Source: SA-RAG paper, Appendix B, Listing 5 (relationship extraction prompt of the "
        "indexing step), with its one-shot demonstration (the Jack Parsons paragraph) as a "
        "user/assistant pair. Variables: passage, the text of one chunk, as plain text; "
        "entities, the names found by sa-rag.ner in that chunk, comma-separated on one line "
        '("A, B, C") as in the demonstration. Output: the demonstration answers with a '
        '"Reasoning" section, then "Response", then the JSON object; the instruction asks '
        'that the final answer be a JSON object {"triples": [["entity1", "relationship", '
        '"entity2"], ...]}. A parser takes the first JSON object in the reply (the reasoning '
        "is prose without brackets); under a structured-output (JSON) mode the reply is the "
        "object alone."
    ),
)


# --- Listing 6: SA-RAG answering -------------------------------------------------------

_SA_ANSWER_SYSTEM = """You are given a multi-hop question and supporting context that describes relevant facts, entities and their relationships. Your task is to use the context to reason through the problem with clear, detailed, and correct step-by-step logic. Pay special attention to quantitative reasoning tasks; Verify every arithmetic calculation and check that the contextual details are interpreted accurately.

Proceed by first outlining all necessary steps to determine the answer, including any calculations or comparisons required. Once you have verified all arithmetic and double-checked key details, provide only a short final answer (which may be a single word, a yes/no, or a short phrase) without additional explanation.

Respond with a JSON object containing two string fields: 'reasoning', which provides your detailed reasoning about the answer, and 'final_answer' where you provide your short final answer without explaining your reasoning."""

_SA_INPUT = (
    "# Input\n\nQuestion: {question}\n\nKnowledge paragraphs:\n{passages}\n\n"
    "Key relationships:\n{relationships}"
)

SA_ANSWER = Prompt(
    name="sa-rag.answer",
    version=1,
    messages=(
        ChatMessage("system", _literal(_SA_ANSWER_SYSTEM)),
        ChatMessage("user", _SA_INPUT),
    ),
    variables=frozenset({"question", "passages", "relationships"}),
    description=(
        "Source: SA-RAG paper, Appendix B, Listing 6 (answering prompt of SA-RAG; section "
        "5.6). The listing's input section is lost in the extraction; the user message is "
        "reconstructed with the same layout as Listing 7's input (question, knowledge "
        "paragraphs, key relationships), which is what the SA-RAG context C = {D_1..D_k1, "
        "r_1..r_k2} holds. Variables: question, the multi-hop question; passages, the "
        f"fetched document chunks, {_PASSAGES_FORMAT}; relationships, "
        f"{_RELATIONSHIPS_FORMAT}. Output: a JSON object "
        '{"reasoning": str, "final_answer": str}; final_answer is a single word, yes/no '
        "or a short phrase."
    ),
)


# --- Listing 7: SA-RAG reasoning (one step of CoT iterative retrieval) -----------------

_SA_REASON_SYSTEM = """You are given a **multi-hop question** that requires combining information across multiple textual paragraphs. Along with the question, you are provided:

1. **Short knowledge paragraphs**, each describing specific entities and facts.
2. A **list of key relationships** between these entities.

## Task description

Your goal is to **understand and reason through the question** using only the information provided.

To achieve this you should:

1. **Identify** only the facts and relationships that are directly relevant to answering the question.
2. **Paraphrase and weave** those facts into one concise, coherent paragraph called 'provided_context'.
  - Write in full sentences.
  - Avoid listing facts one per line.
3. Decide whether you can answer the question with the information in your summary:
  - If **yes**, set "answer_possible": true and put your answer in 'final_answer'.
  - If **no**, set "answer_possible": false and craft a specific follow-up question in 'additional_question' that would help fill the gap in provided information

### Output Format (JSON)

```json
{
 "provided_context": "A single narrative paragraph summarizing all relevant facts.",
 "answer_possible": true | false,
 "final_answer": "Give your answer here if 'answer_possible' is true, otherwise leave this blank.",
 "additional_question": "If 'answer_possible' is false, write a clear and specific follow-up question that would help get the missing information."
}
```"""

SA_REASON = Prompt(
    name="sa-rag.reason",
    version=1,
    messages=(
        ChatMessage("system", _literal(_SA_REASON_SYSTEM)),
        ChatMessage("user", _SA_INPUT),
    ),
    variables=frozenset({"question", "passages", "relationships"}),
    description=(
        "Source: SA-RAG paper, Appendix B, Listing 7 (reasoning prompt of SA-RAG combined "
        "with CoT iterative retrieval). Only the '# Input' heading of the input section "
        "survives; the rest of the user message is reconstructed from the listing's "
        "numbered list of what is provided. Variables: question, the original multi-hop "
        "question; passages, the knowledge paragraphs: the provided_context summaries of "
        "earlier steps and the chunks fetched by spreading activation for the current "
        "query (the paper says they are combined, not how; Quillian puts the summaries "
        f"first), {_PASSAGES_FORMAT}; relationships, {_RELATIONSHIPS_FORMAT}. "
        f"Output: {_REASON_JSON_OUTPUT}."
    ),
)
