"""The dequantised weights kept after a first load: saved whole or not at all, read back
as the same model, and a damaged copy removed rather than used."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from quillian.components.llm.converted import (  # noqa: E402
    MARKER,
    converted_dir,
    file_sha256,
    load_converted,
    save_converted,
)
from quillian.testing.tiny_qwen import tiny_qwen2  # noqa: E402

#: A byte-level vocabulary of single characters (no merges), as Qwen2's tokenizer reads.
CHARS = ["<|endoftext|>", "<|im_end|>", "Ġ", *sorted(set("thecapitaloffranceis"))]
SOURCE = {"gguf": "tiny.gguf", "sha256": "ab" * 32}


@pytest.fixture(scope="module")
def tiny() -> tuple[Any, Any]:
    model = tiny_qwen2(len(CHARS), context=64)
    tokenizer = transformers.Qwen2Tokenizer(
        vocab={c: i for i, c in enumerate(CHARS)},
        merges=[],
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
    )
    tokenizer.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    return model, tokenizer


def logits(model: Any, tokenizer: Any) -> Any:
    ids = tokenizer("the capital of france is", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        return model(input_ids=ids).logits


def test_saved_weights_load_back_as_the_same_model(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    model, tokenizer = tiny
    directory = converted_dir(tmp_path, Path("/models/tiny.gguf"), SOURCE["sha256"])
    assert directory.parent == tmp_path / "converted"
    assert directory.name.startswith("tiny-" + "ab" * 8 + "-transformers-")
    assert load_converted(directory, torch.float32) is None  # nothing kept yet
    assert save_converted(directory, model, tokenizer, SOURCE)
    marker = json.loads((directory / MARKER).read_text())
    assert marker["sha256"] == SOURCE["sha256"] and marker["transformers"]
    assert "quantization_config" not in json.loads((directory / "config.json").read_text())
    assert [p.name for p in tmp_path.joinpath("converted").iterdir()] == [directory.name]
    found = load_converted(directory, torch.float32)
    assert found is not None
    again, again_tokenizer = found
    assert torch.equal(logits(again, again_tokenizer), logits(model, tokenizer))
    assert again_tokenizer.chat_template == tokenizer.chat_template
    assert again_tokenizer.eos_token_id == tokenizer.eos_token_id
    narrow = load_converted(directory, torch.bfloat16)
    assert narrow is not None and next(narrow[0].parameters()).dtype == torch.bfloat16


def test_a_second_save_of_the_same_weights_leaves_the_first(
    tiny: tuple[Any, Any], tmp_path: Path
) -> None:
    model, tokenizer = tiny
    directory = tmp_path / "converted" / "tiny"
    assert save_converted(directory, model, tokenizer, SOURCE)
    before = (directory / MARKER).stat().st_mtime_ns
    assert not save_converted(directory, model, tokenizer, SOURCE)  # another process won
    assert (directory / MARKER).stat().st_mtime_ns == before
    assert [p.name for p in directory.parent.iterdir()] == ["tiny"]  # no temporary left


def test_a_directory_without_its_marker_is_not_read(tiny: tuple[Any, Any], tmp_path: Path) -> None:
    model, tokenizer = tiny
    directory = tmp_path / "converted" / "tiny"
    assert save_converted(directory, model, tokenizer, SOURCE)
    (directory / MARKER).unlink()  # as a save cut off before its last file
    assert load_converted(directory, torch.float32) is None
    assert directory.is_dir()  # not ours to remove: it may be being written


def test_damaged_weights_are_removed_and_not_used(
    tiny: tuple[Any, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    model, tokenizer = tiny
    directory = tmp_path / "converted" / "tiny"
    assert save_converted(directory, model, tokenizer, SOURCE)
    weights = directory / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # truncated
    assert load_converted(directory, torch.float32) is None
    assert not directory.exists()
    assert "unusable converted weights" in caplog.text


def test_nothing_is_kept_on_a_short_disk_or_for_narrow_weights(
    tiny: tuple[Any, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, tokenizer = tiny
    directory = tmp_path / "converted" / "tiny"
    narrow = transformers.Qwen2ForCausalLM(model.config).to(torch.bfloat16)
    assert not save_converted(directory, narrow, tokenizer, SOURCE)
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda _: usage._replace(free=1000))
    assert not save_converted(directory, model, tokenizer, SOURCE)
    assert list(directory.parent.iterdir()) == []


def test_file_sha256_reads_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f.gguf"
    path.write_bytes(b"GGUF" + bytes(10))
    assert file_sha256(path) == hashlib.sha256(b"GGUF" + bytes(10)).hexdigest()
