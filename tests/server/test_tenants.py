"""Tenants kept apart: API keys per workspace with roles, against a real server.

Two workspaces A and B; read and write keys of each, a read key and an admin key of
every workspace from the keys file, and the admin key of ``--api-key``. Every (key,
workspace, action) is tried: a key may act only on its workspace and only within its
role (401 without a key or with an unknown one, 403 beyond its rights), the lists show
only what a key may see, and no key reaches a log line or a response."""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fastapi.routing import iter_route_contexts
from starlette.routing import Mount

from quillian.cli.main import main
from quillian.components.llm.scripted import ScriptedChatModel
from quillian.errors import ConfigError
from quillian.server.app import create_app
from quillian.server.keys import Role, add_key, key_hash, read_keys, revoke_key
from quillian.server.settings import ServerSettings, WorkspaceSpec
from quillian.testing.server import QUESTION, ROUTES, running, serve_process, wait_for_job

ADMIN_FLAG_KEY = "admin-key-given-by-flag-0123456789"
SPACES = ("A", "B")


@dataclass(frozen=True)
class Key:
    name: str
    workspace: str  # "*": every workspace
    role: Role
    secret: str

    def may(self, workspace: str, role: Role) -> bool:
        return self.role >= role and self.workspace in ("*", workspace)


def _make_keys(path: Path) -> dict[str, Key]:
    keys = {}
    for name, workspace, role in (
        ("read-A", "A", Role.READ),
        ("write-A", "A", Role.WRITE),
        ("read-B", "B", Role.READ),
        ("write-B", "B", Role.WRITE),
        ("read-all", "*", Role.READ),
        ("admin", "", Role.ADMIN),
    ):
        entry, secret = add_key(path, workspace, role, note=name)
        keys[name] = Key(name, entry.workspace, role, secret)
    keys["api-key"] = Key("api-key", "*", Role.ADMIN, ADMIN_FLAG_KEY)
    return keys


@pytest.fixture(scope="module")
def tenants(built_index, tmp_path_factory):
    """A server over two copies of the test index, A and B, with a keys file and an
    admin key; one finished upload job in each workspace."""
    root = tmp_path_factory.mktemp("tenants")
    spaces = []
    for name in SPACES:
        shutil.copytree(built_index, root / name)
        spaces.append(WorkspaceSpec(name, root / name))
    keys_file = root / "keys.toml"
    keys = _make_keys(keys_file)
    settings = ServerSettings(
        workspaces=tuple(spaces),
        llm=ScriptedChatModel(ROUTES),
        api_key=ADMIN_FLAG_KEY,
        keys_file=keys_file,
    )
    with running(settings) as keyed, httpx.Client(base_url=keyed.base_url, timeout=60) as client:
        admin = {"X-API-Key": ADMIN_FLAG_KEY}  # the client sends no key unless told
        ids = {}
        for ws in SPACES:
            upload = {"documents": [{"text": f"Grace Hopper lived in {ws} town.", "title": ws}]}
            accepted = client.post(f"/api/workspaces/{ws}/documents", json=upload, headers=admin)
            assert accepted.status_code == 202, accepted.text
            job = wait_for_job(keyed, accepted.headers["location"])
            assert job["state"] == "succeeded", job
            docs = client.get(f"/api/workspaces/{ws}/documents", headers=admin).json()
            found = client.get(f"/api/workspaces/{ws}/entities?q=Ada", headers=admin).json()
            ids[ws] = {
                "job": job["id"],
                "doc": docs["documents"][0]["id"],
                "entity": found["entities"][0]["id"],
            }
        yield client, keys, ids, keys_file


# (name, role needed, method, path after /api/workspaces/{ws}, JSON body). Write actions
# are sent with a body the route refuses after the key check (422) or for an id that is
# not there (404), so a key allowed to write passes the check without changing anything;
# test_a_write_key_changes_its_workspace_a_read_key_cannot does it for real.
ACTIONS = [
    ("workspace", Role.READ, "GET", "", None),
    ("list documents", Role.READ, "GET", "/documents", None),
    ("read a document", Role.READ, "GET", "/documents/{doc}", None),
    ("retrieve", Role.READ, "POST", "/retrieve", {"query": "Ada Lovelace"}),
    ("answer", Role.READ, "POST", "/answer", {"question": QUESTION}),
    ("find entities", Role.READ, "GET", "/entities?q=Ada", None),
    ("an entity", Role.READ, "GET", "/entities/{entity}", None),
    ("graph links", Role.READ, "POST", "/graph/links", {"entities": [], "chunk_ids": []}),
    ("list jobs", Role.READ, "GET", "/jobs", None),
    ("read a job", Role.READ, "GET", "/jobs/{job}", None),
    ("job events", Role.READ, "GET", "/jobs/{job}/events", None),
    ("upload documents", Role.WRITE, "POST", "/documents", {"documents": []}),
    ("upload files", Role.WRITE, "POST", "/documents/files", None),
    ("delete a document", Role.WRITE, "DELETE", "/documents/doc-not-there", None),
    ("cancel a job", Role.WRITE, "POST", "/jobs/{job}/cancel", None),
]
KEY_NAMES = ["read-A", "write-A", "read-B", "write-B", "read-all", "admin", "api-key"]


def _call(client, method, path, body, key):
    headers = {"X-API-Key": key} if key is not None else {}
    return client.request(method, path, json=body, headers=headers)


@pytest.mark.parametrize("ws", SPACES)
@pytest.mark.parametrize("key_name", KEY_NAMES)
@pytest.mark.parametrize("action", ACTIONS, ids=[a[0] for a in ACTIONS])
def test_every_key_workspace_and_action(tenants, key_name, ws, action):
    client, keys, ids, _ = tenants
    name, role, method, rest, body = action
    key = keys[key_name]
    path = f"/api/workspaces/{ws}" + rest.format(**ids[ws])
    response = _call(client, method, path, body, key.secret)
    if key.may(ws, role):
        assert response.status_code not in (401, 403), (name, response.text)
        if role == Role.READ:
            assert response.status_code == 200, (name, response.text)
    else:
        assert response.status_code == 403, (name, response.text)
        detail = response.json()["detail"]
        assert key.secret not in response.text
        if key.workspace in ("*", ws):  # its workspace, beyond its role
            assert f"may only read workspace {ws!r}" in detail
            assert "this needs a write key" in detail
        else:
            assert detail.endswith(f"has no access to workspace {ws!r}")
    assert _call(client, method, path, body, None).status_code == 401
    assert _call(client, method, path, body, key.secret + "x").status_code == 401


def test_every_route_is_open_or_needs_a_key(tenants, built_index):
    """Every route of the app, enumerated: the open ones (liveness, the web UI's page
    and files) answer without a key, every other one is 401 without a key, in the app's
    error shape; the actions above name every workspace route, so none goes untried."""
    client, _, ids, _ = tenants
    app = create_app(ServerSettings(workspaces=(WorkspaceSpec("A", built_index),)))
    tried = {(m, "/api/workspaces/{ws}" + r.split("?")[0]) for _, _, m, r, _ in ACTIONS}
    seen = set()
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, Mount):  # the web UI's static files
            assert route.path == "/ui"
            assert client.get("/ui/style.css").status_code == 200
            assert client.get("/ui/js/api.js").status_code == 200
            continue
        assert route.path is not None and route.methods is not None, route
        if route.path == "/{path:path}":  # OPTIONS on any path: a CORS preflight has no key
            assert route.methods == {"OPTIONS"}
            assert client.options("/api/workspaces/A/documents").status_code == 204
            continue
        for method in route.methods - {"HEAD"}:
            path = route.path.format(
                ws="A", doc_id=ids["A"]["doc"], entity=ids["A"]["entity"], job_id=ids["A"]["job"]
            )
            seen.add((method, route.path))
            response = client.request(method, path)
            if route.path in ("/healthz", "/"):
                assert response.status_code == 200, route.path
            else:
                assert response.status_code == 401, (method, route.path)
                assert response.headers["www-authenticate"] == "ApiKey"
                body = response.json()
                message = body["error"]["message"] if path.startswith("/v1/") else body["detail"]
                assert message == "an API key is required (X-API-Key)"
    workspace_routes = {
        (m, p.replace("{doc_id}", "{doc}").replace("{job_id}", "{job}"))
        for m, p in seen
        if p.startswith("/api/workspaces/{ws}")
    }
    assert workspace_routes == {(m, p.replace("doc-not-there", "{doc}")) for m, p in tried}
    assert {("GET", "/openapi.json"), ("GET", "/metrics"), ("POST", "/v1/chat/completions")} < seen
    malformed = {"content": b"{not json", "headers": {"content-type": "application/json"}}
    for path in ("/api/workspaces/A/documents", "/v1/chat/completions"):
        assert client.post(path, **malformed).status_code == 401  # before the body is read


def test_a_write_key_changes_its_workspace_a_read_key_cannot(tenants):
    client, keys, _, _ = tenants
    read, write = {"X-API-Key": keys["read-A"].secret}, {"X-API-Key": keys["write-A"].secret}
    before = client.get("/api/workspaces/A/documents", headers=read).json()["total"]
    jobs_before = client.get("/api/workspaces/A/jobs", headers=read).json()["total"]
    upload = {"documents": [{"text": "Hedy Lamarr was born in Vienna.", "title": "Lamarr"}]}
    refused = client.post("/api/workspaces/A/documents", json=upload, headers=read)
    assert refused.status_code == 403
    assert refused.json() == {
        "detail": f"API key {read_keys_id(keys, 'read-A')} may only read workspace 'A'; "
        "this needs a write key"
    }
    files = [("files", ("lamarr.md", b"# Hedy Lamarr\n\nBorn in Vienna.", "text/markdown"))]
    refused_files = client.post(
        "/api/workspaces/A/documents/files",
        files=files,
        headers=read,
    )
    assert refused_files.status_code == 403
    docs = client.get("/api/workspaces/A/documents", headers=read).json()
    assert docs["total"] == before  # nothing stored
    assert client.get("/api/workspaces/A/jobs", headers=read).json()["total"] == jobs_before
    other = client.post("/api/workspaces/B/documents", json=upload, headers=write)
    assert other.status_code == 403  # A's write key, B's workspace

    accepted = client.post("/api/workspaces/A/documents", json=upload, headers=write)
    assert accepted.status_code == 202, accepted.text
    job = wait_for_job(_as(client, read), accepted.headers["location"])
    assert job["state"] == "succeeded"
    (doc,) = job["doc_ids"]
    assert client.get(f"/api/workspaces/A/documents/{doc}", headers=read).status_code == 200
    assert client.delete(f"/api/workspaces/A/documents/{doc}", headers=read).status_code == 403
    gone = client.delete(f"/api/workspaces/A/documents/{doc}", headers=write)
    assert gone.status_code == 202
    wait_for_job(_as(client, read), gone.headers["location"])
    assert client.get("/api/workspaces/A/documents", headers=read).json()["total"] == before


def _as(client, headers):
    return httpx.Client(base_url=client.base_url, headers=headers, timeout=60)


def read_keys_id(keys, name):
    return keys[name].secret.split("_")[1]


def test_a_job_of_one_workspace_is_not_read_through_another(tenants):
    client, keys, ids, _ = tenants
    job_a = ids["A"]["job"]
    for key in ("admin", "write-B", "read-B"):
        headers = {"X-API-Key": keys[key].secret}
        for suffix in ("", "/events", "/cancel"):
            method = "POST" if suffix == "/cancel" else "GET"
            response = client.request(
                method, f"/api/workspaces/B/jobs/{job_a}{suffix}", headers=headers
            )
            expected = 403 if (key == "read-B" and suffix == "/cancel") else 404
            assert response.status_code == expected, (key, suffix, response.text)
    admin = {"X-API-Key": keys["admin"].secret}
    listed = client.get("/api/workspaces/B/jobs", headers=admin).json()["jobs"]
    assert job_a not in [j["id"] for j in listed]


@pytest.mark.parametrize("key_name", KEY_NAMES)
def test_lists_show_only_the_workspaces_a_key_may_read(tenants, key_name):
    client, keys, _, _ = tenants
    key = keys[key_name]
    headers = {"X-API-Key": key.secret}
    visible = [ws for ws in SPACES if key.may(ws, Role.READ)]
    spaces = client.get("/api/workspaces", headers=headers)
    assert [w["name"] for w in spaces.json()] == visible
    models = client.get("/v1/models", headers=headers).json()["data"]
    workspaces = {m["id"].partition("@")[2] or "A" for m in models}
    assert workspaces == set(visible)
    assert client.get("/api/methods", headers=headers).status_code == 200
    assert client.get("/openapi.json", headers=headers).status_code == 200
    assert client.get("/metrics", headers=headers).status_code == (
        200 if key.role == Role.ADMIN else 403
    )


@pytest.mark.parametrize("key_name", KEY_NAMES)
@pytest.mark.parametrize("ws", SPACES)
def test_openai_chat_needs_read_on_the_models_workspace(tenants, key_name, ws):
    client, keys, _, _ = tenants
    key = keys[key_name]
    model = "quillian-sa-rag" + ("" if ws == "A" else f"@{ws}")
    body = {"model": model, "messages": [{"role": "user", "content": QUESTION}]}
    response = client.post("/v1/chat/completions", json=body, headers={"X-API-Key": key.secret})
    if key.may(ws, Role.READ):
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "London"
    else:
        assert response.status_code == 403
        error = response.json()["error"]  # OpenAI's error object, which its clients show
        if ws == "A":  # the default workspace, which a model without @WORKSPACE names
            assert "no access to the default workspace" in error["message"]
            assert "quillian-sa-rag@WORKSPACE" in error["message"]
            assert "'A'" not in error["message"]  # its name stays hidden
        else:
            assert error["message"].endswith(f"has no access to workspace {ws!r}")
    anonymous = client.post("/v1/chat/completions", json=body)
    assert anonymous.status_code == 401 and "API key" in anonymous.json()["error"]["message"]


@pytest.mark.parametrize("key_name", [None, *KEY_NAMES])
def test_health_names_only_the_workspaces_a_key_may_read(tenants, key_name):
    client, keys, _, _ = tenants
    headers = {"X-API-Key": keys[key_name].secret} if key_name else {}
    health = client.get("/healthz", headers=headers)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    visible = [ws for ws in SPACES if key_name and keys[key_name].may(ws, Role.READ)]
    assert health.json()["workspaces"] == visible


def test_a_workspace_key_cannot_tell_a_hidden_workspace_from_a_missing_one(tenants):
    client, keys, _, _ = tenants
    read_a = {"X-API-Key": keys["read-A"].secret}
    hidden = client.get("/api/workspaces/B", headers=read_a)
    missing = client.get("/api/workspaces/nowhere", headers=read_a)
    assert hidden.status_code == missing.status_code == 403
    assert "'B'" in hidden.json()["detail"] and "'A'" not in missing.json()["detail"]
    admin = {"X-API-Key": keys["admin"].secret}
    assert client.get("/api/workspaces/nowhere", headers=admin).status_code == 404


def test_no_key_reaches_the_access_log_or_a_response(tenants, caplog):
    client, keys, _, _ = tenants
    caplog.set_level(logging.DEBUG)
    for key in keys.values():
        for path in ("/api/workspaces", "/api/workspaces/A/jobs", "/api/workspaces/B/documents"):
            for headers in ({"X-API-Key": key.secret}, {"Authorization": f"Bearer {key.secret}"}):
                response = client.get(path, headers=headers)
                assert key.secret not in response.text
                assert response.status_code in (200, 403)
        client.get("/api/workspaces", headers={"X-API-Key": key.secret + "wrong"})
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert '"status": 403' in logged and '"status": 401' in logged
    for key in keys.values():
        assert key.secret not in logged and key.secret[-12:] not in logged
    assert f'"key": "{read_keys_id(keys, "read-A")}"' in logged  # the id, for an audit


def test_revoked_and_added_keys_apply_without_a_restart(built_index, tmp_path):
    keys_file = tmp_path / "keys.toml"
    entry, key = add_key(keys_file, "A", Role.READ)
    settings = ServerSettings(workspaces=(WorkspaceSpec("A", built_index),), keys_file=keys_file)
    with running(settings) as client:
        headers = {"X-API-Key": key}
        assert client.get("/api/workspaces/A", headers=headers).status_code == 200
        _, later_key = add_key(keys_file, "A", Role.WRITE)
        assert client.get("/api/workspaces/A", headers={"X-API-Key": later_key}).status_code == 200
        assert main(["keys", "revoke", entry.id, "--file", str(keys_file)]) == 0
        revoked = client.get("/api/workspaces/A", headers=headers)
        assert revoked.status_code == 401 and revoked.json()["detail"] == "wrong API key"
        assert client.get("/api/workspaces/A", headers={"X-API-Key": later_key}).status_code == 200
        keys_file.write_text("[[keys]]\nid = 'broken")  # a hand edit gone wrong: fail closed
        assert client.get("/api/workspaces/A", headers={"X-API-Key": later_key}).status_code == 401
        assert client.get("/healthz").status_code == 200


def test_keys_add_prints_the_key_once_and_stores_only_its_hash(tmp_path, capsys):
    keys_file = tmp_path / "keys.toml"
    add = ["keys", "add", "--file", str(keys_file)]
    assert main([*add, "--workspace", "A", "--role", "read"]) == 0
    out, err = capsys.readouterr()
    key = out.strip()
    assert key.startswith("qk_") and len(key) > 40 and "\n" not in key
    (entry,) = read_keys(keys_file)
    assert entry.workspace == "A" and entry.role == Role.READ and entry.id in key
    assert f"key {entry.id}: read on A" in err and key not in err
    text = keys_file.read_text()
    secret = key.removeprefix(f"qk_{entry.id}_")  # may hold "_" itself (URL-safe base64)
    assert key not in text and secret not in text  # no plaintext
    assert key_hash(key) in text
    assert keys_file.stat().st_mode & 0o777 == 0o600

    assert main([*add, "--role", "admin"]) == 0
    admin_key = capsys.readouterr().out.strip()
    assert main(["keys", "list", "--file", str(keys_file)]) == 0
    listed = capsys.readouterr().out
    assert entry.id in listed and "admin  every workspace" in listed
    assert key not in listed and admin_key not in listed

    assert main(["keys", "revoke", entry.id, "--file", str(keys_file)]) == 0
    assert [e.role for e in read_keys(keys_file)] == [Role.ADMIN]
    assert main(["keys", "revoke", entry.id, "--file", str(keys_file)]) == 2
    assert f"no key {entry.id!r} in" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workspace", "A", "--role", "owner"], "unknown role 'owner'"),
        (["--role", "admin", "--workspace", "A"], "an admin key is for every workspace"),
        (["--role", "read", "--workspace", "a b"], "must be a workspace name"),
    ],
)
def test_keys_add_refuses_what_it_cannot_keep(tmp_path, capsys, args, message):
    keys_file = tmp_path / "keys.toml"
    assert main(["keys", "add", "--file", str(keys_file), *args]) == 2
    assert message in capsys.readouterr().err
    assert not keys_file.exists()


def test_a_broken_keys_file_stops_the_server_at_start_with_one_line(built_index, tmp_path):
    keys_file = tmp_path / "keys.toml"
    add_key(keys_file, "A", Role.READ)
    keys_file.write_text(keys_file.read_text().replace('role = "read"', 'role = "owner"'))
    settings = ServerSettings(workspaces=(WorkspaceSpec("A", built_index),), keys_file=keys_file)
    with pytest.raises(ConfigError, match="key 1: unknown role 'owner'"):
        create_app(settings)
    with pytest.raises(ConfigError, match="no keys file"):
        create_app(
            ServerSettings(
                workspaces=(WorkspaceSpec("A", built_index),), keys_file=tmp_path / "none.toml"
            )
        )


def test_the_settings_never_show_a_key(built_index):
    settings = ServerSettings(
        workspaces=(WorkspaceSpec("A", built_index),), api_key=ADMIN_FLAG_KEY, llm_api_key="sk-x1"
    )
    assert ADMIN_FLAG_KEY not in repr(settings) and "sk-x1" not in repr(settings)


def test_add_keeps_what_is_in_the_file_and_revoke_keeps_the_other_keys(tmp_path):
    keys_file = tmp_path / "keys.toml"
    first, _ = add_key(keys_file, "A", Role.READ)
    with keys_file.open("a") as out:
        out.write("# the docs site's key, until March\n")  # a person's note
    second, _ = add_key(keys_file, "B", Role.WRITE, note="ci")
    assert "# the docs site's key, until March" in keys_file.read_text()  # kept by add
    assert read_keys(keys_file) == [first, second]
    revoke_key(keys_file, first.id)
    assert read_keys(keys_file) == [second]


def test_quillian_serve_with_a_keys_file_and_without(built_index, tmp_path):
    keys_file = tmp_path / "keys.toml"
    _, read_key = add_key(keys_file, "A", Role.READ)
    add_key(keys_file, "Z", Role.READ)  # a workspace this server does not serve
    args = [f"A={built_index}", "--keys", str(keys_file)]
    log = tmp_path / "keys.log"
    with (
        serve_process(args, log, {"QUILLIAN_API_KEY": ""}) as url,
        httpx.Client(base_url=url, timeout=60) as client,
    ):
        assert client.get("/api/workspaces").status_code == 401
        seen = client.get("/api/workspaces", headers={"Authorization": f"Bearer {read_key}"})
        assert [w["name"] for w in seen.json()] == ["A"]
        upload = {"documents": [{"text": "Hedy Lamarr was born in Vienna."}]}
        refused = client.post(
            "/api/workspaces/A/documents", json=upload, headers={"X-API-Key": read_key}
        )
        assert refused.status_code == 403
    text = log.read_text()
    assert (
        f"serving A; a key is needed: the 2 key(s) in {keys_file} "
        "(some for workspaces not served here: Z)"
    ) in text
    assert read_key not in text and '"status": 403' in text

    open_log = tmp_path / "open.log"
    with serve_process([f"A={built_index}"], open_log, {"QUILLIAN_API_KEY": ""}) as url:
        assert httpx.get(f"{url}/api/workspaces", timeout=60).status_code == 200
    assert "serving A OPEN: no API key is needed" in open_log.read_text()
