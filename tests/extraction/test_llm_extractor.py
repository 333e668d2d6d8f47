"""LLM extraction with SA-RAG's NER and relation prompts, on a scripted model."""

import asyncio
import json

import pytest

from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.extraction.base import Extractor
from quillian.components.extraction.llm import LLMExtractor
from quillian.components.extraction.llm_budget import (
    ExtractionBudget,
    approx_tokens,
    estimate_extraction,
)
from quillian.components.factories import make_extractor
from quillian.components.llm.base import ChatMessage
from quillian.components.llm.prompts import Prompt, PromptRegistry
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.llm.tasks import TaskRunner
from quillian.components.prompts import default_registry
from quillian.errors import (
    BudgetExhausted,
    ConfigError,
    IndexIncompleteError,
    LLMUnavailableError,
)
from quillian.index import build_index, open_index, read_manifest
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Chunk, Document

ADA = "Ada Lovelace worked with Charles Babbage on the Analytical Engine. She was born in London."
CORPUS = {
    "Ada Lovelace": ADA,
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a mechanical computer by Charles Babbage.",
    "London": "London is the capital of England.",
}


def entity(name, kind, info="", aliases=()):
    return {"name": name, "type": kind, "aliases": list(aliases), "entity_information": info}


NER = {
    ADA: [
        entity("Ada Lovelace", "PERSON", "Mathematician, born in London.", ["Lady Lovelace"]),
        entity("Charles Babbage", "person", "Collaborator of Ada Lovelace."),  # case repaired
        {"name": "Analytical Engine", "type": "MISC", "aliases": None, "entity_information": ""},
        entity("London", "GPE", "City where Ada Lovelace was born."),
        entity("Royal Society", "ORGANIZATION", "A learned society."),  # not in the text
    ],
    CORPUS["Charles Babbage"]: [
        entity("Charles Babbage", "PERSON", "Designer of the Analytical Engine."),
        entity("London", "GPE", "Birthplace of Charles Babbage."),
        entity("Analytical Engine", "MISC", "A machine designed by Charles Babbage."),
    ],
    CORPUS["Analytical Engine"]: [
        entity("Analytical Engine", "MISC", "A mechanical computer."),
        entity("Charles Babbage", "PERSON", "Its designer."),
    ],
    CORPUS["London"]: [
        entity("London", "GPE", "Capital of England."),
        entity("England", "GPE", "A country."),
    ],
}
RELATIONS = {
    ADA: [
        ["Ada Lovelace", "worked with", "Charles Babbage"],
        ["lady lovelace", "was born in", "London"],  # an alias, in lower case
        ["Royal Society", "honoured", "Charles Babbage"],  # subject not in the text
        ["Ada Lovelace", "met", "Lord Byron"],  # not an extracted entity: dropped
        ["Ada Lovelace", "is"],  # malformed: dropped
        ["Ada Lovelace", "worked with", "Charles Babbage"],  # duplicate: dropped
    ],
    CORPUS["Charles Babbage"]: [
        ["Charles Babbage", "was born in", "London"],
        ["Charles Babbage", "designed", "Analytical Engine"],
    ],
    CORPUS["Analytical Engine"]: [["Charles Babbage", "designed", "Analytical Engine"]],
    CORPUS["London"]: [["London", "is the capital of", "England"]],
}
REASONING = "Reasoning\n\n1. Reading the paragraph [note: pronouns resolved].\n\nResponse\n\n"


def passage_of(messages):
    """The real input of a paper prompt: the message after its one-shot demonstration."""
    return messages[3].content


def ner_reply(messages):
    return json.dumps(NER[passage_of(messages)])


def relations_reply(messages):
    passage, _ = passage_of(messages).split("\n\nEntity list: ")
    return REASONING + json.dumps({"triples": RELATIONS[passage]})


def scripted(**routes):
    return ScriptedChatModel(
        {"sa-rag.ner": ner_reply, "sa-rag.relations": relations_reply, **routes}
    )


def extractor_for(model, **kwargs):
    return LLMExtractor(TaskRunner(model, default_registry()), **kwargs)


def chunk(title, text=None, doc="d"):
    text = CORPUS[title] if text is None else text
    return Chunk(doc + title, 0, text, 0, len(text), title)


def prompts_sent(model, name):
    return [passage_of(c.messages) for c in model.calls if c.prompt.startswith(name)]


def test_entities_keep_types_aliases_and_information_and_the_title_is_the_topic():
    model = scripted()
    extractor = extractor_for(model, corpus_titles=CORPUS)
    assert isinstance(extractor, Extractor)
    assert extractor.name == "llm:scripted:sa-rag.ner@1+sa-rag.relations@1"
    (got,) = extractor.extract([chunk("Ada Lovelace")])
    by_name = {e.name: e for e in got.entities}
    assert list(by_name) == [
        "Ada Lovelace", "Charles Babbage", "Analytical Engine", "London", "Royal Society"
    ]  # fmt: skip
    ada = by_name["Ada Lovelace"]
    assert (ada.type, ada.aliases, ada.is_topic) == ("PERSON", ("Lady Lovelace",), True)
    assert ada.description == "Mathematician, born in London."
    assert (ada.start, ada.end) == (0, len("Ada Lovelace"))
    assert by_name["Charles Babbage"].type == "PERSON"
    assert not any(e.is_topic for e in got.entities[1:])
    # no entity_information: described by the sentences that mention it
    engine = by_name["Analytical Engine"]
    assert engine.aliases == ()
    assert engine.description == ADA.split(" She")[0]
    assert by_name["Royal Society"].start == -1
    # the relation prompt got the passage and the entity names
    (call,) = [c for c in model.calls if c.prompt == "sa-rag.relations@1"]
    assert call.messages[3].content == (
        ADA + "\n\nEntity list: Ada Lovelace, Charles Babbage, Analytical Engine, London, "
        "Royal Society"
    )


def test_triples_name_canonical_entities_with_their_source_sentence():
    extractor = extractor_for(scripted())
    (got,) = extractor.extract([chunk("Ada Lovelace")])
    first, second = ADA.split(" She")[0], "She was born in London."
    rows = [
        (t.subject, t.predicate, t.object, t.description, t.provenance.sentence)
        for t in got.triples
    ]
    assert rows == [
        ("Ada Lovelace", "worked with", "Charles Babbage",
         "Ada Lovelace worked with Charles Babbage", first),
        # no sentence names both ("She ..."): the subject's sentence
        ("Ada Lovelace", "was born in", "London", "lady lovelace was born in London", first),
        # the subject is nowhere in the text: the whole chunk
        ("Royal Society", "honoured", "Charles Babbage",
         "Royal Society honoured Charles Babbage", ADA),
    ]  # fmt: skip
    assert second in ADA
    prov = got.triples[0].provenance
    assert (prov.chunk_id, prov.doc_id) == (got.chunk_id, got.doc_id)
    assert ADA[prov.start : prov.end] == prov.sentence
    assert got.triples[2].provenance.start == 0 and got.triples[2].provenance.end == len(ADA)
    report = extractor.report
    assert report.dropped == {"unknown entity": 1, "malformed": 1, "duplicate": 1}
    assert (report.chunks, report.entities, report.triples) == (1, 5, 3)
    assert report.calls == 2 and not report.failures
    assert "dropped: duplicate 1, malformed 1, unknown entity 1" in report.summary()


def test_a_disambiguated_title_names_the_topic_and_an_unsafe_base_is_no_alias():
    text = "Lloyd is a 1918 film starring Harold Lloyd."
    model = ScriptedChatModel(
        {
            "sa-rag.ner": json.dumps(
                [entity("Lloyd", "MISC", "A 1918 film."), entity("Harold Lloyd", "PERSON")]
            ),
            "sa-rag.relations": json.dumps({"triples": [["Lloyd", "stars", "Harold Lloyd"]]}),
        }
    )
    (got,) = extractor_for(model).extract([chunk("Lloyd (film)", text)])
    topic, actor = got.entities
    assert (topic.name, topic.aliases, topic.is_topic) == ("Lloyd (film)", (), True)
    assert (topic.start, topic.end) == (0, 5)
    assert not actor.is_topic
    (triple,) = got.triples
    assert (triple.subject, triple.object) == ("Lloyd (film)", "Harold Lloyd")
    assert triple.provenance.sentence == text


def test_malformed_ner_output_is_repaired_once():
    answers = iter([json.dumps([entity("London", "LOCATION")]), ner_reply])

    def ner(messages):
        answer = next(answers)
        return answer if isinstance(answer, str) else answer(messages)

    model = scripted(**{"sa-rag.ner": ner})
    extractor = extractor_for(model)
    (got,) = extractor.extract([chunk("London")])
    assert [e.name for e in got.entities] == ["London", "England"]
    repair = [c for c in model.calls if c.prompt == "sa-rag.ner@1"][1]
    assert repair.messages[-2].role == "assistant" and "LOCATION" in repair.messages[-2].content
    assert "could not be used" in repair.messages[-1].content
    assert extractor.report.calls == 3 and not extractor.failures


def test_output_still_unusable_after_repair_is_recorded_and_the_batch_goes_on():
    def ner(messages):
        if passage_of(messages) == CORPUS["London"]:
            return "Sorry, I cannot help with [that]."
        return ner_reply(messages)

    seen = []
    model = scripted(**{"sa-rag.ner": ner})
    extractor = extractor_for(model, on_failure=seen.append, concurrency=2)
    chunks = [chunk(t) for t in CORPUS]
    got = extractor.extract(chunks)
    assert [e.chunk_id for e in got] == [c.id for c in chunks]
    london = got[3]
    assert london.entities == () and london.triples == ()
    assert all(e.entities for e in got[:3])
    (failure,) = extractor.failures
    assert seen == [failure]
    assert (failure.chunk_id, failure.doc_id, failure.stage) == (chunks[3].id, "dLondon", "ner")
    assert failure.raw == "Sorry, I cannot help with [that]."
    assert "sa-rag.ner@1" in failure.error
    assert prompts_sent(model, "sa-rag.ner").count(CORPUS["London"]) == 2
    assert not any(p.startswith(CORPUS["London"]) for p in prompts_sent(model, "sa-rag.rel"))


def test_unusable_relations_keep_the_entities_and_are_recorded():
    model = scripted(**{"sa-rag.relations": "no triples here"})
    extractor = extractor_for(model)
    (got,) = extractor.extract([chunk("London")])
    assert [e.name for e in got.entities] == ["London", "England"] and got.triples == ()
    (failure,) = extractor.failures
    assert (failure.stage, failure.raw) == ("relations", "no triples here")


def test_a_chunk_with_fewer_than_two_entities_makes_no_relation_call():
    model = ScriptedChatModel({"sa-rag.ner": json.dumps([entity("London", "GPE")])})
    got, blank = extractor_for(model).extract([chunk("London"), chunk("x", "   ")])
    assert [e.name for e in got.entities] == ["London"] and blank.entities == ()
    assert [c.prompt for c in model.calls] == ["sa-rag.ner@1"]  # the blank chunk: no call


def test_extract_also_works_inside_a_running_event_loop():
    extractor = extractor_for(scripted())

    async def caller():
        return extractor.extract([chunk("London")])

    (got,) = asyncio.run(caller())
    assert [t.object for t in got.triples] == ["England"]


# --- estimate and budget ---------------------------------------------------------------


def test_estimate_counts_calls_and_tokens_per_stage_without_a_model():
    prompts = PromptRegistry(
        [
            Prompt(
                "sa-rag.ner",
                2,
                (ChatMessage("system", "List the entities."), ChatMessage("user", "{passage}")),
                frozenset({"passage"}),
            ),
            Prompt(
                "sa-rag.relations",
                3,
                (
                    ChatMessage("system", "List the relations."),
                    ChatMessage("user", "{passage}\nEntities: {entities}"),
                ),
                frozenset({"passage", "entities"}),
            ),
        ]
    )
    chunks = [chunk("a", "one two three four"), chunk("b", "a b"), chunk("c", "  ")]
    got = estimate_extraction(chunks, prompts, count_tokens=lambda text: len(text.split()))
    # ner: (3 + 4) + (n + 4) prompt tokens, 2.5 n completion; relations: (3 + 4) +
    # (n + 1 + 4) + 0.25 n rounded up, 2.5 n completion; n = 4, then 2; blank: nothing
    assert got["stages"] == {
        "ner": {"calls": 2, "prompt_tokens": 15 + 13, "completion_tokens": 10 + 5},
        "relations": {"calls": 2, "prompt_tokens": 17 + 15, "completion_tokens": 10 + 5},
    }
    assert got["total"] == {
        "calls": 4, "prompt_tokens": 60, "completion_tokens": 30, "tokens": 90
    }  # fmt: skip
    assert got["chunks"] == 3 and got["token_counter"] == "given"
    assert got["prompts"] == {"ner": "sa-rag.ner@2", "relations": "sa-rag.relations@3"}
    assert [approx_tokens(t) for t in ("", "abcd", "abcde")] == [0, 1, 2]
    real = estimate_extraction([chunk("Ada Lovelace")], default_registry())
    assert real["token_counter"] == "chars/4"
    assert real["stages"]["ner"]["prompt_tokens"] > approx_tokens(ADA) + 1000  # the demo


def test_budget_arguments_are_checked():
    with pytest.raises(ConfigError, match="max_calls must be at least 1"):
        ExtractionBudget(max_calls=0)
    with pytest.raises(ConfigError, match="concurrency"):
        extractor_for(scripted(), concurrency=0)


def test_a_budget_below_one_chunk_stops_before_any_call():
    model = scripted()
    extractor = extractor_for(model, budget=ExtractionBudget(max_tokens=100))
    with pytest.raises(BudgetExhausted, match=r"budget \(100 tokens\) exhausted") as caught:
        extractor.extract([chunk("London")])
    assert caught.value.done == () and model.calls == []


def test_a_call_budget_stops_after_a_prefix_of_the_chunks():
    model = scripted()
    extractor = extractor_for(model, budget=ExtractionBudget(max_calls=4), concurrency=3)
    chunks = [chunk(t) for t in CORPUS]
    with pytest.raises(BudgetExhausted) as caught:
        extractor.extract(chunks)
    assert [e.chunk_id for e in caught.value.done] == [c.id for c in chunks[:2]]
    assert caught.value.calls == 4 and len(model.calls) == 4
    with pytest.raises(BudgetExhausted) as again:  # the budget spans later calls too
        extractor.extract(chunks[2:])
    assert again.value.done == () and len(model.calls) == 4


# --- indexing ----------------------------------------------------------------------------


def documents():
    return [Document(text, title) for title, text in CORPUS.items()]


def build(path, extractor):
    return build_index(
        documents(),
        path,
        chunker=PassageChunker(),
        extractor=extractor,
        embedder=KeywordEmbedder(),
    )


def test_budget_stop_leaves_a_resumable_index_and_the_rerun_calls_only_for_the_rest(tmp_path):
    first = scripted()
    budget = ExtractionBudget(max_calls=4)  # NER + relations for 2 of the 4 chunks
    with pytest.raises(BudgetExhausted, match="rerun"):
        build(tmp_path / "idx", extractor_for(first, budget=budget))
    assert len(first.calls) == 4
    assert read_manifest(tmp_path / "idx")["state"] == "building"
    with pytest.raises(IndexIncompleteError, match="rerun"):
        open_index(tmp_path / "idx", KeywordEmbedder())

    second = scripted()
    report = build(tmp_path / "idx", extractor_for(second))
    assert report.ingest.resumed == 4  # the stopped batch is redone ...
    assert len(second.calls) == 4  # ... but only the two chunks not stored are extracted
    assert prompts_sent(second, "sa-rag.ner") == [CORPUS["Analytical Engine"], CORPUS["London"]]
    assert read_manifest(tmp_path / "idx")["state"] == "complete"
    assert len(open_index(tmp_path / "idx", KeywordEmbedder()).context.chunk_texts) == 4


def test_the_graph_built_from_llm_extractions_holds_the_relations(tmp_path):
    report = build(tmp_path / "idx", extractor_for(scripted(), corpus_titles=CORPUS))
    kg = open_index(tmp_path / "idx", KeywordEmbedder()).context.kg
    relations = {(r.subject, r.predicate, r.object) for r in kg.relations}
    assert {
        ("Ada Lovelace", "worked with", "Charles Babbage"),
        ("Ada Lovelace", "was born in", "London"),
        ("Charles Babbage", "designed", "Analytical Engine"),
        ("London", "is the capital of", "England"),
    } <= relations
    assert report.counts["relations"] == len(kg.relations) == 7  # one "designed" per chunk
    sentences = {r.provenance.sentence for r in kg.relations if r.provenance}
    assert "London is the capital of England." in sentences
    ada = next(e for e in kg.entities if e.name == "Ada Lovelace")
    assert ada.aliases == ["Lady Lovelace"] and ada.type == "PERSON"
    descriptions = {d.text for d in kg.descriptions}
    assert {"Mathematician, born in London.", "Capital of England."} <= descriptions


def test_index_extracts_in_batches_of_sixteen(tmp_path):
    titles = {f"Doc {i}": f"Text number {i}." for i in range(20)}
    extractor = TitleLinkExtractor(titles)
    build_index(
        [Document(text, title) for title, text in titles.items()],
        tmp_path / "idx",
        chunker=PassageChunker(),
        extractor=extractor,
        embedder=KeywordEmbedder(),
    )
    assert extractor.calls == 2  # 16 + 4


def test_registry_makes_the_llm_extractor():
    with pytest.raises(ConfigError, match="needs a chat model"):
        make_extractor("llm")
    runner = TaskRunner(scripted(), default_registry())
    budget = ExtractionBudget(max_tokens=10_000)
    extractor = make_extractor("llm", titles=["Ada Lovelace"], runner=runner, budget=budget)
    assert isinstance(extractor, LLMExtractor) and extractor.budget == budget


def test_an_unreachable_model_is_an_error_not_a_recorded_failure():
    def ner(messages):
        if passage_of(messages) == CORPUS["London"]:
            raise LLMUnavailableError("endpoint down")
        return ner_reply(messages)

    extractor = extractor_for(scripted(**{"sa-rag.ner": ner}), concurrency=2)
    with pytest.raises(LLMUnavailableError, match="endpoint down"):
        extractor.extract([chunk(t) for t in CORPUS])
    assert extractor.failures == []
