"""Training the KG-embedding model through the engine and the CLI, on an index's
document graph and on an imported graph; the model lands beside its graph."""

import json

import pytest
import torch

from quillian.cli.main import main
from quillian.components.embedding.hashed import KeywordEmbedder
from quillian.components.kg.rdf import import_rdf
from quillian.components.kge.config import ComplExConfig
from quillian.components.kge.storage import load_model, model_directory
from quillian.components.kge.train import torch_threads
from quillian.engine.kge import graph_triples, is_imported_graph, train_kge
from quillian.testing.corpus import tiny_index

TURTLE = """@prefix ex: <http://example.org/> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix skos: <http://www.w3.org/2004/02/skos/core#> .
ex:ada rdfs:label "Ada Lovelace" ; skos:definition "A mathematician" ; ex:worked_with ex:babbage .
ex:babbage rdfs:label "Charles Babbage" ; skos:definition "An engineer" ; ex:born_in ex:london .
ex:london rdfs:label "London" ; skos:definition "A city" ; ex:capital_of ex:england .
ex:england rdfs:label "England" ; skos:definition "A country" ; ex:contains ex:london .
"""


def test_train_on_an_index_document_graph(tmp_path):
    tiny_index(tmp_path / "idx")
    assert not is_imported_graph(tmp_path / "idx")
    triples = graph_triples(tmp_path / "idx")
    assert len(triples) > 0
    result = train_kge(tmp_path / "idx", ComplExConfig(dim=8, epochs=3, batch_size=8))
    assert result.epochs == 3
    model = load_model(model_directory(tmp_path / "idx"), triples)
    assert model.epochs == 3


def test_cli_trains_on_an_imported_graph(tmp_path, capsys):
    (tmp_path / "g.ttl").write_text(TURTLE)
    import_rdf([tmp_path / "g.ttl"], tmp_path / "kg", KeywordEmbedder())
    assert is_imported_graph(tmp_path / "kg")
    code = main(["kg", "train-kge", str(tmp_path / "kg"), "--dim", "8", "--epochs", "2", "--json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["epochs"] == 2 and summary["model"].endswith("kge")
    assert (tmp_path / "kg" / "kge").is_dir()


def test_training_threads_are_set_for_the_run_and_restored(tmp_path, monkeypatch):
    import quillian.components.kge.train as train_module

    seen: list[int] = []
    real = train_module.train_and_save

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(train_module, "train_and_save", spy)
    tiny_index(tmp_path / "idx")
    before = torch.get_num_threads()
    train_kge(tmp_path / "idx", ComplExConfig(dim=8, epochs=1, batch_size=8), threads=1)
    assert seen == [1] and torch.get_num_threads() == before
    with pytest.raises(ValueError, match="at least 1"), torch_threads(0):
        pass
    code = main(["kg", "train-kge", str(tmp_path / "idx"), "--dim", "8", "--epochs", "1",
                 "--threads", "1", "--restart", "--json"])  # fmt: skip
    assert code == 0 and seen == [1, 1] and torch.get_num_threads() == before


def test_training_holds_out_a_share_and_stops_on_it(tmp_path, capsys):
    # 60 entities on a ring, 8 relations stepping by 1..8: 480 triples
    lines = [
        "@prefix ex: <http://example.org/> .",
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .",
        "@prefix skos: <http://www.w3.org/2004/02/skos/core#> .",
    ]
    lines += [f'ex:e{i} rdfs:label "Stop {i}" ; skos:definition "A stop" .' for i in range(60)]
    lines += [f"ex:e{i} ex:plus{s} ex:e{(i + s) % 60} ." for i in range(60) for s in range(1, 9)]
    (tmp_path / "ring.ttl").write_text("\n".join(lines) + "\n")
    import_rdf([tmp_path / "ring.ttl"], tmp_path / "kg", KeywordEmbedder())
    graph = graph_triples(tmp_path / "kg")
    assert len(graph) == 480
    config = ComplExConfig(
        dim=16, epochs=30, batch_size=64, eval_every=2, patience=2, valid_share=0.25
    )
    result = train_kge(tmp_path / "kg", config)
    assert set(result.valid_metrics) >= {"mrr", "hits@1", "hits@10"}
    assert 0 < result.best_epoch <= result.epochs <= 30
    manifest = json.loads((model_directory(tmp_path / "kg") / "manifest.json").read_text())
    assert manifest["held_out"] == 120
    assert manifest["metrics"]["valid_mrr"] == pytest.approx(result.valid_metrics["mrr"])
    # saved as the whole graph's model: methods open it against the graph they read
    assert manifest["graph"] == {"fingerprint": graph.fingerprint, "triples": 480}
    assert load_model(model_directory(tmp_path / "kg"), graph).epochs == result.epochs
    code = main(["kg", "train-kge", str(tmp_path / "kg"), "--dim", "8", "--epochs", "2",
                 "--valid-share", "0", "--restart", "--json"])  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["valid"] == {} and summary["epochs"] == 2
    manifest = json.loads((model_directory(tmp_path / "kg") / "manifest.json").read_text())
    assert manifest["held_out"] == 0 and manifest["graph"]["fingerprint"] == graph.fingerprint
