"""``quillian kag issues`` on an index whose KAG stage kept extraction issues."""

import json

from quillian.cli.main import main
from quillian.components.extraction.base import ExtractionIssue
from quillian.methods.kag.issues import ISSUES_FILE, save_extraction_issues

ISSUES = [
    ExtractionIssue("c1", "ner", "failed", "no JSON list after the repair", "Venice, I think"),
    ExtractionIssue("c1", "triples", "rejected", "(Ghost, haunts, Nobody) names no entity", "x"),
    ExtractionIssue("c2", "ner", "repaired", "category Fish read as Others", "Fish" * 40),
]


def test_issues_are_listed_counted_and_filtered(tmp_path, capsys) -> None:
    (tmp_path / ISSUES_FILE.parent).mkdir()
    save_extraction_issues(tmp_path / ISSUES_FILE.parent, ISSUES)
    assert main(["kag", "issues", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 extraction issues (ner failed 1, ner repaired 1, triples rejected 1)"
    assert out[1] == "c1  ner  failed  no JSON list after the repair  | Venice, I think"
    assert out[3].endswith("| " + ("Fish" * 40)[:79] + "…")  # a long raw text is cut
    assert main(["kag", "issues", str(tmp_path), "--kind", "rejected", "--json"]) == 0
    (only,) = json.loads(capsys.readouterr().out)
    assert only == {
        "chunk_id": "c1",
        "task": "triples",
        "kind": "rejected",
        "message": "(Ghost, haunts, Nobody) names no entity",
        "raw": "x",
    }


def test_a_bad_kind_or_an_index_without_kag_is_refused(tmp_path, capsys) -> None:
    assert main(["kag", "issues", str(tmp_path), "--kind", "odd"]) == 2
    assert "--kind must be one of failed, rejected, repaired, kept" in capsys.readouterr().err
    assert main(["kag", "issues", str(tmp_path)]) == 2
    assert "has no KAG graph" in capsys.readouterr().err
    (tmp_path / ISSUES_FILE.parent).mkdir()  # a graph built before issues were kept
    assert main(["kag", "issues", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "0 extraction issues"
