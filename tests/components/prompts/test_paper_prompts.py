"""The papers' prompts: variables, strict rendering, verbatim wording, valid demonstrations.

The file is not named test_prompts.py: tests/llm/ already has one, and test modules
without packages must have distinct basenames under pytest's default import mode.
"""

import json

import pytest

from quillian.components.generation.know3_outputs import (
    parse_chain_answer,
    parse_triple_list,
    parse_verdict,
)
from quillian.components.kag.logic_form import parse_plan
from quillian.components.llm.prompts import Prompt
from quillian.components.prompts import ALL_PROMPTS, default_registry
from quillian.errors import ConfigError

# Per prompt: its variables, and phrases copied from the paper that the rendered text must
# hold, so an accidental edit of the transcription fails here.
EXPECTED: dict[str, tuple[set[str], list[str]]] = {
    "sa-rag.baseline-answer": (
        {"question", "passages"},
        [
            "Below is a question followed by some context from different sources.",
            "respond 'Insufficient Information'. Answer directly without explanation.",
            "'final_answer' where you provide your short final answer without explaining",
        ],
    ),
    "sa-rag.cot": (
        {"question", "passages"},
        [
            "each with different pieces of information potentially required for answering",
            "return a **specific follow-up question** that would help fill the gap.",
            '"answer_possible": true | false,',
        ],
    ),
    "sa-rag.decompose": (
        {"question"},
        [
            "You are a decomposition module for a multi-hop question answering system.",
            'If the query says "John Phan," do **not** ask "Who is John Phan?"',
            "Your objective is **faithful, minimal, query-conditioned decomposition**",
            '{"id": 1, "question": "..."},',
        ],
    ),
    "sa-rag.ner": (
        {"passage"},
        [
            "your task is to identify and extract entities from the provided text following",
            '**By any means do not include** information like "birthplace of...",',
            'exactly four keys: "name", "type", "aliases", and "entity_information".',
            "City in the United States, where Nikola Tesla died.",
            "In 1891 he invented the Tesla coil, an induction coil widely used in radio",
        ],
    ),
    "sa-rag.relations": (
        {"passage", "entities"},
        [
            "Your task is to perform relationship extraction by identifying all explicit",
            'must be a JSON dictionary containing a single key `{"triples"}`, whose value',
            "no pronoun resolution was required since the entities are explicitly named.",
            "Entity list: Jack Parsons, Los Angeles, Pasadena, Jet Propulsion Laboratory",
        ],
    ),
    "sa-rag.answer": (
        {"question", "passages", "relationships"},
        [
            "Pay special attention to quantitative reasoning tasks; Verify every arithmetic",
            "(which may be a single word, a yes/no, or a short phrase)",
            "Respond with a JSON object containing two string fields: 'reasoning'",
        ],
    ),
    "sa-rag.reason": (
        {"question", "passages", "relationships"},
        [
            "2. A **list of key relationships** between these entities.",
            "**Paraphrase and weave** those facts into one concise, coherent paragraph",
            '"provided_context": "A single narrative paragraph summarizing all relevant facts."',
        ],
    ),
    "kg-infused.answer-closed": (
        {"question"},
        ["Only give me the answer and do not output any other words.\n\nQuestion: "],
    ),
    "kg-infused.answer": (
        {"question", "passages"},
        [
            "Answer the question based on the given passages. Only give me the answer and",
            "\nAnswer:",
        ],
    ),
    "kg-infused.query-expansion": (
        {"question"},
        [
            "This new query should aim to retrieve additional passages that fill in gaps",
            "Only give me the new short query and do not output any other words.",
            "\n\nNew Query:",
        ],
    ),
    "kg-infused.passage-note": (
        {"question", "passages"},
        [
            "Based on the provided document content, write a note.",
            "includes all original text information useful for answering the question.",
            "Question to be answered:",
        ],
    ),
    "kg-infused.triple-select": (
        {"question", "triples"},
        [
            "select only the triples that are relevant to the question.",
            "1. Each triple is in the form of <subject, predicate, object>.",
            "3. Output triples exactly as they appear in angle brackets (<...>).",
        ],
    ),
    "kg-infused.triple-update": (
        {"question", "selected_triples", "triples"},
        [
            "that expand or enhance the information provided by the previously selected",
            "Do not include duplicates of the previously selected triples or generate new",
            "4. Output triples exactly as they appear in angle brackets (<...>).",
        ],
    ),
    "kg-infused.subgraph-summary": (
        {"question", "selected_triples"},
        [
            "write a summary that captures the key information from the triples.",
            "regardless of their direct relevance to the query, in a concise and informative",
        ],
    ),
    "kg-infused.kg-query-expansion": (
        {"question", "triples_summary"},
        [
            "This new query should leverage both the original question and the provided",
            "Related Paragraph:",
        ],
    ),
    "kg-infused.knowledge-augment": (
        {"question", "passage", "triples_summary"},
        [
            "You are an expert in text enhancement and fact integration.",
            "Preserve the original meaning while making the passage more informative.",
            "Enhanced passage:",
        ],
    ),
    "kg-infused.dpo-judge": (
        {"question", "passage", "triples_summary", "outputs"},
        [
            "Your task is to evaluate and compare the outputs to identify the best and worst",
            "use the same `_id` for both best and worst.",
            '{"best_id": <_id of the highest-quality output>, "worst_id": <_id of the',
        ],
    ),
    "kg-infused.self-ask": (
        {"question", "steps"},
        [
            "Instruction: Answer through sequential questioning. Follow these rules:",
            "1. Generate ONLY ONE new follow-up question per step",
            "Follow up: Who was the mother of George Washington?\nIntermediate answer:",
            "So the final answer is: Joseph Ball",
        ],
    ),
    # Know3-RAG (components/prompts/know3.py): the paper's Figs. 6-10
    "know3.answer": ({"references", "question"}, ["The answer is", "Let's think step by step."]),
    "know3.reference": (
        {"entity_note", "question", "entities"},
        ['You should just output "[reference_paragraph]"'],
    ),
    "know3.query": ({"references", "question", "answer"}, ["Please directly output the new"]),
    "know3.triples": ({"text", "entities"}, ['"subject": "Albert Einstein"', "return None"]),
    "know3.relevance": (
        {"question", "entities", "passage"},
        ["The reliability of the passage is [yes or no]."],
    ),
    "kags.extract": (
        {"context"},
        ['["head", "relationship", "tail", "sentences"]', "Extract all valid triples from this"],
    ),
    "kags.answer": ({"context", "question"}, ["Context:", "Answer:"]),
    "kags.judge-statements": ({"question", "answer"}, ["Statement:"]),
    "kags.judge-verdict": ({"context", "statement"}, ["Verdict: Yes", "Verdict: No"]),
    "kags.judge-question": ({"answer"}, ["Question:"]),
    # KAG (components/prompts/kag.py): rewritten for strict parsing
    "kag.ner": ({"schema", "passage"}, ['[{"name": "...", "category": "...", "type": "..."']),
    "kag.triples": ({"entities", "passage"}, ['{"triples": [["subject", "predicate", "object"]']),
    "kag.std": ({"entities", "passage"}, ['"official_name": "..."']),
    "kag.concepts": ({"types"}, ['"Legislative Body" -> ["Legislative Body"']),
    "kag.query_ner": ({"schema", "question"}, ['[{"name": "...", "category": "..."}]; []']),
    "kag.plan": ({"schema", "question"}, ["Action4: math4 = Math(2027-o3)"]),
    "kag.spo_select": ({"question", "mention", "candidates"}, ["reply [] if none does"]),
    "kag.sub_answer": (
        {"history", "facts", "passages", "question"},
        ["reply exactly: I don't know"],
    ),
    "kag.deduce": ({"op", "memory", "instruction"}, ["reply exactly: No relevant information"]),
    "kag.output": ({"context", "question"}, ["reply exactly: I don't know"]),
    "kag.memory": ({"instruction", "supporting_fact"}, ["End with [DONE]."]),
    "kag.judge": ({"memory", "instruction"}, ["Reply with Yes or No first"]),
    "kag.rewrite": ({"memory", "instruction"}, ["Reply with that question only"]),
    "kag.answer": ({"content", "question", "unknown"}, ['{"thought": "...", "answer": "..."}']),
}

BY_NAME = {p.name: p for p in ALL_PROMPTS}


def _dummies(prompt: Prompt) -> dict[str, str]:
    return {v: f"<<{v.upper()}>>" for v in prompt.variables}


def _text(prompt: Prompt) -> str:
    return "\n".join(m.content for m in prompt.render(**_dummies(prompt)))


def test_every_prompt_is_listed_once_with_a_unique_name():
    names = [p.name for p in ALL_PROMPTS]
    assert len(names) == len(set(names))
    assert set(names) == set(EXPECTED)
    registry = default_registry()
    assert all(registry.get(n) is BY_NAME[n] for n in names)
    # a prompt whose text changed carries a new version (cached replies are not reused)
    changed = {"kag.answer": 2, "kag.ner": 2}
    assert all(p.version == changed.get(p.name, 1) for p in ALL_PROMPTS)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_renders_with_exactly_its_variables(name):
    prompt = BY_NAME[name]
    assert prompt.variables == EXPECTED[name][0]
    values = _dummies(prompt)
    rendered = prompt.render(**values)
    assert [m.role for m in rendered] == [m.role for m in prompt.messages]
    text = "\n".join(m.content for m in rendered)
    for value in values.values():
        assert value in text
    assert rendered[-1].role == "user"
    for missing in prompt.variables:
        partial = {k: v for k, v in values.items() if k != missing}
        with pytest.raises(ConfigError, match=f"missing variables \\['{missing}'\\]"):
            prompt.render(**partial)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_rendered_text_keeps_the_papers_wording(name):
    text = _text(BY_NAME[name])
    for phrase in EXPECTED[name][1]:
        assert phrase in text


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_description_names_source_variables_and_output(name):
    description = BY_NAME[name].description
    assert "Source:" in description and "Output" in description
    assert any(where in description for where in ("Listing", "Table", "Fig.", "eq."))
    for variable in EXPECTED[name][0]:
        assert variable in description


def _demonstrations(name: str) -> list[object]:
    """The JSON of each few-shot assistant message (after the 'Response' heading if any)."""
    prompt = BY_NAME[name]
    values = []
    for message in prompt.render(**_dummies(prompt)):
        if message.role == "assistant":
            values.append(json.loads(message.content.rpartition("Response\n\n")[2]))
    return values


def test_json_demonstrations_are_valid_and_shaped_like_the_output_format():
    with_demos = [p.name for p in ALL_PROMPTS if any(m.role == "assistant" for m in p.messages)]
    assert [n for n in with_demos if not n.startswith(("kag.", "know3."))] == [
        "sa-rag.decompose",
        "sa-rag.ner",
        "sa-rag.relations",
        "kags.extract",
    ]
    (entities,) = _demonstrations("sa-rag.ner")
    assert isinstance(entities, list) and len(entities) == 8
    for entity in entities:
        assert set(entity) == {"name", "type", "aliases", "entity_information"}
        assert entity["type"] in {"PERSON", "ORGANIZATION", "GPE", "MISC"}
    assert {"name": "United States", "type": "GPE", "aliases": ["U.S."]}.items() <= entities[
        5
    ].items()
    (relations,) = _demonstrations("sa-rag.relations")
    assert list(relations) == ["triples"] and len(relations["triples"]) == 5
    assert all(len(t) == 3 and all(isinstance(x, str) for x in t) for t in relations["triples"])
    (decomposition,) = _demonstrations("sa-rag.decompose")
    assert [s["id"] for s in decomposition["subquestions"]] == [1, 2]
    assert decomposition["original_question"].startswith("The Argentine PGA Championship")


def test_know3_demonstrations_parse_as_their_replies_are_read():
    def replies(name: str) -> list[str]:
        return [m.content for m in BY_NAME[name].messages if m.role == "assistant"]

    answers = [parse_chain_answer(r).answer for r in replies("know3.answer")]
    assert answers == ["Arnold Spielberg", "no", "1746"]
    assert [parse_verdict(r) for r in replies("know3.relevance")] == [True, False, False, True]
    found, none = (
        parse_triple_list(r.replace("{{", "{").replace("}}", "}")) for r in replies("know3.triples")
    )
    assert [t.object for t in found.triples] == ["Ulm", "Germany"] and none.triples == ()


def test_kag_plan_demonstration_is_a_valid_plan():
    demo = next(m.content for m in BY_NAME["kag.plan"].messages if m.role == "assistant")
    plan = parse_plan(demo)
    assert plan.ok and len(plan.steps) == 6


def test_registries_are_independent_and_accept_overrides(tmp_path):
    override = {
        "name": "kg-infused.answer-closed",
        "version": 2,
        "variables": ["question"],
        "messages": [{"role": "user", "content": "Q: {question}\nA:"}],
    }
    (tmp_path / "override.json").write_text(json.dumps(override))
    registry = default_registry()
    registry.override_from_file(tmp_path / "override.json")
    assert registry.get("kg-infused.answer-closed").key == "kg-infused.answer-closed@2"
    assert default_registry().get("kg-infused.answer-closed").key == "kg-infused.answer-closed@1"
