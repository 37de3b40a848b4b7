#!/usr/bin/env python3
"""Dumps the tools of an MCP server installed from PyPI, for convert.py
--pypi-dumps.

Run it with the Python of a virtual environment where the server's package
(and so the `mcp` SDK) is installed:
    python dump_mcp.py --package PKG --out DIR [--name SET] [--env K=V ...] -- COMMAND [ARGS ...]
It starts COMMAND as an MCP stdio server (a local child process: nothing
here touches the network, and the servers are only asked for tools/list),
and writes DIR/PKG/SET.json: {"package", "version", "license",
"license_files": {name: text}, "command", "tools": [the tools as listed]}.
The license comes from the installed distribution's metadata."""
import argparse
import asyncio
import json
import os
import sys
from importlib import metadata
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client


async def list_tools(cmd, args, env):
    params = StdioServerParameters(command=cmd, args=args, env=env)
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w) as s:
            await s.initialize()
            tools, cursor = [], None
            while True:
                res = await (s.list_tools(cursor=cursor) if cursor else s.list_tools())
                for t in res.tools:
                    d = t.model_dump(mode="json", by_alias=True, exclude_none=True)
                    tools.append({"name": d["name"], "description": d.get("description"),
                                  "inputSchema": d.get("inputSchema")})
                cursor = getattr(res, "nextCursor", None) or getattr(res, "next_cursor", None)
                if not cursor:
                    return tools


def license_of(pkg):
    dist = metadata.distribution(pkg)
    md = dist.metadata
    lic = md.get("License-Expression") or ""
    if not lic:
        cls = [c.split("::")[-1].strip() for c in md.get_all("Classifier") or [] if c.startswith("License ::")]
        lic = "; ".join(cls) or (md.get("License") or "").strip().split("\n")[0]
    files = {}
    for f in dist.files or []:
        n = f.name.upper()
        if "dist-info" in str(f) and ("LICEN" in n or "COPYING" in n or "NOTICE" in n):
            files[str(f).split("dist-info/", 1)[1]] = f.read_text()
    if not files and md.get("License") and len(md.get("License")) > 200:
        files["METADATA License field"] = md.get("License")
    if not lic and files:  # the license file's first line ("MIT License", "Apache License")
        lic = next(iter(files.values())).strip().split("\n")[0].strip()
    return lic, dist.version, files


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--package", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = [c for c in a.command if c != "--"]
    env = dict(os.environ)
    env.update(dict(kv.split("=", 1) for kv in a.env))
    tools = asyncio.run(asyncio.wait_for(list_tools(cmd[0], cmd[1:], env), 180))
    lic, ver, files = license_of(a.package)
    out = Path(a.out) / a.package
    out.mkdir(parents=True, exist_ok=True)
    name = a.name or "tools"
    (out / f"{name}.json").write_text(json.dumps(
        {"package": a.package, "version": ver, "license": lic, "license_files": files,
         "command": [Path(cmd[0]).name] + cmd[1:] + [f"({k} set)" for k, _ in (kv.split("=", 1) for kv in a.env)],
         "tools": tools}, indent=1))
    print(f"{a.package} {ver} [{lic}] {name}: {len(tools)} tools", file=sys.stderr)


if __name__ == "__main__":
    main()
