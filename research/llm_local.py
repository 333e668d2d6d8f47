"""Benchmark the local chat model (Qwen2.5-Coder-0.5B-Instruct Q4_K_M through transformers).

Run ``python research/llm_local.py`` (add ``--json`` for one JSON object). Each
dtype is measured in a fresh subprocess, so load time and peak memory are its own:

* ``load_s``: :meth:`LocalChatModel.load` (imports, GGUF parsing, dequantisation, or
  reading the weights an earlier load kept: ``loaded_from`` says which; a dtype ending
  in ``@gguf`` always reads the GGUF file), with the GGUF already assembled in the cache
  (``assemble_s`` is the assembly, if it ran);
* ``prompt_tok_s``: prompt processing, a ~1,000-token chat prompt run through
  ``generate(max_new_tokens=1)``, median of ``--repeats``;
* ``gen_tok_s``: decoding speed, ``(n - 1) / (t(n) - t(1))`` for ``n`` = ``--new-tokens``
  forced new tokens after a short prompt, median of ``--repeats``;
* ``peak_rss_mb``: the subprocess's peak resident set (``ru_maxrss``);
* ``greedy``: greedy answers to a few fixed prompts through :meth:`LocalChatModel.chat`;
  ``same_greedy_as`` counts how many match the first dtype's word for word;
* ``next_token_agreement``: the share of prompt positions (the long prompt and the
  greedy prompts) where the dtype's most likely next token is the first dtype's.

Measured on a 2-core AMD EPYC with AVX-512 (bfloat16 instructions, no AMX), torch 2.13
CPU, transformers 5.23, default arguments; ``python research/llm_local.py --dtypes
float32,int8,int8-per-call,bfloat16`` (``int8-per-call`` is the int8 Quillian used
before, torch's dynamic quantization with one activation scale per call, kept as the
baseline row)::

    dtype           load_s  prompt_tok_s  gen_tok_s  peak_rss_mb  same greedy  next-token agreement
    float32           40.0         217.3       6.81         3822  4/4          1.000
    int8              40.7         575.8      23.55         4805  2/4          0.966
    int8-per-call     46.5         619.6      30.17         5942  1/4          0.683
    bfloat16          37.7         419.6      13.40         2976  3/4          0.988

(On the 2-core AVX2 machines of earlier runs bfloat16 read prompts at 28 tokens/s: it
needs the CPU's bfloat16 instructions.) float32 is the default: its greedy answers are
the reference. int8 (spec ``local-int8``: int8 weights per output channel, activations
per token, :mod:`quillian.components.llm.quantize`) is the fastest that stays close to
float32, and is what the QA benchmark uses. Most of a load from the GGUF file is
transformers parsing its metadata three times (tokenizer, config, weights) in pure
Python, and dequantising; since the first load keeps the dequantised weights
(:mod:`quillian.components.llm.converted`), later loads read those in 3-4 s (the
``@gguf`` rows time the old load; ``docs/benchmarks.md``). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from quillian.components.llm.base import ChatMessage, Decoding
from quillian.components.llm.local import LocalChatModel, bundled_model_path

__all__ = ["GREEDY_PROMPTS", "long_prompt", "main", "measure"]

logger = logging.getLogger(__name__)

GREEDY_PROMPTS = (
    "The capital of France is Paris. Berlin is the capital of Germany. "
    "What is the capital of France? Answer in one word.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Marie Curie was born in Warsaw in 1867. She won two Nobel Prizes. "
    "Where was Marie Curie born, and how many Nobel Prizes did she win?",
    "List three uses of a knowledge graph in retrieval-augmented generation.",
)
#: The baseline row: float32 weights quantized by torch's dynamic quantization.
PER_CALL_INT8 = "int8-per-call"
#: int8 with its product kernel named (``int8`` alone: the faster one on this CPU).
INT8_KERNELS = ("int8-int", "int8-float")
#: A dtype ending so reads the GGUF file, neither reading nor keeping the dequantised
#: weights (``float32@gguf``): the load as it was before they were kept.
FROM_GGUF = "@gguf"
_NAMES = ("Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "John", "Radia")
_CITIES = ("Paris", "Lyon", "Turin", "Leeds", "Porto", "Graz", "Ghent", "Bergen", "Cork")
_THINGS = ("compiler", "database", "theorem", "protocol", "library", "museum", "bridge")


def long_prompt(tokenizer: Any, n_tokens: int, seed: int = 0) -> list[dict[str, str]]:
    """A chat whose templated prompt has about ``n_tokens`` tokens: synthetic facts and a
    question, as a retrieval-augmented answer prompt would look."""
    rng = random.Random(seed)
    facts = " ".join(
        f"{rng.choice(_NAMES)} built a {rng.choice(_THINGS)} in {rng.choice(_CITIES)} "
        f"in {rng.randint(1800, 2020)}."
        for _ in range(n_tokens // 8)
    )
    question = "\n\nQuestion: who built a bridge in Porto? Answer briefly."
    overhead = len(_encode(tokenizer, [{"role": "user", "content": question}]))
    ids = tokenizer(facts, add_special_tokens=False)["input_ids"][: max(n_tokens - overhead, 1)]
    context = tokenizer.decode(ids)
    return [{"role": "user", "content": "Context: " + context + question}]


def _encode(tokenizer: Any, chat: list[dict[str, str]]) -> Any:
    return tokenizer.apply_chat_template(
        chat, add_generation_prompt=True, return_tensors="pt", return_dict=True
    )["input_ids"]


def _timed(fn: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(
    dtype: str,
    *,
    threads: int | None,
    prompt_tokens: int,
    new_tokens: int,
    repeats: int,
    cache_dir: Path | None,
) -> dict[str, Any]:
    """Every figure for one dtype, in this process (see the module doc)."""
    import torch

    start = time.perf_counter()
    bundled_model_path(cache_dir)
    assemble_s = time.perf_counter() - start
    name, from_gguf = dtype.removesuffix(FROM_GGUF), dtype.endswith(FROM_GGUF)
    baseline = name == PER_CALL_INT8
    kernel = name.removeprefix("int8-") if name in INT8_KERNELS else None
    model = LocalChatModel(
        dtype="float32" if baseline else "int8" if kernel else name,  # type: ignore[arg-type]
        threads=threads,
        cache_dir=cache_dir,
        int8_kernel=kernel,  # type: ignore[arg-type]
        keep_converted=not from_gguf,
    )
    start = time.perf_counter()
    model.load_sync()
    if baseline:
        _quantize_per_call(model)
    load_s = time.perf_counter() - start
    rss_after_load = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    hf, tok = model.hf_model, model.tokenizer
    pad = tok.pad_token_id

    def generate(ids: Any, n: int) -> None:
        with torch.inference_mode():
            hf.generate(
                input_ids=ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=n,
                min_new_tokens=n,
                do_sample=False,
                pad_token_id=pad,
            )

    long_ids = _encode(tok, long_prompt(tok, prompt_tokens))
    short_ids = _encode(tok, [{"role": "user", "content": GREEDY_PROMPTS[1]}])
    logger.info("%s: warm-up", dtype)
    generate(short_ids, 2)
    logger.info("%s: prompt processing, %d tokens", dtype, long_ids.shape[1])
    prefill_s = _timed(lambda: generate(long_ids, 1), repeats)
    logger.info("%s: generation, %d new tokens", dtype, new_tokens)
    first_s = _timed(lambda: generate(short_ids, 1), repeats)
    gen_s = _timed(lambda: generate(short_ids, new_tokens), repeats)
    logger.info("%s: greedy answers", dtype)
    greedy = [_greedy(model, text) for text in GREEDY_PROMPTS]
    logger.info("%s: next-token predictions", dtype)
    prompts = [long_ids] + [_encode(tok, [{"role": "user", "content": t}]) for t in GREEDY_PROMPTS]
    with torch.inference_mode():
        next_tokens = [hf(input_ids=ids).logits[0].argmax(-1).tolist() for ids in prompts]
    return {
        "dtype": dtype,
        "threads": torch.get_num_threads(),
        "assemble_s": round(assemble_s, 2),
        "load_s": round(load_s, 1),
        "loaded_from": model.loaded_from,
        "rss_after_load_mb": round(rss_after_load),
        "prompt_tokens": int(long_ids.shape[1]),
        "prompt_s": round(prefill_s, 3),
        "prompt_tok_s": round(long_ids.shape[1] / prefill_s, 1),
        "new_tokens": new_tokens,
        "gen_s": round(gen_s, 3),
        "gen_tok_s": round((new_tokens - 1) / (gen_s - first_s), 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "greedy": greedy,
        "next_tokens": next_tokens,
    }


def _quantize_per_call(model: LocalChatModel) -> None:
    """The int8 of Quillian until 2026-11: torch's dynamic quantization, one activation
    scale per call (deprecated in torch), kept here only as the baseline row."""
    import warnings

    import torch

    loaded = model._ensure()  # the bench swaps the loaded network; nothing else does
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loaded.model = torch.ao.quantization.quantize_dynamic(
            loaded.model, {torch.nn.Linear}, dtype=torch.qint8
        )


def _agreement(tokens: list[list[int]], reference: list[list[int]]) -> float:
    """Share of prompt positions where ``tokens`` (a dtype's greedy next token at each
    position of each prompt) equal ``reference``'s."""
    pairs = [
        (a, b)
        for mine, theirs in zip(tokens, reference, strict=True)
        for a, b in zip(mine, theirs, strict=True)
    ]
    return round(sum(a == b for a, b in pairs) / len(pairs), 4)


def _greedy(model: LocalChatModel, text: str) -> str:
    import asyncio

    decoding = Decoding(temperature=0.0, max_tokens=48)
    return asyncio.run(model.chat([ChatMessage("user", text)], decoding=decoding)).text


def _run_child(dtype: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--one", dtype]
    command += ["--prompt-tokens", str(args.prompt_tokens), "--new-tokens", str(args.new_tokens)]
    command += ["--repeats", str(args.repeats)]
    if args.threads:
        command += ["--threads", str(args.threads)]
    if args.cache_dir is not None:
        command += ["--cache-dir", str(args.cache_dir)]
    logger.info("measuring %s in a subprocess", dtype)
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _machine() -> dict[str, Any]:
    import torch
    import transformers

    return {
        "cpus": os.cpu_count(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }


def _table(results: list[dict[str, Any]]) -> str:
    columns = (
        "dtype",
        "load_s",
        "loaded_from",
        "prompt_tok_s",
        "gen_tok_s",
        "peak_rss_mb",
        "same_greedy_as",
        "next_token_agreement",
    )
    lines = ["  ".join(f"{c:>14}" for c in columns)]
    for row in results:
        lines.append("  ".join(f"{row.get(c, '')!s:>14}" for c in columns))
    return "\n".join(lines)


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python research/llm_local.py", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--dtypes",
        default=f"float32,bfloat16,int8,{PER_CALL_INT8}",
        help=f"comma-separated dtypes; {PER_CALL_INT8}: torch's dynamic int8, the old "
        f"baseline; {' and '.join(INT8_KERNELS)}: int8 with its product kernel named; "
        f"any of them ending in {FROM_GGUF}: read from the GGUF file, not the weights "
        "kept by an earlier load",
    )
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--prompt-tokens", type=int, default=1000, help="long prompt length")
    parser.add_argument("--new-tokens", type=int, default=100, help="tokens generated")
    parser.add_argument("--repeats", type=int, default=3, help="timed runs (median)")
    parser.add_argument("--cache-dir", type=Path, default=None, help="model cache directory")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Command-line entry point: measure each dtype and print a table or JSON."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    args = _parse(argv)
    if args.one is not None:
        result = measure(
            args.one,
            threads=args.threads or None,
            prompt_tokens=args.prompt_tokens,
            new_tokens=args.new_tokens,
            repeats=args.repeats,
            cache_dir=args.cache_dir,
        )
        print(json.dumps(result))
        return
    results = [_run_child(dtype, args) for dtype in args.dtypes.split(",")]
    reference, reference_tokens = results[0]["greedy"], results[0]["next_tokens"]
    for row in results:
        same = sum(a == b for a, b in zip(row["greedy"], reference, strict=True))
        row["same_greedy_as"] = f"{same}/{len(reference)} {results[0]['dtype']}"
        row["next_token_agreement"] = _agreement(row.pop("next_tokens"), reference_tokens)
    if args.json:
        print(json.dumps({"machine": _machine(), "results": results}, indent=2))
    else:
        print(_table(results))
        for row in results:
            print(f"\n{row['dtype']} greedy answers:")
            for text in row["greedy"]:
                print(f"  {text[:120]!r}")


if __name__ == "__main__":
    main()
