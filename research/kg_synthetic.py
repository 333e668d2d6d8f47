"""Synthetic files in the Wikidata5M release format, for import benchmarks.

Shaped like the real release at any size (defaults: 4.7M entities, 21M triples, 810
relations): entity and relation alias files, a triple file with power-law degrees
(:func:`~quillian.bench.synthetic.power_law_edges`, so many entities head no triple and
the paper's preprocessing has work to do), and short descriptions (6-16 pseudo-words;
real Wikidata5M descriptions are Wikipedia abstracts, several times longer). A small
share of entities get no description. Lines are written in a shuffled entity order,
as the release's are not sorted. Seeded: the same arguments write the same files.

    python research/kg_synthetic.py --entities 200000 --triples 1000000 --out DIR
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import numpy.typing as npt

from quillian.bench.synthetic import power_law_edges
from quillian.components.kg.wikidata5m import Wikidata5MFiles

__all__ = ["pseudo_words", "synthetic_triples", "write_wikidata5m_like"]

_SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in ("a", "e", "i", "o", "u", "ay", "or")]


def pseudo_words(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct pronounceable pseudo-words of 2-4 syllables."""
    rng = np.random.default_rng(seed)
    words: dict[str, None] = {}
    while len(words) < n:
        lengths = rng.integers(2, 5, n)
        picks = rng.integers(0, len(_SYLLABLES), (n, 4))
        for length, row in zip(lengths.tolist(), picks.tolist(), strict=True):
            words["".join(_SYLLABLES[s] for s in row[:length])] = None
            if len(words) == n:
                break
    return list(words)


def write_wikidata5m_like(
    directory: str | Path,
    entities: int = 4_700_000,
    triples: int = 21_000_000,
    relations: int = 810,
    *,
    missing_descriptions: float = 0.02,
    seed: int = 0,
    chunk: int = 250_000,
) -> Wikidata5MFiles:
    """Write the four release files into ``directory`` and return their paths."""
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    vocabulary = pseudo_words(20_000, seed)
    files = Wikidata5MFiles(
        entities=root / "wikidata5m_entity.txt",
        relations=root / "wikidata5m_relation.txt",
        triples=(root / "wikidata5m_all_triplet.txt",),
        descriptions=root / "wikidata5m_text.txt",
    )
    with open(files.relations, "w", encoding="utf-8") as out:  # type: ignore[arg-type]
        for r in range(relations):
            out.write(f"P{r + 1}\t{vocabulary[r]} of\t{vocabulary[r]}\n")
    order = rng.permutation(entities)
    with (
        open(files.entities, "w", encoding="utf-8") as names,
        open(files.descriptions, "w", encoding="utf-8") as texts,
    ):
        for start in range(0, entities, chunk):
            ids = order[start : start + chunk]
            names.write(_alias_lines(ids, vocabulary, rng))
            described = ids[rng.random(len(ids)) >= missing_descriptions]
            texts.write(_description_lines(described, vocabulary, rng))
    heads, tails, rels = synthetic_triples(entities, triples, relations, seed=seed)
    with open(files.triples[0], "w", encoding="utf-8") as out:
        for start in range(0, triples, 4 * chunk):
            stop = start + 4 * chunk
            out.writelines(
                f"Q{h}\tP{r}\tQ{t}\n"
                for h, r, t in zip(
                    (heads[start:stop] + 1).tolist(),
                    (rels[start:stop] + 1).tolist(),
                    (tails[start:stop] + 1).tolist(),
                    strict=True,
                )
            )
    return files


def synthetic_triples(
    entities: int, triples: int, relations: int = 810, *, headless: float = 0.03, seed: int = 0
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int32]]:
    """``(heads, tails, relations)``: all but a ``headless`` share of the entities head
    at least one triple (as in Wikidata5M, where 5.65% of the entities lack a triple or
    a description); the other heads and the tails follow
    :func:`~quillian.bench.synthetic.power_law_edges`, so a few hubs hold most links."""
    heads, tails, rels = power_law_edges(entities, triples, relations, seed=seed)
    rng = np.random.default_rng(seed + 1)
    covered = rng.permutation(entities)[: min(triples, int(entities * (1 - headless)))]
    heads[: len(covered)] = covered
    loops = heads == tails
    tails[loops] = (tails[loops] + 1) % entities
    order = rng.permutation(triples)
    return heads[order], tails[order], rels[order]


def _alias_lines(ids: npt.NDArray[np.int64], words: list[str], rng: np.random.Generator) -> str:
    """``Q<id><TAB>name<TAB>alias...``: a two-word name with the entity number, and 0-2
    one-word aliases."""
    picks = rng.integers(0, len(words), (len(ids), 4)).tolist()
    n_aliases = rng.integers(0, 3, len(ids)).tolist()
    lines = []
    for entity, row, extra in zip((ids + 1).tolist(), picks, n_aliases, strict=True):
        aliases = [f"{words[row[0]].title()} {words[row[1]].title()} {entity}"]
        aliases += [words[w] for w in row[2 : 2 + extra]]
        lines.append(f"Q{entity}\t" + "\t".join(aliases) + "\n")
    return "".join(lines)


def _description_lines(
    ids: npt.NDArray[np.int64], words: list[str], rng: np.random.Generator
) -> str:
    picks = rng.integers(0, len(words), (len(ids), 16)).tolist()
    lengths = rng.integers(6, 17, len(ids)).tolist()
    return "".join(
        f"Q{entity}\t" + " ".join(words[w] for w in row[:length]) + ".\n"
        for entity, row, length in zip((ids + 1).tolist(), picks, lengths, strict=True)
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, default=4_700_000)
    parser.add_argument("--triples", type=int, default=21_000_000)
    parser.add_argument("--relations", type=int, default=810)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    files = write_wikidata5m_like(
        args.out, args.entities, args.triples, args.relations, seed=args.seed
    )
    print(json.dumps({"files": files.paths()}))


if __name__ == "__main__":
    main()
