"""KAG's planner with and without its stop rule, on the same questions and model.

    python research/kag_plans.py --dataset hotpotqa \\
        --questions ../shared/bench/hotpotqa/questions.json --llm local-int8 --limit 20 --json

Each question's first-round plan prompt (the shipped open-domain schema) is decoded
twice, greedy and held to the plan grammar (``--steps`` steps): once free, once with
the plan's stop rule (:data:`~quillian.components.kag.tasks.PLAN_STOP`), which ends a
plan before its first step repeating an earlier one. The two arms alternate which goes
first, so neither gains more from the other's reused prompt prefix. Reported: tokens
written and seconds of each arm with the ratio stopped/free and its bootstrap 95%
interval (questions resampled in pairs), how many free plans repeat a step, and
whether every stopped plan equals its free plan cut at the same place (it must: the
decoding is greedy). No response cache is used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from quillian.components.kag.logic_form import first_repeat, plan_grammar
from quillian.components.kag.schema import default_schema
from quillian.components.kag.tasks import PLAN_STOP
from quillian.components.llm.base import ChatModel, Decoding
from quillian.components.llm.spec import LLMSession
from quillian.components.llm.stops import cut_reply
from quillian.components.prompts.kag import PLAN
from quillian.eval.datasets import Dataset, load_questions
from quillian.eval.stats import ratio

__all__ = ["main", "run"]


async def _decode(model: ChatModel, messages: Any, decoding: Decoding) -> dict[str, Any]:
    start = time.perf_counter()
    reply = await model.chat(messages, prompt="kag.plan@1", decoding=decoding)
    return {
        "text": reply.text,
        "tokens": reply.usage.completion_tokens,
        "seconds": time.perf_counter() - start,
    }


async def run(
    llm: str, dataset: Dataset, questions: Path, limit: int, steps: int = 8
) -> dict[str, Any]:
    """Both arms over the first ``limit`` questions; one JSON-able dict."""
    schema = default_schema()
    free = Decoding(max_tokens=512, grammar=plan_grammar(schema.entity_types, steps))
    stopped = replace(free, stop=PLAN_STOP)
    rows: list[dict[str, Any]] = []
    async with LLMSession(llm) as session:
        for n, question in enumerate(load_questions(dataset, questions)[:limit]):
            messages = PLAN.render(schema=schema.prompt_types(), question=question.question)
            arms = [("free", free), ("stopped", stopped)]
            out = {
                name: await _decode(session.backend, messages, decoding)
                for name, decoding in (arms if n % 2 == 0 else arms[::-1])
            }
            rows.append(
                {
                    "id": question.id,
                    "free_tokens": out["free"]["tokens"],
                    "stopped_tokens": out["stopped"]["tokens"],
                    "free_seconds": round(out["free"]["seconds"], 3),
                    "stopped_seconds": round(out["stopped"]["seconds"], 3),
                    "free_repeats": first_repeat(out["free"]["text"]) is not None,
                    "same_plan": cut_reply(PLAN_STOP, out["stopped"]["text"])
                    == cut_reply(PLAN_STOP, out["free"]["text"]),
                }
            )
    return {"questions": len(rows), **_summary(rows), "per_question": rows}


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {
        "free_plans_repeating": sum(r["free_repeats"] for r in rows),
        "same_plan": sum(r["same_plan"] for r in rows),
    }
    for what in ("tokens", "seconds"):
        free = [float(r[f"free_{what}"]) for r in rows]
        stopped = [float(r[f"stopped_{what}"]) for r in rows]
        value, (low, high) = ratio(stopped, free)
        out[what] = {
            "free": round(sum(free), 2),
            "stopped": round(sum(stopped), 2),
            "ratio": round(value, 3),
            "ratio_ci": [round(low, 3), round(high, 3)],
        }
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", required=True, choices=["musique", "hotpotqa", "2wiki"])
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--llm", default="local-int8", help="an LLM spec (default local-int8)")
    parser.add_argument("--limit", type=int, default=20, help="the first N questions")
    parser.add_argument("--steps", type=int, default=8, help="the plan grammar's step cap")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    result = asyncio.run(run(args.llm, args.dataset, args.questions, args.limit, args.steps))
    if args.json:
        print(json.dumps(result))
        return
    for what in ("tokens", "seconds"):
        r = result[what]
        print(f"{what}: free {r['free']}, stopped {r['stopped']}, {r['ratio']} {r['ratio_ci']}")
    print(
        f"free plans repeating a step: {result['free_plans_repeating']}/{result['questions']}; "
        f"stopped plan = free plan cut: {result['same_plan']}/{result['questions']}"
    )


if __name__ == "__main__":
    main()
