"""``quillian ask`` and ``quillian bench qa`` end to end with a scripted model."""

import json
from types import SimpleNamespace

import pytest

from quillian.cli.main import main
from quillian.index import read_manifest

CORPUS = [
    {"title": "Ada Lovelace", "text": "Ada Lovelace worked with Charles Babbage."},
    {"title": "Charles Babbage", "text": "Charles Babbage was born in London."},
    {"title": "London", "text": "London is the capital of England."},
]
EXTRACTIONS = [
    {**CORPUS[0], "entities": ["Ada Lovelace", "Charles Babbage"],
     "triples": [["Ada Lovelace", "worked with", "Charles Babbage"]]},
    {**CORPUS[1], "entities": ["Charles Babbage", "London"],
     "triples": [["Charles Babbage", "born in", "London"]]},
    {**CORPUS[2], "entities": ["London", "England"],
     "triples": [["London", "capital of", "England"]]},
]  # fmt: skip
QUESTIONS = [
    {
        "id": "q1",
        "question": "Where was the collaborator of Ada Lovelace born?",
        "answer": "London",
        "answer_aliases": ["London, England"],
        "paragraphs": [
            {"title": c["title"], "paragraph_text": c["text"], "is_supporting": i < 2}
            for i, c in enumerate(CORPUS)
        ],
    },
    {
        "id": "q2",
        "question": "What is London the capital of?",
        "answer": "England",
        "answer_aliases": [],
        "paragraphs": [
            {"title": c["title"], "paragraph_text": c["text"], "is_supporting": i == 2}
            for i, c in enumerate(CORPUS)
        ],
    },
]
ROUTES = {
    "kg-infused.passage-note": "Babbage was born in London.",
    "kg-infused.answer": "London",
    "sa-rag.answer": ["no json here", json.dumps({"reasoning": "r", "final_answer": "London"})],
}


@pytest.fixture
def files(tmp_path):
    (tmp_path / "corpus.json").write_text(json.dumps(CORPUS))
    (tmp_path / "ex.jsonl").write_text("\n".join(json.dumps(e) for e in EXTRACTIONS))
    (tmp_path / "q.jsonl").write_text("\n".join(json.dumps(q) for q in QUESTIONS))
    (tmp_path / "routes.json").write_text(json.dumps(ROUTES))
    return tmp_path


def test_ask_answers_with_evidence(files, capsys):
    idx = str(files / "idx")
    assert main(["index", str(files / "corpus.json"), "--out", idx, "--embedder", "hash",
                 "--extractions", str(files / "ex.jsonl")]) == 0  # fmt: skip
    capsys.readouterr()
    llm = f"scripted:{files / 'routes.json'}"
    code = main(["ask", idx, QUESTIONS[0]["question"], "--method", "vanilla-rag",
                 "--llm", llm, "--no-cache", "--option", "k=2", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] == "London" and len(out["evidence"]["passages"]) == 2
    # steps are named by the method that ran them; the prompts they borrowed are kept
    assert [(c["stage"], c["prompt"]) for c in out["calls"]] == [
        ("vanilla-rag.passage-note", "kg-infused.passage-note@1"),
        ("vanilla-rag.answer", "kg-infused.answer@1"),
    ]
    assert main(["ask", idx, "Who?", "--method", "sa-rag", "--llm", llm, "--no-cache",
                 "--trace"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "answer: London" in text and "1 parse failures" in text


def test_bad_llm_spec_and_option_are_clear_errors(files, capsys):
    assert main(["ask", str(files), "q", "--method", "no-retrieval", "--llm", "gpt4"]) == 2
    assert "cannot read LLM spec 'gpt4'" in capsys.readouterr().err
    code = main(["ask", str(files), "q", "--method", "no-retrieval", "--llm",
                 f"scripted:{files / 'routes.json'}", "--option", "k"])  # fmt: skip
    assert code == 2 and "key=value" in capsys.readouterr().err


def test_bench_qa_writes_rows_manifest_and_summary_and_reuses_the_cache(files, capsys):
    out = files / "out"
    args = ["bench", "qa", "--dataset", "musique", "--corpus", str(files / "corpus.json"),
            "--questions", str(files / "q.jsonl"), "--method", "vanilla-rag,sa-rag",
            "--llm", f"scripted:{files / 'routes.json'}", "--out", str(out),
            "--index-dir", str(files / "idx"), "--extractions", str(files / "ex.jsonl"),
            "--embedder", "hash", "--cache", str(files / "cache.sqlite"), "--json"]  # fmt: skip
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["vanilla-rag"]["questions"] == 2
    assert summary["vanilla-rag"]["accuracy"] == 0.5  # London right, England wrong
    assert summary["sa-rag"]["parse_failure_share"] > 0
    rows = [json.loads(x) for x in (out / "vanilla-rag" / "predictions.jsonl").open()]
    assert [r["id"] for r in rows] == ["q1", "q2"]
    assert rows[0]["prediction"] == "London" and rows[0]["em"] == 1.0
    assert rows[0]["evidence_recall"] is not None and rows[0]["prompt_tokens"] > 0
    manifest = json.loads((out / "sa-rag" / "manifest.json").read_text())
    assert manifest["prompts"]["sa-rag.answer"] == "sa-rag.answer@1"
    assert manifest["model"] == "scripted" and len(manifest["config_hash"]) == 16
    assert main(args) == 0  # rerun: every call comes from the cache
    capsys.readouterr()
    totals = json.loads((out / "summary.json").read_text())["methods"]
    for method in ("vanilla-rag", "sa-rag"):
        assert totals[method]["cached_calls"] == totals[method]["llm_calls"]
    # --first-n indexes only the first passages, as bench retrieval does (an index
    # built from a prefix of the corpus is not filled with the rest)
    prefix = [*args[: args.index("--index-dir")], "--index-dir", str(files / "idx2"),
              *args[args.index("--index-dir") + 2 :], "--first-n", "1"]  # fmt: skip
    assert main(prefix) == 0
    capsys.readouterr()
    assert read_manifest(files / "idx2")["counts"]["documents"] == 1
    # --offset runs a later part of the questions: the second alone, recorded as such
    part = [*args[: args.index("--out")], "--out", str(files / "part"),
            *args[args.index("--out") + 2 :], "--offset", "1"]  # fmt: skip
    assert main(part) == 0
    capsys.readouterr()
    rows = [json.loads(x) for x in (files / "part" / "vanilla-rag" / "predictions.jsonl").open()]
    assert [r["id"] for r in rows] == ["q2"]
    assert json.loads((files / "part" / "summary.json").read_text())["offset"] == 1
    assert main([*part[:-1], "2"]) == 2  # past the last question
    assert "offset 2 is outside its 2 questions" in capsys.readouterr().err


def test_bench_qa_runs_questions_of_one_kind_and_reports_each_kind(files, capsys):
    # MuSiQue's kind is the hop count its id starts with
    kinds = ["2hop", "3hop1"]
    hops = [{**q, "id": f"{kind}__{q['id']}"} for q, kind in zip(QUESTIONS, kinds, strict=True)]
    (files / "hops.jsonl").write_text("\n".join(json.dumps(q) for q in hops))
    args = ["bench", "qa", "--dataset", "musique", "--corpus", str(files / "corpus.json"),
            "--questions", str(files / "hops.jsonl"), "--method", "vanilla-rag",
            "--llm", f"scripted:{files / 'routes.json'}", "--index-dir", str(files / "idx"),
            "--extractions", str(files / "ex.jsonl"), "--embedder", "hash",
            "--no-cache"]  # fmt: skip
    assert main([*args, "--out", str(files / "all"), "--json"]) == 0
    by_kind = json.loads(capsys.readouterr().out)["vanilla-rag"]["by_kind"]
    assert by_kind == {
        "2hop": {"questions": 1, "em": 1.0, "f1": 1.0, "accuracy": 1.0},  # London
        "3hop1": {"questions": 1, "em": 0.0, "f1": 0.0, "accuracy": 0.0},
    }
    assert main([*args, "--out", str(files / "one"), "--kind", "3hop1"]) == 0
    assert "| F1 by kind | 3hop1 (1) |" in capsys.readouterr().out
    rows = [json.loads(x) for x in (files / "one" / "vanilla-rag" / "predictions.jsonl").open()]
    assert [(r["id"], r["kind"]) for r in rows] == [("3hop1__q2", "3hop1")]
    assert json.loads((files / "one" / "summary.json").read_text())["kinds"] == ["3hop1"]
    assert main([*args, "--out", str(files / "none"), "--kind", "comparison"]) == 2
    assert "no question of kind comparison (its kinds: 2hop, 3hop1)" in capsys.readouterr().err
    assert not (files / "none").exists()


def test_bench_qa_on_a_set_without_gold_answers_scores_what_it_can(files, capsys, caplog):
    # 2Wiki's questions carry gold passages only: the ranking and the costs are scored,
    # EM, F1 and accuracy are None ("n/a" in the table), not zeros
    (files / "2w.jsonl").write_text(
        json.dumps({"question": "Where was Ada born?", "supporting_titles": ["Ada Lovelace"]})
    )
    args = ["bench", "qa", "--dataset", "2wiki", "--corpus", str(files / "corpus.json"),
            "--questions", str(files / "2w.jsonl"), "--method", "vanilla-rag",
            "--llm", f"scripted:{files / 'routes.json'}", "--out", str(files / "out"),
            "--index-dir", str(files / "idx"), "--embedder", "hash", "--no-cache"]  # fmt: skip
    assert main(args) == 0
    (warning,) = [r.message for r in caplog.records if "gold answer" in r.message]
    assert "no question has a gold answer" in warning
    row = next(r for r in capsys.readouterr().out.splitlines() if r.startswith("| vanilla-rag"))
    assert row.startswith("| vanilla-rag | n/a | n/a | n/a |")
    summary = json.loads((files / "out" / "summary.json").read_text())["methods"]["vanilla-rag"]
    assert (summary["em"], summary["f1"], summary["accuracy"]) == (None, None, None)
    assert summary["answers_scored"] == 0 and summary["recall@5"] == 1.0  # 3 passages
    assert "token_containment" not in summary
    predictions = files / "out" / "vanilla-rag" / "predictions.jsonl"
    (prediction,) = [json.loads(x) for x in predictions.open()]
    assert prediction["f1"] is None and prediction["recall@2"] is not None


def test_bench_qa_refuses_a_set_where_only_some_questions_have_answers(files, capsys):
    unanswered = {**QUESTIONS[1], "answer": "", "answer_aliases": []}
    (files / "mixed.jsonl").write_text("\n".join(json.dumps(q) for q in [QUESTIONS[0], unanswered]))
    code = main(["bench", "qa", "--dataset", "musique", "--corpus", str(files / "corpus.json"),
                 "--questions", str(files / "mixed.jsonl"), "--method", "vanilla-rag",
                 "--llm", f"scripted:{files / 'routes.json'}", "--out", str(files / "out"),
                 "--index-dir", str(files / "idx"), "--embedder", "hash"])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "1 of 2 questions have no gold answer" in err
    assert "for all of its questions or for none" in err
    assert not (files / "idx").exists() and not (files / "out").exists()


NER_AND_RE = {
    "sa-rag.ner": json.dumps(
        [
            {
                "name": "Charles Babbage",
                "type": "PERSON",
                "aliases": ["Babbage"],
                "entity_information": "an inventor",
            },
            {"name": "London", "type": "GPE", "aliases": [], "entity_information": "a city"},
        ]
    ),
    "sa-rag.relations": json.dumps({"triples": [["Charles Babbage", "born in", "London"]]}),
}


def test_index_with_llm_extraction_estimates_stops_on_budget_and_resumes(files, capsys):
    (files / "ner.json").write_text(json.dumps(NER_AND_RE))
    base = ["index", str(files / "corpus.json"), "--out", str(files / "llm-idx"),
            "--embedder", "hash", "--extractor", "llm", "--llm",
            f"scripted:{files / 'ner.json'}", "--no-cache"]  # fmt: skip
    assert main([*base, "--dry-run"]) == 0
    estimate = json.loads(capsys.readouterr().out)
    assert estimate["stages"]["ner"]["calls"] == 3 and estimate["total"]["prompt_tokens"] > 0
    assert main([*base, "--budget-calls", "2"]) == 1
    err = capsys.readouterr().err
    assert "rerun to resume" in err
    assert main(["retrieve", str(files / "llm-idx"), "Babbage"]) == 2  # refused: half-built
    assert "incomplete" in capsys.readouterr().err.lower()
    assert main(base) == 0
    out = capsys.readouterr().out  # the same triple, stated by each of the three chunks
    assert "entities 2," in out and "relations 3," in out


#: Scripted replies for KG-Infused RAG's stages up to the passage note.
KG_ROUTES = {
    "kg-infused.triple-select": "<Charles Babbage | born in | London>",
    "kg-infused.triple-update": "None",
    "kg-infused.subgraph-summary": "Charles Babbage was born in London.",
    "kg-infused.kg-query-expansion": "Charles Babbage birthplace",
    "kg-infused.passage-note": "Babbage was born in London.",
}


def _hash_index(files) -> str:
    idx = str(files / "idx")
    assert main(["index", str(files / "corpus.json"), "--out", idx, "--embedder", "hash",
                 "--extractions", str(files / "ex.jsonl")]) == 0  # fmt: skip
    return idx


def test_ask_kg_infused_over_the_index_graph(files, capsys):
    idx = _hash_index(files)
    routes = {
        **KG_ROUTES,
        "kg-infused.knowledge-augment": "Babbage, Lovelace's collaborator, was born in London.",
        "kg-infused.answer": "London",
    }
    (files / "kg.json").write_text(json.dumps(routes))
    capsys.readouterr()
    code = main(["ask", idx, QUESTIONS[0]["question"], "--method", "kg-infused-rag",
                 "--kg", "index+inverse", "--llm", f"scripted:{files / 'kg.json'}",
                 "--no-cache", "--json"])  # fmt: skip
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["answer"] == "London"
    assert any(s["kind"] == "expanded-query" for s in out["steps"])
    code = main(["ask", idx, QUESTIONS[0]["question"], "--method", "kg-infused",
                 "--kg", "index+inverse", "--llm", f"scripted:{files / 'kg.json'}",
                 "--no-cache", "--trace"])  # fmt: skip
    trace = capsys.readouterr().out
    assert code == 0 and "kg seeds: " in trace
    assert "kg round 1: " in trace and "selected <Charles Babbage | born in | London>" in trace
    assert "kg summary: Charles Babbage was born in London." in trace
    assert "expanded query: Charles Babbage birthplace" in trace
    assert "  retrieved 3 passages for 'Charles Babbage birthplace' (dense)" in trace
    assert "  enhanced note: Babbage, Lovelace's collaborator, was born in London." in trace
    assert "{" not in trace  # every step by its type, no raw records
    # the triples the model selected are the answer's evidence
    given = "knowledge-graph triples given to the model:\n  <Charles Babbage | born in | London>"
    assert given in trace
    assert main(["ask", idx, "q", "--method", "kg-infused-rag", "--llm",
                 f"scripted:{files / 'kg.json'}", "--no-cache"]) == 2  # fmt: skip
    assert "needs a knowledge graph (--kg)" in capsys.readouterr().err


def test_a_prompt_override_missing_a_variable_is_refused_before_any_call(files, capsys):
    bad = {
        "name": "kg-infused.answer-closed",
        "version": 2,
        "variables": [],
        "messages": [{"role": "user", "content": "Answer something."}],
    }
    (files / "bad.json").write_text(json.dumps(bad))
    code = main(["ask", str(files), "q", "--method", "no-retrieval", "--llm",
                 f"scripted:{files / 'routes.json'}", "--no-cache",
                 "--prompts", str(files / "bad.json")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "it must use ['question']" in err
    good = {**bad, "variables": ["question"]}
    good["messages"] = [{"role": "user", "content": "Q: {question} A:"}]
    (files / "good.json").write_text(json.dumps(good))
    (files / "r.json").write_text(json.dumps({"kg-infused.answer-closed": "Paris"}))
    code = main(["ask", str(files), "q", "--method", "no-retrieval", "--llm",
                 f"scripted:{files / 'r.json'}", "--no-cache", "--json",
                 "--prompts", str(files / "good.json")])  # fmt: skip
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["calls"][0]["prompt"] == "kg-infused.answer-closed@2"


def test_dpo_data_pools_rounds_and_writes_trl_rows_with_filter_counts(files, capsys):
    idx = _hash_index(files)
    routes = {
        **KG_ROUTES,
        # six outputs for the first input, then the last one repeats: the second
        # input's best and worst are the same text and are filtered
        "kg-infused.knowledge-augment": [f"out {i}" for i in range(6)],
        "kg-infused.dpo-judge": json.dumps({"best_id": 2, "worst_id": 5}),
    }
    (files / "dpo.json").write_text(json.dumps(routes))
    out = files / "pairs.jsonl"
    capsys.readouterr()
    code = main(["dpo-data", idx, "--dataset", "musique", "--questions",
                 str(files / "q.jsonl"), "--limit", "1", "--kg", "index+inverse",
                 "--llm", f"scripted:{files / 'dpo.json'}", "--no-cache", "--out", str(out),
                 "--json"])  # fmt: skip
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["inputs"] == 2 and summary["rows"] == 1 and summary["identical"] == 1
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["chosen"] == [{"role": "assistant", "content": "out 2"}]
    assert row["rejected"] == [{"role": "assistant", "content": "out 5"}]
    assert QUESTIONS[0]["question"] in row["prompt"][0]["content"]
    assert json.loads(out.with_suffix(".stats.json").read_text())["pairs"] == 1
    code = main(["dpo-data", idx, "--dataset", "musique", "--questions",
                 str(files / "q.jsonl"), "--llm", "scripted:x", "--out", str(out)])  # fmt: skip
    assert code == 2
    assert "needs the knowledge graph" in capsys.readouterr().err


def test_an_unknown_method_option_is_one_line_naming_the_options(files, capsys):
    idx = _hash_index(files)
    capsys.readouterr()
    llm = f"scripted:{files / 'routes.json'}"
    code = main(["ask", idx, "q", "--method", "vanilla-rag", "--llm", llm, "--no-cache",
                 "--option", "kk=3"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2
    assert err == "error: vanilla-rag has no option 'kk'; its options are k, note\n"
    code = main(["ask", idx, "q", "--method", "vanilla-rag", "--llm", llm,
                 "--option", "k=many"])  # fmt: skip
    assert code == 2 and "k: 'many' is not a" in capsys.readouterr().err
    code = main(["ask", idx, "q", "--method", "no-retrieval", "--llm", llm,
                 "--option", "k=3"])  # fmt: skip
    assert code == 2 and "no-retrieval takes no options" in capsys.readouterr().err


@pytest.mark.parametrize("question", ["", "   \n"])
def test_an_empty_question_is_refused_before_any_model(files, capsys, monkeypatch, question):
    def no_model(*args, **kwargs):
        raise AssertionError("a model was constructed")

    monkeypatch.setattr("quillian.engine.engine.LLMSession", no_model)
    missing = files / "no-such-routes.json"  # would fail if read
    code = main(["ask", str(files / "no-index"), question, "--method", "no-retrieval",
                 "--llm", f"scripted:{missing}", "--no-cache"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "the question is empty" in err
    assert "no-such-routes" not in err and "no-index" not in err


def test_model_flags_open_the_engine_from_the_environment(tmp_path, monkeypatch):
    from quillian.cli.flags import MethodFlags

    monkeypatch.delenv("QUILLIAN_LLM_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("QUILLIAN_LLM_CACHE", str(tmp_path / "c.sqlite"))
    monkeypatch.setenv("QUILLIAN_EMBEDDING_CACHE", str(tmp_path / "e.sqlite"))
    flags = MethodFlags(llm="openai:m", kg="index", prompts=[tmp_path / "p.json"])
    assert flags.engine_options() == {
        "llm": "openai:m",
        "api_key": "sk-test",
        "cache_path": tmp_path / "c.sqlite",
        "prompt_overrides": (tmp_path / "p.json",),
        "concurrency": 4,
        "embedding_cache": tmp_path / "e.sqlite",
        "kg": "index",
        "max_question_chars": 4000,
    }
    assert MethodFlags(no_cache=True).engine_options()["embedding_cache"] is None
    monkeypatch.setenv("QUILLIAN_LLM_API_KEY", "q-key")
    assert MethodFlags().engine_options()["api_key"] == "q-key"
    assert MethodFlags(cache=tmp_path / "x").cache_path() == tmp_path / "x"
    assert MethodFlags(cache=tmp_path / "x", no_cache=True).cache_path() is None
    monkeypatch.delenv("QUILLIAN_LLM_CACHE")
    default = MethodFlags().cache_path()
    assert default is not None
    assert default.name == "llm-responses.sqlite" and default.parent.name == "quillian"
    options = MethodFlags(option=["k=4", "note=false"]).method_options("vanilla-rag")
    assert options == {"k": 4, "note": False}


def test_bench_qa_reports_the_share_of_prompt_tokens_a_local_model_reused(
    files, capsys, monkeypatch
):
    """A backend with a prefix cache (the local model) gets ``prompt_reuse_share`` per
    method: the tokens it took from the cache over those it was given during that
    method only."""
    from quillian.components.llm import spec as spec_module
    from quillian.components.llm.prefix_cache import PrefixStats
    from quillian.components.llm.scripted import ScriptedChatModel

    class Reusing(ScriptedChatModel):
        prefix_cache = SimpleNamespace(stats=PrefixStats())

        async def chat(self, messages, **kwargs):
            stats = self.prefix_cache.stats
            stats.prompt_tokens += 100
            stats.reused_tokens += 25 if kwargs.get("prompt", "").startswith("sa-rag") else 50
            return await super().chat(messages, **kwargs)

    monkeypatch.setattr(spec_module, "_scripted", lambda path: Reusing(ROUTES))
    out = files / "out"
    assert main(["bench", "qa", "--dataset", "musique", "--corpus", str(files / "corpus.json"),
                 "--questions", str(files / "q.jsonl"), "--method", "vanilla-rag,sa-rag",
                 "--llm", "scripted:routes.json", "--out", str(out), "--index-dir",
                 str(files / "idx"), "--extractions", str(files / "ex.jsonl"), "--embedder",
                 "hash", "--no-cache", "--json"]) == 0  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert summary["vanilla-rag"]["prompt_reuse_share"] == 0.5
    assert summary["sa-rag"]["prompt_reuse_share"] == 0.25
