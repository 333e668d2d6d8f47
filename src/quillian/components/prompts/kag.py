# Prompt text is data: long lines stay.
"""KAG's prompts (paper sections 2.2 to 2.4, Appendix B; the authors' prompt catalogue,
spec section 6), rewritten for strict parsing.

The authors' prompts are long pseudo-JSON documents in Chinese and English; these keep
their inputs, instructions and output formats (P18/P19/P5 for the builder, P1 for the
planner, P2 for SPO selection, P3 for sub-answers, P11 for Deduce, P7/P8/P9 for the
memory and reflection, P14 for the final answer, P16 for Output) and ask for JSON
wherever the parser needs structure. The planner's few-shot example is the paper's
Table 13/14 material in the paper's own dialect.
"""

from __future__ import annotations

from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt

__all__ = [
    "ANSWER",
    "CONCEPTS",
    "DEDUCE",
    "JUDGE",
    "MEMORY",
    "NER",
    "OUTPUT",
    "PLAN",
    "PROMPTS",
    "QUERY_NER",
    "REWRITE",
    "SPO_SELECT",
    "STD",
    "SUB_ANSWER",
    "TRIPLES",
    "UNKNOWN_CLAUSE",
]


_SOURCE = (
    "Source: KAG (arXiv 2409.13731) and the authors' prompt catalogue (spec section 6 Table), "
)


def _describe(description: str, variables: set[str]) -> str:
    return f"{_SOURCE}{description} Variables: {', '.join(sorted(variables))}."


def _prompt(
    name: str, system: str, user: str, variables: set[str], description: str, version: int = 1
) -> Prompt:
    return Prompt(
        name,
        version,
        (ChatMessage("system", system), ChatMessage("user", user)),
        frozenset(variables),
        _describe(description, variables),
    )


NER = _prompt(
    "kag.ner",
    "You are an expert in named entity recognition. Extract every entity of the passage. "
    "For each entity give its name as written, its category (exactly one of the schema "
    'classes), its fine-grained semantic type (for example "Legislative Body"), and a '
    "short description of it from the passage and your own knowledge. Reply with only a JSON "
    'list: [{{"name": "...", "category": "...", "type": "...", "description": "..."}}].',
    "Schema classes (pick the one whose description fits):\n{schema}\n\nPassage:\n{passage}",
    {"schema", "passage"},
    "P18 (builder default_ner). schema: one line per entity class, '- Class: its "
    "description' (Schema.describe); passage: title, newline, text. Output: a JSON list "
    "of {name, category, type, description}. Version 2: the classes with their "
    "descriptions (version 1 listed their names only).",
    version=2,
)

TRIPLES = _prompt(
    "kag.triples",
    "You are an expert in knowledge-graph construction. From the passage, extract "
    "(subject, predicate, object) triples. Every triple must name at least one entity of "
    "the entity list, preferably two; resolve pronouns to the names they refer to. Reply "
    'with only a JSON object: {{"triples": [["subject", "predicate", "object"], ...]}}.',
    "Entity list: {entities}\n\nPassage:\n{passage}",
    {"entities", "passage"},
    "P19 (builder default_triple). entities: JSON list of {name, category}. Output: "
    '{"triples": [[s, p, o], ...]}.',
)

STD = _prompt(
    "kag.std",
    "You standardise entity names. For each named entity of the passage give its "
    "official (full, canonical) name, one name per meaning. Reply with only a JSON list: "
    '[{{"name": "...", "category": "...", "official_name": "..."}}].',
    "Named entities: {entities}\n\nPassage:\n{passage}",
    {"entities", "passage"},
    "P5 (builder default_std). entities: JSON list of {name, category}. Output: a JSON "
    "list of {name, category, official_name}.",
)

CONCEPTS = _prompt(
    "kag.concepts",
    "You complete a concept hierarchy. For each semantic type, give its chain of "
    "hypernyms from the type itself up to the given coarse class, most specific first "
    '(for example "Legislative Body" -> ["Legislative Body", "Government Agency", '
    '"Organization"]). Reply with only a JSON object mapping each type to its chain.',
    "Semantic types with their classes:\n{types}",
    {"types"},
    "Knowledge alignment, concept completion (paper section 2.4.1, Algorithm A1 step 3). "
    "types: one '<semantic type> (class <Class>)' per line. Output: JSON {type: [chain]}.",
)

QUERY_NER = _prompt(
    "kag.query_ner",
    "You are an expert in named entity recognition. List the entities the question "
    "mentions (people, organisations, places, works, events, dates and other named "
    "things), each with its name as written and its category (exactly one of the schema "
    'classes). Reply with only a JSON list: [{{"name": "...", "category": "..."}}]; [] '
    "when it names none.",
    "Schema classes: {schema}\n\nQuestion: {question}",
    {"schema", "question"},
    "P20 (solver question_ner): the entities of a question or sub-question, which seed "
    "the chunk retriever's PageRank. schema: the entity classes, comma-separated. "
    "Output: a JSON list of {name, category}.",
)

PLAN = Prompt(
    "kag.plan",
    1,
    (
        ChatMessage(
            "system",
            "You are a planning expert. Break the question into atomic steps. Each step is "
            "a line 'StepN: <sub-question>' followed by a line 'ActionN: <logical form>', "
            "one action per step. Logical forms:\n"
            "- Retrieval(s=s1:Type[name], p=p1:relation, o=o1:Type[name], s.prop=value): "
            "retrieve (subject, predicate, object) triples; name a variable's type and "
            "name only when it first appears, afterwards write only its alias (s=o1).\n"
            "- Sort(set=o1, orderby=o2, direction=min|max, limit=n): order a retrieved set.\n"
            "- name = Math(expression): arithmetic over numbers and aliases with + - * / "
            "** and count(), sum(), min(), max(), round().\n"
            "- Deduce(left=A, right=B, op=entailment|judgement|greater|less|equal|choice): "
            "reason over aliases or text.\n"
            "- Output(A, B): the aliases that answer the question.\n"
            "Entity classes: {schema}. Write the steps and actions only, no markdown.",
        ),
        ChatMessage(
            "user",
            "Question: What is the sum of 30 + 6 and the age of the founder of Tesla in 2027?",
        ),
        ChatMessage(
            "assistant",
            "Step1: What is 30 + 6?\nAction1: math1 = Math(30+6)\n"
            "Step2: Who founded Tesla?\nAction2: Retrieval(s=s2:Organization[Tesla], "
            "p=p2:founder, o=o2:Person)\n"
            "Step3: In which year was the founder born?\nAction3: Retrieval(s=o2, "
            "p=p3:yearOfBirth, o=o3:Date)\n"
            "Step4: How old is the founder in 2027?\nAction4: math4 = Math(2027-o3)\n"
            "Step5: What is the sum?\nAction5: math5 = Math(math1+math4)\n"
            "Step6: Output the sum.\nAction6: Output(math5)",
        ),
        ChatMessage("user", "Question: {question}"),
    ),
    frozenset({"schema", "question"}),
    _describe(
        "P1 (logic_form_plan / default_lf_static_planning), in the paper's dialect (Table 1); "
        "the few-shot plan is the paper's Table 14 arithmetic example. Output: StepN/ActionN "
        "lines, parsed by components/kag/logic_form.py.",
        {"schema", "question"},
    ),
)

SPO_SELECT = _prompt(
    "kag.spo_select",
    "You match a question to knowledge-graph facts. Given the question, the pattern it "
    "asks about and numbered candidate facts, reply with only a JSON list of the numbers "
    "of the facts that answer it, for example [0, 3]; reply [] if none does.",
    "Question: {question}\nPattern: {mention}\nCandidates:\n{candidates}",
    {"question", "mention", "candidates"},
    "P2 (spo_retrieval, HEAD form): candidates are numbered 'i: subject predicate object' "
    "lines. Output: a JSON list of candidate numbers.",
)

SUB_ANSWER = _prompt(
    "kag.sub_answer",
    "Answer the question from the knowledge-graph facts and the passages given, and the "
    "answers to the earlier steps. Answer directly and briefly, give every answer if "
    "there are several, and do not repeat the question. If they do not hold the answer, "
    "reply exactly: I don't know.",
    "Earlier steps:\n{history}\n\nFacts:\n{facts}\n\nPassages:\n{passages}\n\nQuestion: {question}",
    {"history", "facts", "passages", "question"},
    "P3 (solve_question and its without_docs/without_spo forms in one). history: "
    "'queryN: ...\\nanswerN: ...' lines; facts: one SPO per line; passages: "
    "'Title: text' paragraphs. Output: free text, 'I don't know' when unanswerable.",
)

DEDUCE = _prompt(
    "kag.deduce",
    "You reason over given information. Operation: {op}. entailment: say what follows "
    "from the information about the target; judgement: answer yes or no with the "
    "reason; greater/less/equal: compare the two values; choice: pick the option the "
    "information supports; extract: extract what the target asks for. If the information "
    "is not enough, reply exactly: No relevant information.",
    "Information:\n{memory}\n\nTarget: {instruction}",
    {"op", "memory", "instruction"},
    "P11 (deduce_entail/judge/choice/multi_choice/extractor in one). Output: free text; "
    "'No relevant information' means not answered.",
)

OUTPUT = _prompt(
    "kag.output",
    "Answer the question from the results of the steps taken so far. Answer briefly; if "
    "they do not answer it, reply exactly: I don't know.",
    "Steps:\n{context}\n\nQuestion: {question}",
    {"context", "question"},
    "P16 (output_question), for an Output whose aliases hold no values.",
)

MEMORY = _prompt(
    "kag.memory",
    "Write a short passage, from the supporting facts only, that helps answer the "
    "question: what the facts say about it, and what they leave open. End with [DONE].",
    "Question: {instruction}\n\nSupporting facts:\n{supporting_fact}",
    {"instruction", "supporting_fact"},
    "P7 (resp_extractor): the evidence memory of one round. Output: text ending [DONE].",
)

JUDGE = _prompt(
    "kag.judge",
    "Decide whether the memory answers the question. Reply with Yes or No first, then "
    "the reason in one sentence.",
    "Memory:\n{memory}\n\nQuestion: {instruction}",
    {"memory", "instruction"},
    "P8 (resp_judge). Output: starts with Yes or No.",
)

REWRITE = _prompt(
    "kag.rewrite",
    "The memory does not answer the question yet. Write the one question whose answer "
    "is still missing, to be looked up next. Reply with that question only, on one line.",
    "Memory:\n{memory}\n\nQuestion: {instruction}",
    {"memory", "instruction"},
    "P9 (resp_reflector, SupplyQuery in Algorithm 1). Output: one question (first non-empty line).",
)

#: P14's clause that lets the final answer be "UNKNOWN" (its ``unknown`` variable).
UNKNOWN_CLAUSE = ', or "UNKNOWN" if it cannot be found'

ANSWER = _prompt(
    "kag.answer",
    "Answer the question from the documents and the step-by-step analysis. Give a short "
    "answer taken from the documents where possible (a name, a date in full, a number)"
    '{unknown}. Reply with only a JSON object: {{"thought": "...", "answer": "..."}}.',
    "{content}\n\nQuestion: {question}",
    {"content", "question", "unknown"},
    "P14 (default_multi_hop_generator): content is 'Docs:' with 'Title:...' paragraphs, "
    "then 'Step by Step Analysis:' with each step's question and result, then the memory; "
    'unknown is UNKNOWN_CLAUSE (P14\'s option to answer "UNKNOWN"), or empty when the '
    "judge (P8) found that the memory answers the question (version 2; version 1 always "
    "held the clause). Output: JSON {thought, answer}.",
    version=2,
)

PROMPTS: tuple[Prompt, ...] = (
    NER,
    TRIPLES,
    STD,
    CONCEPTS,
    QUERY_NER,
    PLAN,
    SPO_SELECT,
    SUB_ANSWER,
    DEDUCE,
    OUTPUT,
    MEMORY,
    JUDGE,
    REWRITE,
    ANSWER,
)
