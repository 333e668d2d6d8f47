"""A build killed with SIGKILL at random points, then resumed, equals a clean build.

The build runs in a child process (this file's ``CHILD`` script: fake extractor and
embedder, so it takes about a second) that prints each stage it enters. The test
kills it at seeded random delays spread over the length of a clean build, again and
again on the same index, so the kills land in ingestion (document batches, stored
extractions, statuses), in every stage and around the manifest writes; then it lets
one run finish and compares the index with the clean build, part by part.
"""

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import quillian
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.index import open_storage
from quillian.stores.protocols import DocStatus
from quillian.types import Document

#: Kills per test; the issue asks for at least ten.
KILLS = 12
SEED = 17
NAMESPACES = ("extraction:title-link", "embeddings")
QUERIES = ("Who taught Person 7?", "the city of Town 3", "Person 41 and Town 12")

CHILD = """
import json, sys, time
from quillian.components.chunking.chunkers import PassageChunker
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.errors import InputError
from quillian.index import DEFAULT_STAGES, build_index, delete_documents, read_manifest
from quillian.testing.extractors import TitleLinkExtractor
from quillian.types import Document

location, corpus_path, titles_path, gone = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
corpus = json.loads(open(corpus_path).read())
extractor = TitleLinkExtractor(json.loads(open(titles_path).read()))
start = time.perf_counter()

def mark(phase):
    print(phase, time.perf_counter() - start, flush=True)

class Announced:
    def __init__(self, stage):
        self.stage, self.name = stage, stage.name

    def run(self, state):
        mark(self.name)
        self.stage.run(state)

class Finishing:  # after the last stage: the cache sweep and the manifest write
    name = "finishing"

    def run(self, state):
        mark(self.name)

stages = [*(Announced(s) for s in DEFAULT_STAGES), Finishing()]
mark("ingest")
if gone:
    try:
        delete_documents(location, gone, extractor=extractor, embedder=KeywordEmbedder(),
                         stages=stages)
    except InputError:  # unknown ids: fine when an earlier run finished the delete
        if read_manifest(location)["state"] != "complete":
            raise
else:
    build_index([Document(text, title) for title, text in corpus], location,
                chunker=PassageChunker(), extractor=extractor, embedder=KeywordEmbedder(),
                stages=stages)
mark("done")
"""
#: The phases the child announces, in order; a kill targets one and lands in it or later.
PHASES = ("ingest", "graph", "embed", "bm25", "finishing")


def corpus(n=240):
    """People and towns that mention each other, so the graph has links to get right."""
    rows = []
    for i in range(n):
        if i % 3:
            text = (
                f"Person {i} was taught by Person {(i * 7) % n} in Town {i % 20}. "
                f"Person {i} later met Person {(i + 5) % n}."
            )
            rows.append((f"Person {i}", text))
        else:
            rows.append((f"Town {i // 3}", f"Town {i // 3} lies near Town {(i // 3 + 1) % 80}."))
    return rows


def run_child(location, corpus_file, gone=(), kill_in=None):
    """Run the child to its end, or kill it in a phase: ``kill_in`` is ``(phase,
    seconds)``, a kill that many seconds after the child announces ``phase``. Returns
    the seconds at which the child announced each phase it reached (``done`` when it
    finished). The extractor links the titles of the whole corpus (``titles.json``
    beside ``corpus_file``)."""
    titles = corpus_file.with_name("titles.json")
    env = {**os.environ, "PYTHONPATH": str(Path(quillian.__file__).parents[1])}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, location, str(corpus_file), str(titles), *gone],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None and child.stderr is not None
    reached = {}
    for line in child.stdout:
        phase, at = line.split()
        reached[phase] = float(at)
        if kill_in is not None and phase == kill_in[0]:
            time.sleep(kill_in[1])
            child.send_signal(signal.SIGKILL)
            break
    _, err = child.communicate(timeout=120)
    assert child.returncode in (0, -signal.SIGKILL), err
    return reached


def assert_whole(location, n):
    """Every document processed exactly once, with its one chunk."""
    with open_storage(location) as storage:
        counts = storage.status.counts()
        assert counts[DocStatus.PROCESSED] == n and sum(counts.values()) == n
        chunks = [c.id for c in storage.documents.iter_chunks()]
        assert len(chunks) == len(set(chunks)) == n
        assert storage.documents.count_documents() == n


def files(location):
    root = Path(location)
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "sqlite" not in p.name)


def kill_repeatedly(location, corpus_file, clean, rng, gone=()):
    """Kill ``KILLS`` runs, each at a random point of a phase (the phases in turn, the
    ingestion twice as often); ``clean`` holds the phase times of a clean run, whose
    lengths bound the random delays. Returns the phase each kill landed in."""
    lengths = {p: clean[n] - clean[p] for p, n in zip(PHASES, [*PHASES[1:], "done"], strict=True)}
    targets = ["ingest", *PHASES] * (KILLS // (len(PHASES) + 1) + 1)
    landed = []
    for phase in targets[:KILLS]:
        reached = run_child(location, corpus_file, gone, (phase, rng.uniform(0, lengths[phase])))
        landed.append(max(reached, key=reached.__getitem__))
    return landed


def write_corpus(directory, rows):
    """The corpus file of ``rows``; the titles the extractor links are the whole corpus's."""
    (directory / "titles.json").write_text(json.dumps([title for title, _ in corpus()]))
    path = directory / f"corpus-{len(rows)}.json"
    path.write_text(json.dumps(rows))
    return path


def test_a_build_killed_at_random_points_resumes_to_a_clean_build(
    index_location, same_index, tmp_path
):
    rows = corpus()
    corpus_file = write_corpus(tmp_path, rows)
    clean = run_child(index_location("clean"), corpus_file)
    landed = kill_repeatedly(index_location("killed"), corpus_file, clean, random.Random(SEED))
    # the kills hit the ingestion and the stages, not only the start or the end
    assert "ingest" in landed and len(set(landed) & {"graph", "embed", "bm25"}) >= 2, landed
    assert "done" in run_child(index_location("killed"), corpus_file)
    assert_whole(index_location("killed"), len(rows))
    same_index(
        index_location("killed"), index_location("clean"), KeywordEmbedder(), QUERIES, NAMESPACES
    )
    if Path(index_location("clean")).is_dir():  # no stray files on the embedded stores
        assert files(index_location("killed")) == files(index_location("clean"))


def test_a_delete_killed_at_random_points_resumes_to_a_clean_build(
    index_location, same_index, tmp_path
):
    rows = corpus()
    gone = [Document(text, title).id for title, text in rows[:10]]
    run_child(index_location("idx"), write_corpus(tmp_path, rows))
    clean = run_child(index_location("clean"), write_corpus(tmp_path, rows[10:]))
    corpus_file = write_corpus(tmp_path, rows)
    kill_repeatedly(index_location("idx"), corpus_file, clean, random.Random(SEED), gone)
    assert "done" in run_child(index_location("idx"), corpus_file, gone)
    assert_whole(index_location("idx"), len(rows) - 10)
    same_index(
        index_location("idx"), index_location("clean"), KeywordEmbedder(), QUERIES, NAMESPACES
    )
