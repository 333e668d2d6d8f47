"""KG-Infused RAG on an eight-entity graph (the paper's Table 24 case) with a scripted
model: activation rounds, caps and memory, dual retrieval, ablations, invented triples,
the Self-Ask and CoT plug-ins, DPO preference rows, and the pipeline over an index's
document graph."""

import asyncio
import json

import pytest

from quillian.components.factories import make_retriever
from quillian.components.kg.document_graph import DocumentGraph
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.components.retrieval.base import RetrievalResult, ScoredPassage
from quillian.errors import ConfigError, MissingExtraError
from quillian.methods.kg_infused.dpo import (
    DPO_DECODINGS,
    PreferenceSampler,
    ka_inputs,
    write_dpo_jsonl,
)
from quillian.methods.kg_infused.dpo_train import (
    DPOTrainConfig,
    load_preference_rows,
    trainer_arguments,
)
from quillian.methods.kg_infused.pipeline import (
    KGInfusedConfig,
    KGInfusedRAG,
    next_round_entities,
)
from quillian.methods.kg_infused.plugins import CoTKGConfig, CoTRAGKG, SelfAskKG, SelfAskKGConfig
from quillian.methods.steps import KGRound, KGSeeds
from quillian.testing.corpus import LOVELACE, tiny_index
from quillian.testing.kg import MemoryGraph

QUESTION = "Which company followed the company that made AAM-N-4 Oriole?"
ENTITIES = {
    "AAM-N-4 Oriole": "AAM-N-4 Oriole early air-to-air missile",
    "Martin Company": "Martin Company American aircraft manufacturer",
    "Martin Marietta": "aerospace corporation",
    "Air-to-air missile": "missile fired from an aircraft",
    "United States Navy": "naval service branch",
    "Lockheed Martin": "defense contractor",
    "Baltimore": "city in Maryland",
    "Glenn L. Martin": "aviation pioneer",
}
TRIPLES = [
    ("AAM-N-4 Oriole", "manufacturer", "Martin Company"),
    ("AAM-N-4 Oriole", "instance of", "Air-to-air missile"),
    ("AAM-N-4 Oriole", "operator", "United States Navy"),
    ("Martin Company", "followed by", "Martin Marietta"),
    ("Martin Company", "headquarters location", "Baltimore"),
    ("Martin Company", "founded by", "Glenn L. Martin"),
    ("Martin Company", "product", "AAM-N-4 Oriole"),
    ("Martin Marietta", "followed by", "Lockheed Martin"),
]
MADE = "<AAM-N-4 Oriole | manufacturer | Martin Company>"
KIND = "<AAM-N-4 Oriole | instance of | Air-to-air missile>"
OPERATOR = "<AAM-N-4 Oriole | operator | United States Navy>"
FOLLOWED = "<Martin Company | followed by | Martin Marietta>"
PRODUCT = "<Martin Company | product | AAM-N-4 Oriole>"
INVENTED = "<AAM-N-4 Oriole | made of | unobtainium>"


def last_user(messages):
    return next(m.content for m in reversed(messages) if m.role == "user")


def new_triples(messages):
    """The candidate section of Table 13 or 14 (not Table 14's previous selection)."""
    return last_user(messages).split("Retrieved Entity Triples:")[-1]


def selector(*wanted, extra=""):
    """Selects the wanted triples that are among the candidates, plus ``extra``."""

    def select(messages):
        picks = [t for t in wanted if t in new_triples(messages)]
        return "\n".join(picks + ([extra] if extra and picks else [])) or "None"

    return select


def routes(select=None, **overrides):
    base = {
        "kg-infused.triple-select": select or selector(MADE, OPERATOR, extra=INVENTED),
        "kg-infused.triple-update": select or selector(FOLLOWED, PRODUCT),
        "kg-infused.subgraph-summary": "Summary: Martin Marietta followed the Martin Company.",
        "kg-infused.kg-query-expansion": "New Query: Martin Marietta history",
        "kg-infused.passage-note": "The Martin Company made the Oriole.",
        "kg-infused.knowledge-augment": "Enhanced passage: Martin Marietta followed it.",
        "kg-infused.answer": "Martin Marietta",
    }
    return {**base, **overrides}


class ListRetriever:
    """Fixed rankings per query; records every (query, k)."""

    name = "list"

    def __init__(self, rankings=None):
        self.rankings = rankings or {}
        self.calls = []

    def retrieve(self, query, k, query_vector=None):
        self.calls.append((query, k))
        chunks = self.rankings.get(query, list(range(10)))[:k]
        passages = [
            ScoredPassage(c, f"chunk-{c}", 1.0 - i / 10, f"Doc {c}", f"text of {c}")
            for i, c in enumerate(chunks)
        ]
        return RetrievalResult(self.name, query, passages)


def graph():
    return MemoryGraph(ENTITIES, TRIPLES)


def make(model, kg=None, retriever=None, **options):
    options.setdefault("k_e", 1)
    runner = TaskRunner(model, default_registry())
    return KGInfusedRAG(
        runner, retriever or ListRetriever(), kg or graph(), KGInfusedConfig(**options)
    )


def ask(pipeline, question=QUESTION):
    return asyncio.run(pipeline.answer(question))


def prompts(model):
    return [c.prompt.split("@")[0] for c in model.calls]


def test_full_pipeline_calls_the_papers_stages_in_order():
    model = ScriptedChatModel(routes())
    result = ask(make(model))
    assert result.answer == "Martin Marietta" and result.error == ""
    assert prompts(model) == [
        "kg-infused.triple-select",
        "kg-infused.triple-update",
        "kg-infused.subgraph-summary",
        "kg-infused.kg-query-expansion",
        "kg-infused.passage-note",
        "kg-infused.knowledge-augment",
        "kg-infused.answer",
    ]
    answer_prompt = last_user(model.calls[-1].messages)
    assert "Martin Marietta followed it." in answer_prompt  # the fact-enhanced note
    augment = last_user(model.calls[-2].messages)
    assert "The Martin Company made the Oriole." in augment  # the passage note
    assert "Martin Marietta followed the Martin Company." in augment  # the summary
    summary = last_user(model.calls[2].messages)
    assert all(t in summary for t in (MADE, OPERATOR, FOLLOWED, PRODUCT))


def test_rounds_memory_and_next_entities_follow_eqs_4_and_5():
    model = ScriptedChatModel(routes())
    kg = graph()
    result = ask(make(model, kg, rounds=6))
    oriole, company, navy, marietta = (
        kg.id(n)
        for n in ("AAM-N-4 Oriole", "Martin Company", "United States Navy", "Martin Marietta")
    )
    # round 3 (Martin Marietta) selects nothing: no new entities, activation stops early
    assert [r[0] for r in kg.requests] == [(oriole,), (company, navy), (marietta,)]
    assert prompts(model)[:3] == ["kg-infused.triple-select"] + ["kg-infused.triple-update"] * 2
    rounds = [s for s in result.steps if isinstance(s, KGRound)]
    assert [r.next_entities for r in rounds] == [
        ("Martin Company", "United States Navy"),
        ("Martin Marietta",),  # the Oriole (a tail of <... | product | Oriole>) is activated
        (),
    ]
    assert rounds[0].unmatched == (INVENTED[1:-1],)
    update = last_user(model.calls[1].messages)
    previous = update.split("Previously Selected Triples:\n")[1].split("\n\n")[0]
    assert previous.splitlines() == [MADE, OPERATOR]  # the activation memory
    shown = update.split("New Retrieved Entity Triples:\n")[1].split("\n\n")[0]
    assert FOLLOWED in shown and MADE not in shown and len(shown.splitlines()) == 4
    assert [t.text() for t in result.evidence.kg_triples] == [MADE, OPERATOR, FOLLOWED, PRODUCT]
    assert result.as_dict()["evidence"]["kg_triples"][0]["tail"] == "Martin Company"


def test_rounds_cap_stops_activation():
    model = ScriptedChatModel(routes())
    kg = graph()
    result = ask(make(model, kg, rounds=1))
    assert len(kg.requests) == 1
    assert prompts(model).count("kg-infused.triple-update") == 0
    assert [s.number for s in result.steps if isinstance(s, KGRound)] == [1]


def test_caps_on_triples_per_entity_and_entities_per_round():
    model = ScriptedChatModel(routes(select=selector(MADE, KIND, FOLLOWED)))
    kg = graph()
    ask(make(model, kg, max_triples_per_entity=2, max_entities_per_round=1))
    assert [cap for _, cap in kg.requests] == [2, 2]
    first = new_triples(model.calls[0].messages)
    assert MADE in first and KIND in first and OPERATOR not in first
    # two tails selected (Martin Company, Air-to-air missile), one activated next
    assert kg.requests[1][0] == (kg.id("Martin Company"),)


def test_next_round_entities_exclude_activated_and_keep_selection_order():
    kg = graph()
    triples = kg.triples([kg.id("Martin Company")], 10)[kg.id("Martin Company")]
    picked = next_round_entities(reversed(triples), {kg.id("AAM-N-4 Oriole")}, limit=2)
    assert [kg.entity_name(e) for e in picked] == ["Glenn L. Martin", "Baltimore"]


def test_dual_retrieval_takes_half_per_query_without_duplicates():
    model = ScriptedChatModel(routes())
    retriever = ListRetriever({QUESTION: [0, 1, 2, 7], "Martin Marietta history": [2, 3, 4, 8]})
    result = ask(make(model, retriever=retriever))
    assert retriever.calls == [(QUESTION, 3), ("Martin Marietta history", 3)]
    assert [p.chunk for p in result.evidence.passages] == [0, 1, 2, 3, 4]
    note = last_user(model.calls[4].messages)
    assert "[5] Doc 4" in note and "[6]" not in note


def test_without_query_expansion_all_passages_come_from_the_question():
    model = ScriptedChatModel(routes())
    retriever = ListRetriever()
    ask(make(model, retriever=retriever, query_expansion=False))
    assert "kg-infused.kg-query-expansion" not in prompts(model)
    assert "kg-infused.knowledge-augment" in prompts(model)
    assert retriever.calls == [(QUESTION, 6)]


def test_without_augmentation_the_answer_reads_the_note():
    model = ScriptedChatModel(routes())
    ask(make(model, knowledge_augmentation=False))
    assert "kg-infused.knowledge-augment" not in prompts(model)
    assert "kg-infused.kg-query-expansion" in prompts(model)
    assert "The Martin Company made the Oriole." in last_user(model.calls[-1].messages)


def test_without_both_the_kg_is_not_read():
    model = ScriptedChatModel(routes())
    kg = graph()
    result = ask(make(model, kg, query_expansion=False, knowledge_augmentation=False))
    assert prompts(model) == ["kg-infused.passage-note", "kg-infused.answer"]
    assert kg.requests == [] and result.evidence.kg_triples == []


def test_invented_triples_are_repaired_once_then_dropped():
    model = ScriptedChatModel(routes(select=lambda m: INVENTED))
    result = ask(make(model))
    assert result.error == "" and result.evidence.kg_triples == []
    assert prompts(model)[:3] == ["kg-infused.triple-select"] * 2 + ["kg-infused.subgraph-summary"]
    assert result.transcript.parse_failures == 2
    assert "copy triples exactly as given" in last_user(model.calls[1].messages)
    (only_round,) = [s for s in result.steps if isinstance(s, KGRound)]
    assert only_round.selected == () and only_round.unmatched == (INVENTED[1:-1],)
    assert "(none)" in last_user(model.calls[2].messages)  # Table 15 over no triples


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rounds": 7}, "rounds must be in 1..6"),
        ({"rounds": 0}, "rounds must be in 1..6"),
        ({"k_e": 0}, "k_e must be greater than 0"),
        ({"k_p": 1}, "k_p must be at least 2 with query expansion"),
        ({"max_entities_per_round": 0}, "max_entities_per_round"),
    ],
)
def test_config_is_validated(options, message):
    with pytest.raises(ConfigError, match=message):
        KGInfusedConfig(**options)
    assert KGInfusedConfig(k_p=1, query_expansion=False).k_p == 1


def test_self_ask_plug_in_runs_the_kg_modules_for_each_follow_up():
    follow_up = "Who made the AAM-N-4 Oriole?"
    model = ScriptedChatModel(
        routes(
            **{
                "kg-infused.self-ask": [
                    f"Are follow up questions needed here: Yes.\nFollow up: {follow_up}",
                    "So the final answer is: Martin Marietta",
                ],
                "kg-infused.answer": "Martin Company",
            }
        )
    )
    retriever = ListRetriever()
    runner = TaskRunner(model, default_registry())
    pipeline = SelfAskKG(runner, retriever, graph(), SelfAskKGConfig(k=4, k_e=1, rounds=1))
    result = ask(pipeline)
    assert result.answer == "Martin Marietta"
    assert [s.query for s in result.steps if isinstance(s, KGSeeds)] == [follow_up]
    assert retriever.calls == [(follow_up, 2), ("Martin Marietta history", 2)]
    answer_call = next(c for c in model.calls if c.prompt.startswith("kg-infused.answer"))
    text = last_user(answer_call.messages)
    assert f"Question: {follow_up}" in text and "Martin Marietta followed it." in text
    second = last_user(model.calls[-1].messages)
    assert f"Follow up: {follow_up}\nIntermediate answer: Martin Company" in second


def reasoning(possible, answer="", follow_up=""):
    return json.dumps(
        {
            "provided_context": "The Martin Company made it.",
            "answer_possible": possible,
            "final_answer": answer,
            "additional_question": follow_up,
        }
    )


def test_cot_plug_in_reasons_over_fact_enhanced_notes():
    model = ScriptedChatModel(
        routes(
            **{
                "sa-rag.cot": [
                    reasoning(False, follow_up="Who followed the Martin Company?"),
                    reasoning(True, answer="Martin Marietta"),
                ],
                "sa-rag.baseline-answer": json.dumps({"final_answer": "Martin Marietta"}),
            }
        )
    )
    runner = TaskRunner(model, default_registry())
    config = CoTKGConfig(k=2, k_e=1, rounds=1)
    result = ask(CoTRAGKG(runner, ListRetriever(), graph(), config))
    assert result.answer == "Martin Marietta"
    queries = [s.query for s in result.steps if isinstance(s, KGSeeds)]
    assert queries == [QUESTION, "Who followed the Martin Company?"]
    steps = [c for c in model.calls if c.prompt.startswith("sa-rag.cot")]
    assert "Martin Marietta followed it." in last_user(steps[0].messages)
    assert "Summary of earlier steps: The Martin Company made it." in last_user(steps[1].messages)
    with pytest.raises(ConfigError, match="k must be at least 2"):
        CoTKGConfig(k=1)


def judge(best, worst):
    return json.dumps({"best_id": best, "worst_id": worst})


def sampler(model):
    return PreferenceSampler(TaskRunner(model, default_registry()))


def candidates(prefix="out"):
    return [f"{prefix} {i}" for i in range(6)]


def test_dpo_samples_six_decodings_and_writes_trl_rows(tmp_path):
    model = ScriptedChatModel(
        {"kg-infused.knowledge-augment": candidates(), "kg-infused.dpo-judge": judge(2, 5)}
    )
    pipeline = make(ScriptedChatModel(routes()))
    items = asyncio.run(ka_inputs(pipeline, [QUESTION]))
    assert items[0].passage == "The Martin Company made the Oriole."
    assert items[0].triples_summary == "Martin Marietta followed the Martin Company."
    pairs, stats = asyncio.run(sampler(model).collect(items))
    augment = [c for c in model.calls if c.prompt.startswith("kg-infused.knowledge-augment")]
    assert [(c.decoding.temperature, c.decoding.top_p) for c in augment] == list(DPO_DECODINGS)
    judged = json.loads(
        last_user(model.calls[-1].messages).split("Outputs:\n")[1].split("\n\nOutput format")[0]
    )
    assert judged == [{"_id": i, "output": f"out {i}"} for i in range(6)]
    (pair,) = pairs
    row = pair.row()
    assert row["chosen"] == [{"role": "assistant", "content": "out 2"}]
    assert row["rejected"] == [{"role": "assistant", "content": "out 5"}]
    assert row["prompt"][0]["role"] == "user" and QUESTION in row["prompt"][0]["content"]
    assert stats.as_dict()["pairs"] == 1 and stats.as_dict()["llm_calls"] == 7
    path = tmp_path / "pairs.jsonl"
    assert write_dpo_jsonl(pairs, path) == 1
    assert load_preference_rows(path) == [row]


def test_dpo_filters_ties_identical_texts_and_unparsable_judgements():
    items = asyncio.run(ka_inputs(make(ScriptedChatModel(routes())), [QUESTION]))
    cases = [
        (candidates(), [judge(3, 3)], "ties"),
        (["same"] * 6, [judge(0, 4)], "identical"),
        (candidates(), ["Output 2 is best.", '{"best_id": 9, "worst_id": 0}'], "unparsable"),
        (["  "] * 6, [judge(0, 1)], "generation_failed"),
    ]
    for outputs, verdicts, reason in cases:
        model = ScriptedChatModel(
            {"kg-infused.knowledge-augment": outputs, "kg-infused.dpo-judge": verdicts}
        )
        pairs, stats = asyncio.run(sampler(model).collect(items))
        assert pairs == [] and stats.inputs == 1
        assert getattr(stats, reason) == 1, reason


def test_dpo_training_defaults_are_table_21_and_trl_is_optional(tmp_path):
    args = trainer_arguments(DPOTrainConfig(), tmp_path)
    assert (args["max_length"], args["per_device_train_batch_size"]) == (8000, 4)
    assert (args["learning_rate"], args["num_train_epochs"], args["beta"]) == (5e-7, 1.0, 0.1)
    assert (args["adam_beta1"], args["adam_beta2"], args["adam_epsilon"]) == (0.9, 0.999, 1e-8)
    assert (args["weight_decay"], args["warmup_steps"]) == (0.0, 0)
    assert args["sync_ref_model"] and args["ref_model_mixup_alpha"] == 0.6
    assert args["ref_model_sync_steps"] == 512
    with pytest.raises(ConfigError, match="sync"):
        DPOTrainConfig(lora=True)
    try:
        import trl  # noqa: F401
    except ImportError:
        from quillian.methods.kg_infused.dpo_train import train_dpo

        data = tmp_path / "rows.jsonl"
        data.write_text(json.dumps({"prompt": "p", "chosen": "a", "rejected": "b"}) + "\n")
        with pytest.raises(MissingExtraError, match=r"quillian\[dpo\]"):
            train_dpo(data, "some/model", tmp_path / "out")


CORPUS = LOVELACE


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    return tiny_index(tmp_path_factory.mktemp("idx"))


def test_pipeline_over_an_index_document_graph(context):
    babbage = "<Charles Babbage | related_to | London>"
    model = ScriptedChatModel(
        {
            "kg-infused.triple-select": "<Ada Lovelace | related_to | Charles Babbage>",
            "kg-infused.triple-update": babbage,
            "kg-infused.subgraph-summary": "Ada Lovelace worked with Babbage, born in London.",
            "kg-infused.kg-query-expansion": "Where was Charles Babbage born?",
            "kg-infused.passage-note": "Babbage was born in London.",
            "kg-infused.knowledge-augment": "Babbage, Lovelace's collaborator, was born in London.",
            "kg-infused.answer": "London",
        }
    )
    runner = TaskRunner(model, default_registry())
    config = KGInfusedConfig(k_e=1, k_p=2)
    pipeline = KGInfusedRAG(
        runner, make_retriever(context, "dense"), DocumentGraph(context), config
    )
    result = ask(pipeline, "Who is Ada Lovelace's collaborator?")
    assert result.answer == "London"
    seeds = next(s for s in result.steps if isinstance(s, KGSeeds)).seeds
    assert seeds[0].entity == "Ada Lovelace"
    triples = result.as_dict()["evidence"]["kg_triples"]
    assert [t["tail"] for t in triples] == ["Charles Babbage", "London"]
    assert triples[1]["sentence"] == "Charles Babbage was born in London."


def test_a_fact_read_from_its_object_keeps_its_order_and_is_shown_once(context):
    """Walking the document graph both ways, London's side of "Charles Babbage was born
    in London" reads as the fact itself (no invented predicate), leads to Babbage, and
    is not offered again from Babbage's side."""
    fact = "<Charles Babbage | related_to | London>"
    model = ScriptedChatModel(
        {
            "kg-infused.triple-select": fact,
            "kg-infused.triple-update": "None",
            "kg-infused.subgraph-summary": "Charles Babbage was born in London.",
            "kg-infused.kg-query-expansion": "Who was born in London?",
            "kg-infused.passage-note": "Babbage was born in London.",
            "kg-infused.knowledge-augment": "Charles Babbage was born in London.",
            "kg-infused.answer": "Charles Babbage",
        }
    )
    runner = TaskRunner(model, default_registry())
    graph = DocumentGraph(context, inverse=True)
    pipeline = KGInfusedRAG(
        runner, make_retriever(context, "dense"), graph, KGInfusedConfig(k_e=1, k_p=2)
    )
    result = ask(pipeline, "Which capital of England was somebody born in?")
    seeds = next(s for s in result.steps if isinstance(s, KGSeeds)).seeds
    assert seeds[0].entity == "London", seeds
    first, second = (s for s in result.steps if isinstance(s, KGRound))
    assert first.selected == (fact,) and first.next_entities == ("Charles Babbage",)
    shown = [new_triples(c.messages) for c in model.calls if "triple" in c.prompt]
    assert fact in shown[0] and "(inverse)" not in shown[0]
    assert fact not in shown[1]  # the same fact, met again from Babbage's side
    assert second.entities == ("Charles Babbage",)
    (triple,) = result.as_dict()["evidence"]["kg_triples"]
    assert (triple["head"], triple["tail"]) == ("Charles Babbage", "London")
