"""Schemathesis over the published OpenAPI schema, against a real server: a bounded
number of generated requests per operation, no 5xx, every response matching the
schema. (Driven through hypothesis directly: schemathesis's pytest loader does not
work with this pytest.)"""

from __future__ import annotations

import shutil

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error, response_schema_conformance

from quillian.components.llm.scripted import ScriptedChatModel
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import ROUTES, running

EXAMPLES = 8


def test_api_conforms_to_its_schema(built_index, tmp_path):
    index = tmp_path / "idx"
    shutil.copytree(built_index, index)
    config = ServerSettings(
        workspaces=(WorkspaceSpec("main", index),),
        llm=ScriptedChatModel(ROUTES, default="unknown"),
        request_timeout_s=20,
    )
    with running(config) as client:
        base = str(client.base_url).rstrip("/")
        schema = schemathesis.openapi.from_url(f"{base}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 15
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def check(case: schemathesis.Case) -> None:
                case.call_and_validate(
                    base_url=base,
                    checks=[not_a_server_error, response_schema_conformance],
                    timeout=30,
                )

            check()
        counted = [
            float(line.rsplit(" ", 1)[1])
            for line in client.get("/metrics").text.splitlines()
            if line.startswith("quillian_http_requests_total{")
        ]
        assert sum(counted) >= 2 * len(operations)  # the generated requests reached it
