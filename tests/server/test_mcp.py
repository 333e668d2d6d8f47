"""``quillian mcp INDEX`` over stdio, driven by the official MCP SDK's client."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

import quillian
from quillian.testing.server import QUESTION


def test_tools_over_stdio(built_index, routes_file, tmp_path):
    params = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "quillian.cli.main",
            "mcp",
            str(built_index),
            "--llm",
            f"scripted:{routes_file}",
        ],
        # the SDK passes few variables on: run the quillian this test imported
        env={"PYTHONPATH": str(Path(quillian.__file__).parents[1])},
    )

    stderr = tmp_path / "stderr.txt"

    async def go():
        with stderr.open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                return await calls(session)

    async def calls(session):
        await session.initialize()
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        retrieved = await session.call_tool(
            "retrieve", {"query": "Where was Charles Babbage born?", "k": 2}
        )
        answered = await session.call_tool("answer", {"question": QUESTION})
        entity = await session.call_tool("entity", {"name": "babbage"})
        missing = await session.call_tool("entity", {"name": "Nobody At All"})
        bad = await session.call_tool("retrieve", {"query": "x", "method": "nope"})
        empty = await session.call_tool("answer", {"question": ""})
        huge = await session.call_tool("retrieve", {"query": "x", "k": 10**30})
        return tools, retrieved, answered, entity, missing, bad, empty, huge

    results = asyncio.run(asyncio.wait_for(go(), 120))
    tools, retrieved, answered, entity, missing, bad, empty, huge = results
    assert set(tools) == {"retrieve", "answer", "entity"}
    assert "question" in tools["answer"].input_schema["properties"]
    assert not retrieved.is_error
    passages = retrieved.structured_content["passages"]
    assert len(passages) == 2 and passages[0]["title"] == "Charles Babbage"
    assert retrieved.structured_content["subgraph"]["seeds"]
    (path, *_) = retrieved.structured_content["paths"]  # how the graph reached a passage
    assert path["steps"][0]["source"] == path["seed"] and path["steps"][-1]["target"]["name"]
    assert answered.structured_content["answer"] == "London"
    assert answered.structured_content["citations"]["passages"]
    assert entity.structured_content["entity"]["name"] == "Charles Babbage"
    assert entity.structured_content["edges"]
    assert missing.is_error and "Nobody At All" in missing.content[0].text
    assert bad.is_error and "nope" in bad.content[0].text
    # a refused input is one line naming the problem, and the server prints no traceback
    assert empty.is_error and "question" in empty.content[0].text
    assert "\n" not in empty.content[0].text
    assert huge.is_error and "k: " in huge.content[0].text
    assert "Traceback" not in stderr.read_text()
