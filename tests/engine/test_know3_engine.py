"""Know3-RAG through the engine: the index stage trains ComplEx on the document graph,
the method answers over it, any method's answer is verified, and a stale or missing
model is refused with the command that fixes it."""

import asyncio
import json
import math
import shutil

import pytest

from quillian.cli.main import main
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.kg.rdf import import_rdf
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.storage import model_directory
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.engine import Engine, IndexSettings, index_documents
from quillian.engine.kge import train_kge
from quillian.errors import IndexStageMissingError, ModelLoadError
from quillian.eval.qa import summarize
from quillian.methods.steps import ConfidenceCheck, ReferenceFilter, TurnAnswer
from quillian.methods.table import method_spec
from quillian.testing.corpus import LOVELACE
from quillian.types import Document

QUESTION = "Where was Charles Babbage born?"
TRIPLES = '[{"subject": "Charles Babbage", "predicate": "born in", "object": "London"}]'


ROUTES = {
    "know3.answer": "Babbage was born in London.\n\nThe answer is London.",
    "know3.triples": TRIPLES,
    "know3.reference": "Charles Babbage was born in London in 1791.",
    "know3.relevance": "The reliability of the passage is yes.",
    "know3.query": "Where was Babbage born?",
    "kg-infused.passage-note": "Babbage was born in London.",
    "kg-infused.answer": "London",
}


def model():
    return ScriptedChatModel(ROUTES)


def build(path):
    settings = IndexSettings(extractor="spacy", embedder="keyword", methods=("know3-rag",))
    documents = [Document(text, title) for title, text in LOVELACE.items()]
    return index_documents(path, documents, settings)


@pytest.fixture(scope="module")
def location(tmp_path_factory):
    path = tmp_path_factory.mktemp("know3")
    build(path)
    return path


def test_the_method_declares_its_model_and_stage():
    spec = method_spec("know3")
    assert spec.name == "know3-rag" and spec.needs_kge
    assert [s.name for s in spec.index_stages] == ["kge"]


def test_index_stage_trains_the_model_and_the_method_answers(location):
    manifest = json.loads((model_directory(location) / "manifest.json").read_text())
    assert manifest["graph"]["triples"] > 0

    async def ask():
        async with Engine.open(location, llm=model()) as engine:
            return await engine.answer(QUESTION, "know3-rag", theta0=1e6)

    result = asyncio.run(ask())
    assert result.answer == "London" and not result.error
    check = next(s for s in result.steps if isinstance(s, ConfidenceCheck))
    assert check.accepted and check.triples
    assert [s.turn for s in result.steps if isinstance(s, TurnAnswer)] == [0]


def test_verify_scores_another_methods_answer(location):
    async def verify():
        async with Engine.open(location, llm=model()) as engine:
            answer = await engine.answer(QUESTION, "vanilla-rag")
            return answer, await engine.verify(QUESTION, answer.answer, theta0=1e6)

    answer, verification = asyncio.run(verify())
    assert answer.answer == "London"
    assert verification.as_dict()["triples"], verification.as_dict()
    assert verification.verified == (verification.check.score is not None)


def test_missing_and_stale_models_are_refused(tmp_path, location):
    copy = tmp_path / "copy"
    shutil.copytree(location, copy)
    shutil.rmtree(model_directory(copy))

    async def ask(where):
        async with Engine.open(where, llm=model()) as engine:
            return await engine.answer(QUESTION, "know3-rag")

    with pytest.raises(IndexStageMissingError, match="quillian kg train-kge"):
        asyncio.run(ask(copy))
    # a model trained on another graph (one document more) is refused, not misread
    other = tmp_path / "other"
    settings = IndexSettings(extractor="spacy", embedder="keyword", methods=("know3-rag",))
    extra = {**LOVELACE, "Paris": "Paris is the capital of France. Babbage visited Paris."}
    index_documents(other, [Document(t, k) for k, t in extra.items()], settings)
    shutil.rmtree(model_directory(copy), ignore_errors=True)
    shutil.copytree(model_directory(other), model_directory(copy))
    with pytest.raises(ModelLoadError, match="another graph"):
        asyncio.run(ask(copy))


def routes_file(tmp_path):
    path = tmp_path / "routes.json"
    path.write_text(json.dumps(ROUTES))
    return f"scripted:{path}"


def test_cli_ask_verify_and_calibrate(location, tmp_path, capsys):
    llm = routes_file(tmp_path)
    code = main(
        [
            "ask",
            str(location),
            QUESTION,
            "--method",
            "vanilla-rag",
            "--llm",
            llm,
            "--verify",
            "--verify-theta0",
            "1000000",
            "--json",
        ]
    )
    assert code == 0
    record = json.loads(capsys.readouterr().out)
    assert record["answer"] == "London"
    assert record["verification"]["verified"] is True
    assert record["verification"]["triples"][0]["triple"] == [
        "Charles Babbage",
        "born in",
        "London",
    ]
    questions = tmp_path / "questions.txt"
    questions.write_text(f"{QUESTION}\nWho designed the Analytical Engine?\n")
    code = main(
        [
            "know3",
            "calibrate",
            str(location),
            "--questions",
            str(questions),
            "--llm",
            llm,
            "--target",
            "0.5",
            "--option",
            "max_turns=1",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["questions"] == 2
    assert report["chosen"]["answered_at_turn"]["0"] in (0.0, 1.0)  # tied scores
    assert set(report["chosen"]["answered_at_turn"]) == {"0", "1"}


def test_summary_reports_turn_shares_and_verification():
    rows = [
        {
            "em": 1.0,
            "f1": 1.0,
            "accuracy": 1.0,
            "evidence_recall": None,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "seconds": 1.0,
            "calls": [],
            "error": "",
            "evidence": {"passages": []},
            "steps": [{"kind": "turn-answer", "turn": 0}],
            "verification": {"verified": True, "score": 0.1},
        },
        {
            "em": 0.0,
            "f1": 0.5,
            "accuracy": 0.0,
            "evidence_recall": None,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "seconds": 1.0,
            "calls": [],
            "error": "",
            "evidence": {"passages": []},
            "steps": [{"kind": "turn-answer", "turn": 0}, {"kind": "turn-answer", "turn": 1}],
            "verification": {"verified": False, "score": None},
        },
    ]
    summary = summarize(rows)
    assert summary["answered_at_turn"] == {"0": 0.5, "1": 0.5}
    check = summary["verification"]
    assert check["verified"]["em"] == 1.0 and check["not_verified"]["f1"] == 0.5
    assert check["unscorable"] == 1


def test_corpus_passages_join_the_candidates(location):
    async def ask():
        async with Engine.open(location, llm=model()) as engine:
            return await engine.answer(
                QUESTION,
                "know3-rag",
                retriever="dense",
                theta0=0.0,
                max_turns=1,
                corpus_passages=2,
                raw_query=False,
            )

    result = asyncio.run(ask())
    filtered = next(s for s in result.steps if isinstance(s, ReferenceFilter))
    sources = [c["source"] for c in filtered.candidates]
    assert sum(s.startswith("passage:") for s in sources) == 2
    passages = [c for c in filtered.candidates if c["source"].startswith("passage:")]
    # each passage names its title, and its text is the passage under that title
    assert all(c["title"] and c["text"].startswith(f"{c['title']}: ") for c in passages)
    assert all("title" not in c for c in filtered.candidates if c["query"] != "corpus")
    assert result.evidence.passages  # the passages are evidence, as in every method
    # a kept passage is cited as a passage, a written reference as a reference
    assert all(not r.source.startswith("passage:") for r in result.evidence.references)


def test_cli_ask_prints_the_references_given_to_the_model(location, tmp_path, capsys):
    llm = routes_file(tmp_path)
    ask = ["ask", str(location), QUESTION, "--method", "know3-rag", "--llm", llm]
    options = ["--option", "theta0=0", "--option", "max_turns=1"]
    assert main([*ask, *options]) == 0
    out = capsys.readouterr().out
    assert "answer: London" in out
    assert "references given to the model (source, KG-consistency score):" in out
    assert "Charles Babbage was born in London in 1791." in out


def test_cli_ask_with_a_table_6_preset(location, tmp_path, capsys):
    """``--option theta0_preset=...``: θ0 from the paper's Table 6 (HotpotQA with
    GPT-4o-mini: 13), so the turn-0 threshold is 13·128/(1+e)."""
    llm = routes_file(tmp_path)
    ask = ["ask", str(location), QUESTION, "--method", "know3-rag", "--llm", llm, "--json"]
    assert main([*ask, "--option", "theta0_preset=hotpotqa/gpt-4o-mini"]) == 0
    record = json.loads(capsys.readouterr().out)
    check = next(s for s in record["steps"] if s["kind"] == "confidence-check")
    assert check["threshold"] == pytest.approx(13 * 128 / (1 + math.e), abs=1e-3)
    code = main([*ask, "--option", "theta0_preset=nope", "--option", "max_turns=1"])
    assert code != 0
    assert "unknown theta0_preset 'nope'" in capsys.readouterr().err


def test_cli_index_for_know3_trains_the_model(tmp_path, capsys):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for title, text in LOVELACE.items():
        (corpus / f"{title}.txt").write_text(f"{title}\n\n{text}")
    out = tmp_path / "idx"
    assert (
        main(["index", str(corpus), "--out", str(out), "--embedder", "keyword", "--for", "know3"])
        == 0
    )
    manifest = json.loads((model_directory(out) / "manifest.json").read_text())
    assert manifest["kind"] == "quillian-kge" and manifest["graph"]["triples"] > 0
    capsys.readouterr()
    assert main(["index", str(corpus), "--out", str(tmp_path / "x"), "--for", "nope"]) != 0
    assert "unknown method 'nope'" in capsys.readouterr().err


TURTLE = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:babbage rdfs:label "Charles Babbage" ; skos:definition "An engineer" ;
    ex:born_in ex:london .
ex:lovelace rdfs:label "Ada Lovelace" ; skos:definition "A mathematician" ;
    ex:worked_with ex:babbage .
ex:london rdfs:label "London" ; skos:definition "The capital of England" ;
    ex:capital_of ex:england .
ex:england rdfs:label "England" ; skos:definition "A country" ; ex:contains ex:london .
"""


def test_know3_over_an_imported_graph_with_no_index(tmp_path):
    (tmp_path / "g.ttl").write_text(TURTLE)
    import_rdf([tmp_path / "g.ttl"], tmp_path / "kg", KeywordEmbedder())
    train_kge(tmp_path / "kg", ComplExConfig(dim=8, epochs=5, batch_size=4))
    # the graph's manifest names its model (the model's own manifest is what loading checks)
    graph_manifest = json.loads((tmp_path / "kg" / "manifest.json").read_text())
    model_manifest = json.loads((model_directory(tmp_path / "kg") / "manifest.json").read_text())
    assert graph_manifest["state"] == "complete" and graph_manifest["kge"] == {
        "directory": "kge",
        "format": model_manifest["format"],
        "model": "complex",
        "fingerprint": model_manifest["graph"]["fingerprint"],
        "dim": 8,
        "epochs": model_manifest["epochs"],
        "created": model_manifest["created"],
    }
    scripted = ScriptedChatModel(
        {
            "know3.answer": "Babbage was born in London.\n\nThe answer is London.",
            "know3.triples": TRIPLES,
        }
    )

    async def ask():
        async with Engine.open(None, llm=scripted, kg=str(tmp_path / "kg")) as engine:
            return await engine.answer(QUESTION, "know3-rag", theta0=1e6)

    result = asyncio.run(ask())
    check = next(s for s in result.steps if isinstance(s, ConfidenceCheck))
    assert check.accepted, check
    assert check.triples[0]["linked"] == "<Charles Babbage | born_in | London>"
    assert check.entities == ("London",)  # "Babbage" alone names no entity
