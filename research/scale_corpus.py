"""Build the scale corpus: about 100k passages nobody on this project wrote.

Run ``python research/scale_corpus.py OUT_DIR [--bench DIR] [--wordnet DIR]``.
It reads the three bench corpora (MuSiQue, HotpotQA, 2WikiMultihopQA under
``../shared/bench``, read where they lie, never copied into the repository) and one
passage per WordNet synset from Debian's ``wordnet-base`` (``/usr/share/wordnet``:
title, the synset's lemmas; text, its gloss), shuffles them with a fixed seed so every
prefix mixes the sources, and writes into ``OUT_DIR``:

* ``scale-2k.jsonl``, ``scale-20k.jsonl``, ``scale-100k.jsonl``: the first 2k, 20k and
  100k passages, one ``{"title", "text"}`` object a line (what ``quillian index``
  reads), each a prefix of the next;
* ``scale-20mb.txt``: the passages (``title. text``, one paragraph each, a blank line
  between) in the same order, as one plain-text file of 20 MB: all 126k passages make
  15.8 MB, so the last 4.2 MB start again from the first passage;
* ``manifest.json``: the counts per source, the seed and the files' sizes.

Licences: MuSiQue CC BY 4.0, HotpotQA CC BY-SA 4.0, 2WikiMultihopQA Apache 2.0,
WordNet 3.0 the WordNet licence (BSD-like).
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "PREFIXES",
    "Passage",
    "bench_passages",
    "main",
    "mixed",
    "parse_wordnet_line",
    "text_file_lines",
    "wordnet_passages",
    "write_corpus",
]

PREFIXES = {"2k": 2_000, "20k": 20_000, "100k": 100_000}
TEXT_BYTES = 20 * 1024 * 1024
SEED = 47
WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv")
DEFAULT_BENCH = Path("../shared/bench")


@dataclass(frozen=True)
class Passage:
    """One passage of the corpus and where it came from."""

    title: str
    text: str
    source: str


def parse_wordnet_line(line: str) -> tuple[list[str], str] | None:
    """A WordNet ``data.*`` line's lemmas (underscores as spaces, adjective markers
    such as ``(a)`` dropped) and gloss; None for the licence header and blank lines."""
    if not line.strip() or line.startswith(" "):
        return None
    head, sep, gloss = line.partition(" | ")
    fields = head.split()
    if not sep or len(fields) < 4:
        raise ValueError(f"not a WordNet data line: {line[:60]!r}")
    count = int(fields[3], 16)
    words = fields[4 : 4 + 2 * count : 2]
    lemmas = [w.split("(")[0].replace("_", " ") for w in words]
    return list(dict.fromkeys(lemmas)), gloss.strip()


def wordnet_passages(folder: Path) -> Iterator[Passage]:
    """One passage per synset of the WordNet database in ``folder``."""
    for name in WORDNET_FILES:
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"no WordNet {name} in {folder} (apt-get install wordnet-base)")
        with path.open(encoding="utf-8", errors="replace") as lines:
            for line in lines:
                parsed = parse_wordnet_line(line)
                if parsed and parsed[1]:
                    yield Passage(", ".join(parsed[0]), parsed[1], "wordnet")


def bench_passages(folder: Path) -> Iterator[Passage]:
    """The passages of the three bench corpora, in their files' order."""
    for name in ("musique", "2wiki"):
        for row in json.loads((folder / name / "corpus.json").read_text(encoding="utf-8")):
            yield Passage(row["title"], row["text"], name)
    hotpot = json.loads((folder / "hotpotqa" / "corpus.json").read_text(encoding="utf-8"))
    for title, sentences in hotpot.items():
        yield Passage(title, "".join(sentences).strip(), "hotpotqa")


def mixed(passages: Iterable[Passage], seed: int = SEED) -> list[Passage]:
    """The passages with empty texts and repeated (title, text) pairs dropped, shuffled
    with ``seed`` (the same input gives the same order)."""
    seen: set[tuple[str, str]] = set()
    kept = []
    for p in passages:
        if p.text and (p.title, p.text) not in seen:
            seen.add((p.title, p.text))
            kept.append(p)
    random.Random(seed).shuffle(kept)
    return kept


def text_file_lines(passages: Sequence[Passage], limit: int) -> Iterator[str]:
    """Paragraphs (``title. text`` and a blank line) while their UTF-8 size stays
    within ``limit`` bytes; past the last passage they start again from the first."""
    size = 0
    for p in itertools.cycle(passages) if passages else ():
        paragraph = f"{p.title}. {p.text}\n\n"
        size += len(paragraph.encode("utf-8"))
        if size > limit:
            return
        yield paragraph


def write_corpus(
    passages: list[Passage],
    out: Path,
    prefixes: dict[str, int],
    text_bytes: int,
    seed: int = SEED,
) -> dict[str, object]:
    """Write the prefix files and the text file of ``passages`` into ``out``; returns
    the manifest (also written as ``manifest.json``)."""
    out.mkdir(parents=True, exist_ok=True)
    files: dict[str, dict[str, object]] = {}
    for label, n in prefixes.items():
        path = out / f"scale-{label}.jsonl"
        part = passages[:n]
        with path.open("w", encoding="utf-8") as f:
            for p in part:
                f.write(json.dumps({"title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
        files[path.name] = {
            "passages": len(part),
            "bytes": path.stat().st_size,
            "sources": dict(Counter(p.source for p in part)),
        }
    text = out / "scale-20mb.txt"
    with text.open("w", encoding="utf-8") as f:
        n_text = sum(1 for line in text_file_lines(passages, text_bytes) if f.write(line) >= 0)
    files[text.name] = {"paragraphs": n_text, "bytes": text.stat().st_size}
    manifest = {
        "seed": seed,
        "passages": len(passages),
        "sources": dict(Counter(p.source for p in passages)),
        "files": files,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the corpus files")
    parser.add_argument("--bench", type=Path, default=DEFAULT_BENCH, help="the bench data")
    parser.add_argument("--wordnet", type=Path, default=Path("/usr/share/wordnet"))
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    passages = mixed([*bench_passages(args.bench), *wordnet_passages(args.wordnet)], args.seed)
    manifest = write_corpus(passages, args.out, PREFIXES, TEXT_BYTES, args.seed)
    print(json.dumps(manifest, indent=2))


if __name__ == "__main__":
    main()
