"""Two question-answering runs compared question by question.

    python research/qa_compare.py runs/A/sa-rag runs/B/kag [--metrics f1,em] [--json]
    python research/qa_compare.py runs/A1/know3-rag+runs/A2/know3-rag runs/B/cot-rag

Each argument is a method's directory written by ``quillian bench qa`` (it holds
``predictions.jsonl``), or the directories of one run made in parts (``--offset``)
joined by ``+``; a question answered in two parts is refused. On the questions both
runs answered, for each metric: the mean of ``a - b`` with its paired bootstrap 95%
interval, the permutation p-value and the questions won, lost and tied
(:func:`quillian.eval.stats.paired`); then the seconds of ``a`` over those of ``b``
with their bootstrap interval (:func:`quillian.eval.stats.ratio`), how many predictions
are word for word the same, and per prompt the calls, parse failures, replies cut at
the token limit, tokens written and seconds of each run
(:func:`quillian.eval.qa.calls_by_prompt`). A metric a row lacks (a recall with no gold
passages) counts as 0 for both runs; one that no row of either run has (EM and F1 on a
set with no gold answers) is reported as ``None``, "not scored".
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from quillian.errors import InputError
from quillian.eval.qa import calls_by_prompt, no_calls
from quillian.eval.stats import paired, ratio

__all__ = ["compare", "main", "read_parts", "read_predictions"]

DEFAULT_METRICS = ("f1", "em", "accuracy", "recall@5")


def read_predictions(method_dir: Path) -> dict[str, dict[str, Any]]:
    """A run's rows by question id; a clear error when the file is missing or broken."""
    path = method_dir / "predictions.jsonl"
    rows: dict[str, dict[str, Any]] = {}
    try:
        with path.open(encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        row = json.loads(line)
                        rows[str(row["id"])] = row
                    except (json.JSONDecodeError, KeyError, TypeError) as exc:
                        why = f"not a prediction row ({exc})"
                        raise InputError(why, path=str(path), line=number) from exc
    except OSError as exc:
        raise InputError(f"cannot read predictions ({exc})", path=str(path)) from exc
    return rows


def read_parts(spec: str) -> dict[str, dict[str, Any]]:
    """The rows of a run's parts (directories joined by ``+``), each question once."""
    rows: dict[str, dict[str, Any]] = {}
    for part in spec.split("+"):
        if not part:
            raise InputError(f"an empty directory in {spec!r} (parts are joined by '+')")
        part_rows = read_predictions(Path(part))
        if twice := sorted(rows.keys() & part_rows.keys()):
            why = f"questions answered in two parts of {spec!r}, e.g. {twice[0]!r}"
            raise InputError(why, path=part)
        rows.update(part_rows)
    return rows


def compare(
    a: Path | str, b: Path | str, metrics: tuple[str, ...] = DEFAULT_METRICS
) -> dict[str, Any]:
    """Every figure of the module doc for the runs in ``a`` and ``b`` (each may be parts)."""
    rows_a, rows_b = read_parts(str(a)), read_parts(str(b))
    ids = [i for i in rows_a if i in rows_b]
    if not ids:
        raise InputError(f"{a} and {b} share no question")
    out: dict[str, Any] = {"a": str(a), "b": str(b), "questions": len(ids)}
    for metric in metrics:
        if all(rows[i].get(metric) is None for i in ids for rows in (rows_a, rows_b)):
            out[metric] = None  # e.g. F1 on a set with no gold answers
            continue
        scores = [[float(rows[i].get(metric) or 0.0) for i in ids] for rows in (rows_a, rows_b)]
        out[metric] = {
            "a": round(sum(scores[0]) / len(ids), 4),
            "b": round(sum(scores[1]) / len(ids), 4),
            "a_minus_b": paired(scores[0], scores[1]).as_dict(),
        }
    seconds = [[float(rows[i].get("seconds") or 0.0) for i in ids] for rows in (rows_a, rows_b)]
    value, (low, high) = ratio(seconds[0], seconds[1])
    out["seconds_ratio"] = {"ratio": round(value, 4), "ci": [round(low, 4), round(high, 4)]}
    out["same_predictions"] = sum(rows_a[i]["prediction"] == rows_b[i]["prediction"] for i in ids)
    prompts = [
        calls_by_prompt([c for i in ids for c in rows[i].get("calls", [])])
        for rows in (rows_a, rows_b)
    ]
    out["by_prompt"] = {
        key: {"a": prompts[0].get(key) or no_calls(), "b": prompts[1].get(key) or no_calls()}
        for key in sorted({*prompts[0], *prompts[1]})
    }
    return out


def _line(metric: str, figures: dict[str, Any] | None) -> str:
    if figures is None:
        return f"{metric}: not scored in either run (no question has it)"
    d = figures["a_minus_b"]
    return (
        f"{metric}: {figures['a']:.3f} against {figures['b']:.3f}, a - b {d['diff']:+.3f} "
        f"[{d['ci'][0]:+.3f}, {d['ci'][1]:+.3f}], p {d['p']:.3f}, "
        f"won {d['wins']} / lost {d['losses']} / tied {d['ties']}"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "a", help="a method's directory of a bench qa run (a run in parts: DIR1+DIR2)"
    )
    parser.add_argument("b", help="the method's directory it is compared with (likewise)")
    parser.add_argument("--metrics", default=",".join(DEFAULT_METRICS))
    parser.add_argument("--json", action="store_true", help="one JSON object")
    args = parser.parse_args(argv)
    try:
        result = compare(args.a, args.b, tuple(m for m in args.metrics.split(",") if m))
    except InputError as exc:
        parser.exit(2, f"error: {exc}\n")
    if args.json:
        json.dump(result, sys.stdout)
        sys.stdout.write("\n")
        return
    print(f"{result['a']} against {result['b']}, {result['questions']} questions")
    for metric in args.metrics.split(","):
        if metric:
            print(_line(metric, result[metric]))
    r = result["seconds_ratio"]
    print(f"seconds a / b: {r['ratio']:.3f} [{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]")
    print(f"same predictions: {result['same_predictions']} of {result['questions']}")
    for prompt, sides in result["by_prompt"].items():
        a, b = sides["a"], sides["b"]
        print(
            f"{prompt}: calls {a['calls']} / {b['calls']}, parse failures "
            f"{a['parse_failures']} / {b['parse_failures']}, cut at the limit {a['truncated']} / "
            f"{b['truncated']}, tokens written {a['completion_tokens']} / "
            f"{b['completion_tokens']}, seconds {a['seconds']:.0f} / {b['seconds']:.0f}"
        )


if __name__ == "__main__":
    main()
