"""The page of the local model's backends: each dtype's load time, prompt and
generation speed, memory and agreement with float32, as ``research/llm_local.py``
measured them.

    python research/llm_local_page.py --results docs/llm-local.json --out /tmp/llm-local.md \
        [--run J]
    quillian bench report --no-runs --section /tmp/llm-local.md --section-group "Local model"

``J`` is the JSON ``python research/llm_local.py --json`` printed, with the command that
produced it in ``J.cmd`` (or ``J.json.cmd``) beside it; it replaces the run recorded in
``--results``, and the page is written from that file as a section (markdown starting
with its ``## `` title) for ``quillian bench report --section``. The backends' speeds are
a study, not a benchmark a user of the package runs, so their page is drawn here and not
by ``quillian bench report``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from quillian.bench.report import with_command
from quillian.errors import InputError

__all__ = ["main", "render"]

TITLE = "Local model backends"
#: The command of a run recorded without one (the first, before ``--run`` took a command).
COMMAND = "python research/llm_local.py --json"


def render(run: dict[str, Any]) -> str:
    """The section's markdown: one row per dtype of the recorded run."""
    rows = [
        f"| {r['dtype']} | {r['load_s']} | {r['prompt_tok_s']} | {r['gen_tok_s']} | "
        f"{r['peak_rss_mb']} | {r['same_greedy_as']} | {r.get('next_token_agreement', '')} |"
        for r in run["results"]
    ]
    machine, first = run["machine"], run["results"][0]
    parts = [
        f"## {TITLE}",
        "",
        "Rendered by `python research/llm_local_page.py` from `docs/llm-local.json`.",
        "",
        f"`{run.get('_command', COMMAND)}`: Qwen2.5-Coder-0.5B-Instruct Q4_K_M "
        f"through transformers, a {first['prompt_tokens']:,}-token prompt, "
        f"{first['new_tokens']} new tokens, median of 3, "
        f"{machine['cpus']} threads ({machine['cpu_capability']}). "
        "`int8` holds weights per output channel and activations per token in int8; "
        "`int8-per-call` (the baseline) is torch's dynamic quantization, one activation "
        "scale per call, which `local-int8` used before. Next-token agreement: the share "
        "of prompt positions where the most likely next token is float32's.",
        "",
        "| dtype | load s | prompt tokens/s | generated tokens/s | peak RSS MB | "
        "greedy answers equal to float32's | next-token agreement |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        "llama-cpp-python was not built (a 14-22 minute source build here); the figures "
        "measured for it on this kind of machine (../shared/DEPENDENCIES.md) are a 0.6 s "
        "load, 11-13 generated tokens/s and about 1.3 s for a 100-token prompt.",
    ]
    return "\n".join(parts) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("docs/llm-local.json"))
    parser.add_argument("--out", type=Path, required=True, help="the section file to write")
    parser.add_argument(
        "--run", type=Path, metavar="JSON", help="JSON from python research/llm_local.py --json"
    )
    args = parser.parse_args(argv)
    if args.run is None and not args.results.exists():
        parser.error(f"{args.results}: no run recorded; give one with --run JSON")
    try:
        run: dict[str, Any] = (
            with_command(args.run)
            if args.run
            else json.loads(args.results.read_text(encoding="utf-8"))
        )
    except InputError as exc:
        parser.error(str(exc))
    args.out.write_text(render(run), encoding="utf-8")
    args.results.write_text(json.dumps(run, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
