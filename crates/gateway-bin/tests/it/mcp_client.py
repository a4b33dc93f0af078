"""An independent MCP client for `cairn mcp serve`: the Python `mcp` SDK.

Usage: CAIRN_EXPECTED_TOOLS=name,name,... python mcp_client.py CAIRN_BINARY HOME

Initialises a session, lists the tools (they must be the expected ones,
which the calling test passes) and calls each one (plus refused
cases), failing with a non-zero exit status on any unexpected answer. The
last line of stdout is a JSON report: {"tools": [...], "called": [...]}.
"""

import asyncio
import json
import os
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

EXPECTED = set(filter(None, os.environ.get("CAIRN_EXPECTED_TOOLS", "").split(",")))


def structured(result):
    return getattr(result, "structured_content", None) or getattr(result, "structuredContent", None) or {}


def is_error(result):
    value = getattr(result, "is_error", None)
    if value is None:
        value = getattr(result, "isError", None)
    return bool(value)


async def main(binary, home):
    assert EXPECTED, "CAIRN_EXPECTED_TOOLS names no tool"
    params = StdioServerParameters(
        command=binary,
        args=["--home", home, "mcp", "serve"],
        env={"CAIRN_SKIP_MODEL_DOWNLOAD": "1", "HOME": home, "PATH": os.environ.get("PATH", "")},
    )
    called = set()
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            info = getattr(init, "server_info", None) or getattr(init, "serverInfo", None)
            assert info.name == "cairn", info
            listed = await session.list_tools()
            names = {tool.name for tool in listed.tools}
            assert names == EXPECTED, sorted(names ^ EXPECTED)
            for tool in listed.tools:
                schema = getattr(tool, "input_schema", None) or getattr(tool, "inputSchema", None)
                assert schema["type"] == "object", (tool.name, schema)

            async def ok(name, arguments):
                result = await session.call_tool(name, arguments)
                assert not is_error(result), (name, arguments, result)
                called.add(name)
                return structured(result)

            async def refused(name, arguments, code):
                result = await session.call_tool(name, arguments)
                assert is_error(result), (name, arguments, result)
                body = structured(result)
                assert body.get("code") == code, (name, arguments, body)
                called.add(name)

            stored = await ok("memory_remember", {"text": "The Python client remembered this fragment"})
            assert stored["outcome"] == "inserted", stored
            await refused("memory_remember", {"text": "short"}, "text_length")
            found = await ok("memory_search", {"query": "python client fragment", "limit": 3})
            assert any(hit["id"] == stored["id"] for hit in found["hits"]), found
            await refused("memory_search", {"query": "x", "limit": "many"}, "invalid_arguments")

            await ok("memory_remember", {"text": "The Python client will forget this tangerine note"})
            preview = await ok("memory_forget", {"query": "tangerine note"})
            assert preview["dry_run"] is True and preview["counts"]["episodic"] == 1, preview
            done = await ok("memory_forget", {"query": "tangerine note", "confirm": True})
            assert done["counts"] == preview["counts"], (preview, done)
            await refused("memory_remember", {"text": "The Python client will forget this tangerine note"}, "forgotten")
            await refused("memory_forget", {}, "nothing_selected")

            assert (await ok("memory_pending_list", {}))["pending"] == [], "no consolidation has run"
            await refused("memory_pending_show", {"id": 999}, "unknown_changeset")
            await refused("memory_pending_approve", {"id": 999}, "unknown_changeset")
            await refused("memory_pending_reject", {"id": 999, "rows": [1]}, "unknown_changeset")

            assert (await ok("fact_set", {"key": "pref.client", "value": "python"}))["outcome"] == "created"
            await refused("fact_set", {"key": "nope.client", "value": "python"}, "prefix_not_allowed")
            assert (await ok("fact_get", {"key": "pref.client"}))["entry"]["value"] == "python"
            await ok("fact_set", {"key": "pref.temporary", "value": 1})
            assert (await ok("fact_delete", {"key": "pref.temporary"}))["deleted"] is True

            lesson = await ok("learn_add", {"rule": "prefer small commits", "category": "preference"})
            key = lesson["outcome"]["key"]
            listed_lessons = await ok("learn_list", {})
            assert any(item["key"] == key for item in listed_lessons["lessons"]), listed_lessons
            assert (await ok("learn_remove", {"key": key}))["deleted"] is True

            hits = await ok("skill_search", {"query": "release notes"})
            assert hits["hits"] and hits["hits"][0]["name"] == "release-notes", hits
            skill = await ok("skill_read", {"name": "release-notes"})
            assert "Group the changes" in skill["body"], skill
            await refused("skill_read", {"name": "missing-skill"}, "skill_not_found")

            appended = await ok("history_append", {"text": "The Python client wrote a history entry"})
            assert appended["file"].startswith("history/"), appended

    print(json.dumps({"tools": sorted(names), "called": sorted(called)}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
