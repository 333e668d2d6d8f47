"""The ``kags`` method: options, the generator's context and the answer path, with a
scripted model over the tiny KAGS index of :mod:`quillian.testing.kags`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from quillian.components.generation.kags import format_hop_context, parse_kags_answer
from quillian.components.llm.base import ChatMessage
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.components.retrieval.base import UsedRelation
from quillian.engine import Engine
from quillian.errors import ConfigError
from quillian.methods.base import AnswerResult
from quillian.methods.kags.pipeline import NO_CONTEXT, KAGSConfig
from quillian.methods.table import method_spec
from quillian.server.views import citations_view
from quillian.testing.kags import S_ALPHA, S_KAPPA, S_LAMBDA, S_MU, kags_index


@pytest.fixture(scope="module")
def location(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kags-method")
    kags_index(path)
    return path


def answer(
    location: Path, reply: str = "Answer: Mu", retriever: str | None = None, **options: Any
) -> tuple[AnswerResult, ScriptedChatModel]:
    model = ScriptedChatModel({"kags.answer": reply})

    async def go() -> AnswerResult:
        async with Engine.open(location, llm=model, embedder="keyword") as engine:
            return await engine.answer("alpha beta", "kags", retriever=retriever, **options)

    return asyncio.run(go()), model


def context_of(model: ScriptedChatModel) -> str:
    [call] = model.calls
    assert call.prompt == "kags.answer@1"
    user: Sequence[ChatMessage] = [m for m in call.messages if m.role == "user"]
    return user[-1].content


def test_the_generator_reads_relations_by_hop_and_their_source_sentences(location: Path) -> None:
    result, model = answer(location, 'The context says: Alpha.\nAnswer: "Mu"\nextra')
    assert result.answer == "Mu" and not result.error
    prompt = context_of(model)
    assert prompt.startswith("Context:\nHop 0 (matched triples):\n  links:\n")
    assert "    • Alpha → Gamma [S1]" in prompt
    assert "Hop 1:" in prompt and "Hop 2:\n  meets:\n    • Lambda → Mu [S4]" in prompt
    for sentence in (S_ALPHA, S_KAPPA, S_LAMBDA, S_MU):
        assert sentence in prompt
    assert prompt.endswith("Question: alpha beta\nAnswer:")
    # the kept relations and their supporting passages are the evidence; the model
    # read only the relations
    assert not result.evidence.passages_read
    assert result.evidence.as_dict()["passages_read"] is False
    assert citations_view(result).passages_read is False  # the HTTP API says so too
    assert {r.hop for r in result.evidence.relations} == {0, 1, 2}
    assert [p.title for p in result.evidence.passages] == ["Alpha", "Kappa", "Lambda"]
    assert [s.kind for s in result.steps] == ["retrieval"]


def test_options_reach_retrieval_and_the_sentence_switch(location: Path) -> None:
    _, model = answer(location, h=0, sentences=False)
    prompt = context_of(model)
    assert "Hop 1" not in prompt and "[S" not in prompt and S_ALPHA not in prompt
    assert "• Alpha → Gamma" in prompt
    _, model = answer(location, tau=0.9, keep_best=False)  # the authors' code
    assert f"Context:\n{NO_CONTEXT}\n" in context_of(model)
    _, model = answer(location, tau=0.9, h=0)  # the hit with the closest sentence is kept
    assert "• Alpha → Gamma [S1]" in context_of(model)
    _, model = answer(location, k=1, tau=0.0, h=0)
    assert context_of(model).count("•") == 1


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"k": 0}, "k must be in"),
        ({"tau": 1.2}, "tau must be in"),
        ({"h": -1}, "h must be in"),
        ({"h": 11}, "h must be in"),
        ({"max_nodes_per_hop": 0}, "max_nodes_per_hop"),
        ({"bogus": 1}, "unknown option"),
    ],
)
def test_out_of_range_options_are_refused(
    location: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        answer(location, **options)


def test_the_method_needs_the_kags_retriever_and_declares_its_stage(location: Path) -> None:
    with pytest.raises(ConfigError, match="needs the kags retriever"):
        answer(location, retriever="dense")
    spec = method_spec("kags")
    assert spec.retriever == "kags" and [s.name for s in spec.index_stages] == ["kags"]
    assert {o.name for o in spec.options} >= {"k", "tau", "h", "sentences"}
    assert KAGSConfig() == KAGSConfig(k=7, tau=0.5, h=2)


def test_context_groups_by_predicate_caps_lines_and_numbers_sentences_once() -> None:
    rels = [
        UsedRelation(i, f"E{i}", "p", f"F{i}", "", 0.5, "Shared sentence.", 1) for i in range(12)
    ]
    rels.append(UsedRelation(99, "A", "q", "B", "", 0.9, "Own sentence.", 0))
    text = format_hop_context(rels)
    assert text.index("Hop 0") < text.index("Hop 1")
    assert text.count("[S2]") == 10 + 1  # ten lines shown for p, and the sentence list
    assert "[S1] Own sentence." in text and "• E10" not in text
    assert "Total unique entities: 26; relations: 13" in text
    assert format_hop_context([]) == ""


def test_the_answer_is_the_first_line_after_the_last_answer_label() -> None:
    assert parse_kags_answer("Answer: London\nmore") == "London"
    assert parse_kags_answer("reasoning. Answer: no. Answer: 'Paris'") == "'Paris'"
    assert parse_kags_answer('"Paris"') == "Paris"
