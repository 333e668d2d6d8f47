"""Indexing on Ray (``--ray local``) builds the index the single-process path builds,
through a worker killed mid-job and a driver killed mid-job; bad input fails in one
line and loses nothing. One local Ray instance (2 CPUs, loopback only) serves the
module and is stopped by it."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from functools import partial
from pathlib import Path

import psutil
import pytest

from quillian.cli.indexing import read_inputs
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.engine import IndexSettings, RayOptions, index_documents, index_on_ray
from quillian.engine.indexing import build_plan
from quillian.errors import ConfigError, InputError, WorkerError
from quillian.index import build_index, open_storage
from quillian.index.ray_cluster import listeners_off_loopback
from quillian.stores.protocols import DocStatus
from quillian.testing.extractors import TitleLinkExtractor
from quillian.testing.ray import (
    MissingInWorker,
    PidReportingExtractor,
    ProcessDying,
    kill_first_worker,
    local_ray,
)

pytest.importorskip("ray")
pytestmark = pytest.mark.ray

CORPUS = {
    "Ada Lovelace": "Ada Lovelace worked with Charles Babbage on the Analytical Engine.",
    "Charles Babbage": "Charles Babbage was born in London. He designed the Analytical Engine.",
    "Analytical Engine": "The Analytical Engine was a mechanical computer by Charles Babbage.",
    "London": "London is the capital of England. Charles Babbage lived in London.",
    "Difference Engine": "Charles Babbage built the Difference Engine first, in London.",
    "Allegra Byron": "Allegra Byron was a daughter of the poet Lord Byron.",
    "Lord Byron": "Lord Byron was a poet; Ada Lovelace was his daughter.",
    "England": "England is a country; its capital is London.",
}
QUERIES = ("Where was Charles Babbage born?", "the Analytical Engine", "capital of England")
KEYWORD = IndexSettings(embedder="keyword")


@pytest.fixture(scope="module")
def ray_instance():
    with local_ray(num_cpus=2) as ray:
        yield ray
        assert listeners_off_loopback() == []  # workers started by the tests included
    left = [p for p in psutil.process_iter(["name"]) if p.info["name"].startswith("ray::")]
    assert not [p for p in left if p.ppid() == 1 and p.status() != "zombie"], "Ray left workers"


def write_corpus(folder: Path, titles=tuple(CORPUS)) -> Path:
    """The corpus as a folder of every format the readers take: a JSON list, JSONL,
    and text files."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = [{"title": t, "text": CORPUS[t]} for t in titles]
    third = max(1, len(entries) // 3)
    (folder / "a.json").write_text(json.dumps(entries[:third]))
    (folder / "b.jsonl").write_text("".join(json.dumps(e) + "\n" for e in entries[third:-2]))
    for entry in entries[-2:]:
        (folder / f"{entry['title']}.txt").write_text(entry["text"])
    return folder


NAMESPACES = ("mentions:spacy", "extraction:title-link", "embeddings")


#: The title-link extractor as a worker makes it (a picklable function).
title_link = partial(TitleLinkExtractor, CORPUS)


def clean_build(location, corpus: Path):
    """The single-process build of ``corpus`` with the title-link extractor."""
    docs = read_inputs([corpus])
    plan = build_plan(location, KEYWORD, [d.title for d in docs], extractor=title_link())
    return build_index(docs, location, **plan.args())


def test_a_ray_build_equals_a_single_process_build(
    ray_instance, tmp_path, index_location, same_index
):
    """On both backends: the embedded store's single writer actor, and PostgreSQL's
    workers writing directly."""
    corpus = write_corpus(tmp_path / "corpus")
    one, on_ray = index_location("one"), index_location("ray")
    index_documents(one, read_inputs([corpus]), KEYWORD)
    report = index_on_ray(on_ray, [corpus], KEYWORD)
    assert report.ingest.new == len(CORPUS) and report.ingest.failed == 0
    assert report.counts["documents"] == len(CORPUS) and report.counts["relations"] > 0
    same_index(on_ray, one, KeywordEmbedder(), QUERIES, NAMESPACES)
    again = index_on_ray(on_ray, [corpus], KEYWORD)  # nothing new: reused
    assert again.reused and again.ingest.skipped == len(CORPUS)


def test_a_worker_killed_mid_job_and_the_index_equals_a_clean_build(
    ray_instance, tmp_path, same_index
):
    corpus = write_corpus(tmp_path / "corpus")
    pids = tmp_path / "pids"
    pids.mkdir()
    thread, killed = kill_first_worker(pids)
    make = partial(PidReportingExtractor, title_link, str(pids), 0.5)
    options = RayOptions(batch_size=2)
    report = index_on_ray(tmp_path / "ray", [corpus], KEYWORD, options, extractor=make)
    thread.join()
    assert killed, "no worker reported itself"
    assert not psutil.pid_exists(killed[0]) or psutil.Process(killed[0]).status() == "zombie"
    assert report.ingest.new == len(CORPUS)
    clean_build(tmp_path / "clean", corpus)
    same_index(tmp_path / "ray", tmp_path / "clean", KeywordEmbedder(), QUERIES, NAMESPACES)


DRIVER = textwrap.dedent(
    """
    import sys
    from functools import partial
    from pathlib import Path
    from quillian.engine import IndexSettings, RayOptions, index_on_ray
    from quillian.testing.extractors import TitleLinkExtractor
    from quillian.testing.ray import PidReportingExtractor
    address, corpus, out, pids, titles = *sys.argv[1:5], sys.argv[5:]
    make = partial(PidReportingExtractor, partial(TitleLinkExtractor, titles), pids, 1.0)
    index_on_ray(out, [Path(corpus)], IndexSettings(embedder="keyword"),
                 RayOptions(address, workers=1, batch_size=1), extractor=make)
    """
)


def processed(location: Path) -> int:
    db = location / "store.sqlite"
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
        try:
            query = "SELECT COUNT(*) FROM doc_status WHERE status = ?"
            return conn.execute(query, (DocStatus.PROCESSED.value,)).fetchone()[0]
        except sqlite3.OperationalError:  # not created yet
            return 0


def test_a_killed_driver_resumes_on_rerun(ray_instance, tmp_path, same_index):
    corpus = write_corpus(tmp_path / "corpus")
    out, pids = tmp_path / "ray", tmp_path / "pids"
    pids.mkdir()
    address = ray_instance.get_runtime_context().gcs_address  # the driver joins it
    args = [sys.executable, "-c", DRIVER, address, str(corpus), str(out), str(pids), *CORPUS]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    driver = subprocess.Popen(args, env=env, start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while processed(out) < 2 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert driver.poll() is None, "the driver finished before it could be killed"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # Ray ends the actors of a dead driver
        driver.wait()
    done = processed(out)
    assert 2 <= done < len(CORPUS)
    report = index_on_ray(out, [corpus], KEYWORD, extractor=title_link)
    assert report.ingest.skipped == done and report.ingest.new == len(CORPUS) - done
    clean_build(tmp_path / "clean", corpus)
    same_index(out, tmp_path / "clean", KeywordEmbedder(), QUERIES, NAMESPACES)


def test_an_unreachable_address_fails_in_one_line_within_seconds(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"cannot reach the Ray cluster at 127\.0\.0\.1:9"):
        index_on_ray(tmp_path / "out", [corpus], KEYWORD, RayOptions("127.0.0.1:9"))
    assert time.monotonic() - start < 10
    assert not (tmp_path / "out").exists()


def test_without_ray_the_flag_names_the_extra(tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "from quillian.cli.main import main\n"
        f"sys.exit(main(['index', '{corpus}', '--out', '{tmp_path / 'out'}', '--ray', 'local']))"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "pip install 'quillian[ray]'" in lines[0], done.stderr


def test_bad_entries_are_refused_alone_and_a_bad_file_writes_nothing(ray_instance, tmp_path):
    corpus = write_corpus(tmp_path / "corpus")
    (corpus / "bad.jsonl").write_text('{"title": "Broken", "text": 7}\n')
    refused = []
    report = index_on_ray(tmp_path / "out", [corpus], KEYWORD, on_refused=refused.append)
    assert report.ingest.new == len(CORPUS)
    assert len(refused) == 1 and "entry" in str(refused[0])
    (corpus / "worse.json").write_text("[{")
    with open_storage(tmp_path / "out") as storage:
        before = storage.documents.count_documents()
    with pytest.raises(InputError, match="invalid JSON"):
        index_on_ray(tmp_path / "out", [corpus], KEYWORD, on_refused=refused.append)
    with open_storage(tmp_path / "out") as storage:
        assert storage.documents.count_documents() == before


def test_a_worker_lacking_the_extra_or_dying_for_good_fails_in_one_line(ray_instance, tmp_path):
    corpus = write_corpus(tmp_path / "corpus", titles=list(CORPUS)[:2])
    with pytest.raises(WorkerError, match=r"MissingExtraError: .*quillian\[nlp\]'$"):
        lacking = partial(MissingInWorker, os.getpid(), title_link)
        index_on_ray(tmp_path / "a", [corpus], KEYWORD, extractor=lacking)
    with pytest.raises(WorkerError) as dying:
        index_on_ray(tmp_path / "b", [corpus], KEYWORD, extractor=ProcessDying)
    assert "\n" not in str(dying.value)
    with open_storage(tmp_path / "b") as storage:  # nothing half-written
        assert storage.status.counts().get(DocStatus.PROCESSED, 0) == 0
