"""Schemathesis (its command line, every phase and its default checks) against a live
server that holds real resources: a workspace, documents, a finished job and entities,
whose ids schemathesis is given, so its requests reach them rather than only 404s.
Fixed seed, bounded budget; zero server errors, zero schema violations, every response
documented."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import ROUTES, running, wait_for_job

pytestmark = pytest.mark.fuzz

SEED = 51
EXAMPLES = 12  # per operation and phase: the whole run stays well under two minutes

#: The operations whose bodies carry constraints JSON Schema cannot state, refused with
#: a 400 that names the problem: a method's options and needs (its options' ranges, a
#: knowledge graph, a model), a conversation's user message, an uploaded file's content,
#: a document's text that is only whitespace (as Python's str.isspace has it).
SEMANTIC_400 = (
    "POST /api/workspaces/{ws}/answer",
    "POST /v1/chat/completions",
    "POST /api/workspaces/{ws}/documents",
    "POST /api/workspaces/{ws}/documents/files",
)


def _toml(value: object) -> str:
    return json.dumps(value)  # an ASCII string or a number reads the same in TOML


def _config(ids: dict[str, object], doomed: str) -> str:
    lines = [f"seed = {SEED}", "[generation]", f"max-examples = {EXAMPLES}"]
    # uploads are asynchronous (202 and a job): a document exists once its job stored it
    lines += ["[checks.ensure_resource_availability]", "enabled = false"]
    lines += ["[parameters]", *(f'"path.{k}" = {_toml(v)}' for k, v in ids.items())]
    lines += [
        "[[operations]]",
        'include-name = "DELETE /api/workspaces/{ws}/documents/{doc_id}"',
        f'parameters = {{ "path.doc_id" = {_toml(doomed)} }}',  # a document of its own
    ]
    statuses = '["2xx", "3xx", 400, 401, 403, 404, 409, 429]'
    for name in SEMANTIC_400:
        lines += [
            "[[operations]]",
            f'include-name = "{name}"',
            f"checks.positive_data_acceptance.expected-statuses = {statuses}",
        ]
    return "\n".join(lines) + "\n"


def _requests(metrics: str, route: str, status: str) -> float:
    labels = rf'route="{re.escape(route)}",method="\w+",status="{status}"'
    pattern = rf"quillian_http_requests_total\{{{labels}\}} (\S+)"
    return sum(float(n) for n in re.findall(pattern, metrics))


def test_schemathesis_finds_no_server_error_and_no_schema_violation(built_index, tmp_path):
    index = tmp_path / "idx"
    shutil.copytree(built_index, index)
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("main", index),),
        llm=ScriptedChatModel(ROUTES, default="unknown"),
        request_timeout_s=20,
        state_dir=tmp_path / "state",
    )
    with running(settings, timeout_s=60) as client:
        base = "/api/workspaces/main"
        added = client.post(
            f"{base}/documents",
            json={"documents": [{"text": "Grace Hopper was born in New York.", "title": "GH"}]},
        )
        assert added.status_code == 202, added.text
        job = wait_for_job(client, added.headers["Location"])
        assert job["state"] == "succeeded", job
        documents = client.get(f"{base}/documents").json()["documents"]
        kept = next(d["id"] for d in documents if d["title"] == "Charles Babbage")
        entity = client.get(f"{base}/entities", params={"q": "Babbage"}).json()["entities"][0]
        paths = client.get("/openapi.json").json()["paths"]
        entity_path = next(p for p in paths if p.startswith("/api/workspaces/{ws}/entities/{"))
        entity_param = entity_path.rsplit("{", 1)[1].rstrip("}")
        ids = {"ws": "main", "doc_id": kept, "job_id": job["id"], entity_param: entity["id"]}
        config = tmp_path / "schemathesis.toml"
        config.write_text(_config(ids, doomed=job["doc_ids"][0]))
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "schemathesis.cli",
                "--config-file",
                str(config),
                "run",
                str(client.base_url).rstrip("/") + "/openapi.json",
                "--no-color",
                "--request-timeout",
                "30",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        report = run.stdout + run.stderr
        metrics = client.get("/metrics").text
    assert run.returncode == 0, report[-8000:]
    assert "Missing test data" not in report, report[-4000:]
    for route in (
        "/api/workspaces/{ws}/documents/{doc_id}",
        "/api/workspaces/{ws}/jobs/{job_id}",
        "/api/workspaces/{ws}/jobs/{job_id}/events",
        entity_path,
    ):
        assert _requests(metrics, route, "200") > 0, route  # real resources were reached
    assert not re.search(r'status="5\d\d"', metrics), "a server error was counted"
