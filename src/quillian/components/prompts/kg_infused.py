# Prompt text is data copied from the paper, one paper line per source line: long lines stay.
# ruff: noqa: E501
"""The KG-Infused RAG paper's prompts (Appendix E, Tables 9-19).

Each table is one template: an instruction, the input fields and a trailing cue
("Answer:", "New Query:", "Note:", ...). Each becomes a single user message. Transcribed
from a text extraction of the paper; what it garbled or lost, and how it was rebuilt:

* "Instructions" and "Few-shot demonstrations" are the labels of the paper's framed boxes,
  not prompt text (Table 19's box reads "Instructions" and then "Instruction: Answer
  through sequential questioning"), so they are left out. Tables 9 and 10 show a dashed
  line ("-----") between the instruction and the input; it is taken for the box's rule,
  which the plain-text extraction of Tables 11-17 drops, and left out too.
* Tables 9 and 10 were extracted as HTML paragraphs, which lose line breaks; their
  layout ("Passages: {passages}", "Question: {question}" then "Answer:" on its own line)
  is a reconstruction.
* Placeholders are renamed where the paper uses different names for the same thing:
  Table 14's {previous_selected_triples} is ``selected_triples`` (Table 15's name for the
  accumulated selection) and its {new_retrieved_triples} is ``triples`` (Table 13's name
  for the candidates); Table 18's {facts} is ``triples_summary`` (Tables 16-17's name for
  the subgraph summary, which Table 18 itself calls "relevant factual information
  (triples summary)"); Table 18's garbled {output } is ``outputs``.
* Table 18's output format reads ``json {{"best_id": ...}}``: the doubled braces are the
  paper's own template escaping, kept; the word "json" is read as a ```json fence.
* Table 19's fourth demonstration has "Follow up" and "Intermediate answer" on one line
  in the extraction; they are split as in the other demonstrations. Its demonstrations
  stay inline rather than becoming chat pairs: Self-Ask is a continuation prompt, and the
  loop re-renders it with the growing transcript in ``steps`` (not in the paper's
  template, which ends at "Question: {question}"; Appendix G says each step is generated
  "based on few-shot demonstrations and the previous reasoning process").
* Typographic apostrophes are written as ASCII ones, en-dash bullets as hyphens.
"""

from __future__ import annotations

from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt

__all__ = [
    "ANSWER",
    "ANSWER_CLOSED",
    "DPO_JUDGE",
    "KG_QUERY_EXPANSION",
    "KNOWLEDGE_AUGMENT",
    "PASSAGE_NOTE",
    "QUERY_EXPANSION",
    "SELF_ASK",
    "SUBGRAPH_SUMMARY",
    "TRIPLE_SELECT",
    "TRIPLE_UPDATE",
]

_PASSAGES_FORMAT = (
    "numbered in rank order and separated by a blank line, "
    '"[1] title: text" (the paper does not show the layout; this is Quillian\'s convention)'
)
_TRIPLES_FORMAT = (
    'one triple per line in angle brackets, "<subject | predicate | object>", as the '
    "paper's case study (Table 24) prints them (the prompt itself calls the form "
    "<subject, predicate, object>)"
)
_SELECTED_OUTPUT = (
    "the selected triples copied exactly from the given set, in angle brackets, one per "
    "line; a parser collects every <...> span and keeps those equal to a given triple "
    "(anything else is invented and dropped); no selection is a valid answer"
)
_SHORT_ANSWER = "the bare answer as free text, no other words"


def _user(template: str) -> tuple[ChatMessage, ...]:
    return (ChatMessage("user", template),)


ANSWER_CLOSED = Prompt(
    name="kg-infused.answer-closed",
    version=1,
    messages=_user(
        """Only give me the answer and do not output any other words.

Question: {question}
Answer:"""
    ),
    variables=frozenset({"question"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 9 (answer generation without "
        "retrieval; the No-Retrieval baseline). Variables: question, the question as plain "
        f"text. Output: {_SHORT_ANSWER}."
    ),
)

ANSWER = Prompt(
    name="kg-infused.answer",
    version=1,
    messages=_user(
        """Answer the question based on the given passages. Only give me the answer and do not output any other words.

Passages: {passages}

Question: {question}
Answer:"""
    ),
    variables=frozenset({"passages", "question"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 10 (answer generation with "
        "retrieval; eq. 10). Variables: question, the question as plain text; passages, "
        "what the answer is grounded in: the fact-enhanced note (output of "
        "kg-infused.knowledge-augment) in KG-Infused RAG, the passage note "
        "(kg-infused.passage-note) in the Vanilla RAG and Vanilla QE baselines, as plain "
        f"text; or raw passages, {_PASSAGES_FORMAT}. Output: {_SHORT_ANSWER}."
    ),
)

QUERY_EXPANSION = Prompt(
    name="kg-infused.query-expansion",
    version=1,
    messages=_user(
        """Generate a new short query that is distinct from but closely related to the original question. This new query should aim to retrieve additional passages that fill in gaps or provide complementary knowledge necessary to thoroughly address the original question. Ensure the new query is relevant, precise, and broadens the scope of information tied to the original question. Only give me the new short query and do not output any other words.

Original Question:
{question}

New Query:"""
    ),
    variables=frozenset({"question"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 11 (vanilla query expansion; the "
        "Vanilla QE baseline). Variables: question, the original question as plain text. "
        "Output: one new short query as free text (take the first non-empty line, strip "
        "whitespace)."
    ),
)

PASSAGE_NOTE = Prompt(
    name="kg-infused.passage-note",
    version=1,
    messages=_user(
        """Based on the provided document content, write a note. The note should integrate all relevant information from the original text that can help answer the specified question and form a coherent paragraph. Please ensure that the note includes all original text information useful for answering the question.

Question to be answered:
{question}

Document content:
{passages}

Note:"""
    ),
    variables=frozenset({"question", "passages"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 12 (passage note construction; "
        "eq. 8; also used by the Vanilla RAG and Vanilla QE baselines). Variables: "
        "question, the original question as plain text; passages, the passages retrieved "
        f"by the original and the expanded query (merged, eq. 7), {_PASSAGES_FORMAT}. "
        "Output: the note, one coherent paragraph of free text."
    ),
)

TRIPLE_SELECT = Prompt(
    name="kg-infused.triple-select",
    version=1,
    messages=_user(
        """Given a question and a set of retrieved entity triples, select only the triples that are relevant to the question.

Information:
1. Each triple is in the form of <subject, predicate, object>.
2. The objects in the selected triples will be further explored in the next steps to gather additional relevant triples information.

Rules:
1. Only select triples from the retrieved set. Do not generate new triples.
2. A triple is relevant if it contains information about entities or relationships that are important for answering the question, either directly or indirectly.
 - For example, if the question asks about a specific person, include triples about that person's name, occupation, relationships, etc.
 - If the question asks about an event or entity, include related background information that can help answer the question.
3. Output triples exactly as they appear in angle brackets (<...>).

Question:
{question}

Retrieved Entity Triples:
{triples}

Selected Triples:"""
    ),
    variables=frozenset({"question", "triples"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 13 (triple selection, first round "
        "of KG-guided spreading activation). Variables: question, the original question as "
        "plain text; triples, the 1-hop triples of the seed entities, "
        f"{_TRIPLES_FORMAT}. Output: {_SELECTED_OUTPUT}."
    ),
)

TRIPLE_UPDATE = Prompt(
    name="kg-infused.triple-update",
    version=1,
    messages=_user(
        """Given a question, a set of previously selected entity triples that are relevant to the question, and a new set of retrieved entity triples, select only the triples from the new set of retrieved entity triples that expand or enhance the information provided by the previously selected triples to help address the question.

Information:
1. Each triple is in the form of <subject, predicate, object>.
2. The objects in the selected triples will be further explored in the next steps to gather additional relevant triples information.

Rules:
1. Only select triples from the new set of retrieved entity triples. Do not include duplicates of the previously selected triples or generate new triples.
2. A triple is considered relevant if it:
- Provides new information that complements or builds upon the entities, relationships, or concepts in the previously selected triples, and
- Helps to better address or provide context for answering the question.
3. Do not include triples that are unrelated to the question or do not expand on the previously selected triples.
4. Output triples exactly as they appear in angle brackets (<...>).

Question:
{question}

Previously Selected Triples:
{selected_triples}

New Retrieved Entity Triples:
{triples}

Selected Triples:"""
    ),
    variables=frozenset({"question", "selected_triples", "triples"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 14 (triple update, activation "
        "rounds after the first). Placeholders renamed from the paper's "
        "{previous_selected_triples} and {new_retrieved_triples}. Variables: question, the "
        "original question as plain text; selected_triples, the triples selected so far "
        "(the activation memory's subgraph); triples, the 1-hop triples of this round's "
        f"newly activated entities; both {_TRIPLES_FORMAT}. Output: {_SELECTED_OUTPUT}."
    ),
)

SUBGRAPH_SUMMARY = Prompt(
    name="kg-infused.subgraph-summary",
    version=1,
    messages=_user(
        """Given a question and a set of retrieved entity triples, write a summary that captures the key information from the triples. If the triples do not provide enough information to directly answer the question, still summarize the information provided in the triples, even if it does not directly relate to the question. Focus on presenting all available details, regardless of their direct relevance to the query, in a concise and informative way.

Question:
{question}

Selected Triples:
{selected_triples}

Summary:"""
    ),
    variables=frozenset({"question", "selected_triples"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 15 (triples (subgraph) summary; "
        "expanded subgraph summarisation, section 3.3). Variables: question, the original "
        "question as plain text; selected_triples, every triple accumulated in the "
        f"activation memory, {_TRIPLES_FORMAT}. Output: the summary as free text; it is "
        "the triples_summary of kg-infused.kg-query-expansion and "
        "kg-infused.knowledge-augment."
    ),
)

KG_QUERY_EXPANSION = Prompt(
    name="kg-infused.kg-query-expansion",
    version=1,
    messages=_user(
        """Generate a new short query that is distinct from but closely related to the original question. This new query should leverage both the original question and the provided paragraph to retrieve additional passages that fill in gaps or provide complementary knowledge necessary to thoroughly address the original question. Ensure the new query is relevant, precise, and broadens the scope of information tied to the original question. Only give me the new short query and do not output any other words.

Original Question:
{question}

Related Paragraph:
{triples_summary}

New Query:"""
    ),
    variables=frozenset({"question", "triples_summary"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 16 (KG-based query expansion; "
        "eq. 6). Variables: question, the original question as plain text; "
        "triples_summary, the subgraph summary from kg-infused.subgraph-summary, as plain "
        "text. Output: one new short query as free text (take the first non-empty line, "
        "strip whitespace)."
    ),
)

KNOWLEDGE_AUGMENT = Prompt(
    name="kg-infused.knowledge-augment",
    version=1,
    messages=_user(
        """You are an expert in text enhancement and fact integration. Given a question, a retrieved passage, and relevant factual information, your task is to improve the passage by seamlessly incorporating useful details from the factual information. Ensure that the enhanced passage remains coherent, well-structured, and directly relevant to answering the question. Preserve the original meaning while making the passage more informative. Avoid introducing unrelated content.

Question:
{question}

Retrieved Passage:
{passage}

Relevant Factual Information:
{triples_summary}

Enhanced passage:"""
    ),
    variables=frozenset({"question", "passage", "triples_summary"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.1, Table 17 (KG-guided knowledge "
        "augmentation; eq. 9; the step trained with DPO). Variables: question, the "
        "original question as plain text; passage, the passage note from "
        "kg-infused.passage-note in the main pipeline (or one retrieved passage, as in the "
        "Self-RAG plug-in, Appendix G), as plain text; triples_summary, the subgraph "
        "summary from kg-infused.subgraph-summary, as plain text. Output: the enhanced "
        "passage (the fact-enhanced note) as free text; models may prepend a comment, which "
        "Table 18's rule 1 tells the judge to ignore."
    ),
)

DPO_JUDGE = Prompt(
    name="kg-infused.dpo-judge",
    version=1,
    messages=_user(
        """Task: You will receive a list of enhanced passage outputs generated based on a given question, a retrieved passage, and relevant factual information (triples summary).
Your task is to evaluate and compare the outputs to identify the best and worst ones.

Rules:

1. Focus only on the final enhanced passage. Ignore any prefatory comments, explanations, or formatting differences that do not affect content.
2. The quality of an enhanced passage is determined by:
 - Integration: How well the factual information has been integrated into the passage.
 - Coherence: The passage should be logically structured, readable, and maintain a natural flow.
 - Relevance: The enhanced passage should directly support answering the question.
 - Accuracy: Factual information should be incorporated correctly without hallucination or distortion.
 - Preservation: The original passage's meaning should be preserved and enhanced, not changed incorrectly.
3. If two outputs have substantially the same informational content (even if wording differs slightly), they are considered of equal quality.
4. If all outputs are of similar quality, or if no significant difference can be determined, use the same `_id` for both best and worst.

Input:
Question:
{question}

Retrieved Passage:
{passage}

Relevant Factual Information:
{triples_summary}

Enhanced Passage Outputs:
{outputs}

Output format:

Output the result as a JSON object:
```json
{{"best_id": <_id of the highest-quality output>, "worst_id": <_id of the lowest-quality output>}}
```

Important:
Do not include any explanations, just the JSON output."""
    ),
    variables=frozenset({"question", "passage", "triples_summary", "outputs"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.2, Table 18 (judge that picks the best and "
        "worst knowledge-augmentation outputs for DPO data; GPT-4o-mini in the paper). "
        "Placeholders renamed from the paper's {facts} and {output }. Variables: question, "
        "passage and triples_summary, exactly what kg-infused.knowledge-augment was given; "
        "outputs, the candidate enhanced passages (six in the paper) as a JSON array of "
        'objects {"_id": int, "output": str} with _id 0..n-1 (the paper names the _id key '
        "but does not show the layout; this is Quillian's convention). Output: a JSON "
        'object {"best_id": int, "worst_id": int} holding _id values; best_id == worst_id '
        "means no clear difference (the paper filters out such ambiguous judgments before "
        "building DPO pairs, Appendix F)."
    ),
)

SELF_ASK = Prompt(
    name="kg-infused.self-ask",
    version=1,
    messages=_user(
        """Instruction: Answer through sequential questioning. Follow these rules:
1. Generate ONLY ONE new follow-up question per step
2. Each follow-up MUST use information from previous answers
3. NEVER repeat any form of follow-up question
4. When sufficient data is collected, give the final answer.
Format Template:
Follow up: [New specific question based on last answer]
Intermediate answer: [Concise fact from response] ... (repeat until conclusion)
So the final answer is: [Answer of the Original Question, only give me the answer and do not output any other words.]

Question: Who lived longer, Muhammad Ali or Alan Turing?
Are follow up questions needed here: Yes.
Follow up: How old was Muhammad Ali when he died?
Intermediate answer: Muhammad Ali was 74 years old when he died.
Follow up: How old was Alan Turing when he died?
Intermediate answer: Alan Turing was 41 years old when he died.
So the final answer is: Muhammad Ali
Question: When was the founder of craigslist born?
Are follow up questions needed here: Yes.
Follow up: Who was the founder of craigslist?
Intermediate answer: Craigslist was founded by Craig Newmark.
Follow up: When was Craig Newmark born?
Intermediate answer: Craig Newmark was born on December 6, 1952.
So the final answer is: December 6, 1952
Question: Are both the directors of Jaws and Casino Royale from the same country?
Are follow up questions needed here: Yes.
Follow up: Who is the director of Jaws?
Intermediate answer: The director of Jaws is Steven Spielberg.
Follow up: Where is Steven Spielberg from?
Intermediate answer: The United States.
Follow up: Who is the director of Casino Royale?
Intermediate answer: The director of Casino Royale is Martin Campbell.
Follow up: Where is Martin Campbell from?
Intermediate answer: New Zealand.
So the final answer is: No
Question: Who was the maternal grandfather of George Washington?
Are follow up questions needed here: Yes.
Follow up: Who was the mother of George Washington?
Intermediate answer: The mother of George Washington was Mary Ball Washington.
Follow up: Who was the father of Mary Ball Washington?
Intermediate answer: The father of Mary Ball Washington was Joseph Ball.
So the final answer is: Joseph Ball

Question: {question}
{steps}"""
    ),
    variables=frozenset({"question", "steps"}),
    description=(
        "Source: KG-Infused RAG paper, Appendix E.3, Table 19 (its Self-Ask baseline and "
        "plug-in, Appendix G: the original Self-Ask demonstrations under an added "
        "instruction, hence the kg-infused prefix). The four demonstrations stay inline: "
        "the model continues the transcript. Variables: question, the question as plain "
        "text; steps, the transcript so far, empty on the first call ('steps' is not in "
        "the paper's template; see the module docstring). Output and loop: the model "
        'continues with "Are follow up questions needed here: Yes." and "Follow up: <sub-'
        'question>" lines; generation stops at "Intermediate answer:" (use it as a stop '
        "sequence, or cut the reply there). The caller answers the last follow-up from "
        "retrieved passages (kg-infused.answer, or KG-based QE then knowledge augmentation "
        'in the plug-in), appends the reply up to the cut plus "Intermediate answer: '
        '<answer>\\n" to steps, and calls again. The answer is the text after "So the final '
        'answer is:" on that line; a reply holding it ends the loop.'
    ),
)
