#!/usr/bin/env python3
"""Builds the tool-set corpus in tests/data/toolsets/ from public sources.

The committed JSON files are the output of this script; nothing in the tests
runs it, and the tests need no network. It is kept so that the corpus can be
rebuilt or extended, and so that every conversion is written down as code.

Each tool set is written as tests/data/toolsets/<source>/<name>.json: a JSON
array of OpenAI tools, [{"type": "function", "function": {"name",
"description", "parameters"}}], at most 128 tools, names matching
^[a-zA-Z0-9_.-]{1,64}$ and unique within the set. Identical sets (the same
tools in any order) are written once (the first one met is kept).

Sources (see each <source>/SOURCE.md for the exact commits and paths):

  bfcl          ShishirPatil/gorilla, berkeley-function-call-leaderboard
                (Apache-2.0): git directory given with --gorilla.
  github-mcp-server
                github/github-mcp-server (MIT): the tool schema snapshots
                pkg/github/__toolsnaps__/*.snap, grouped by the toolsets the
                README documents: git directory given with --github-mcp.
  mcp-servers   modelcontextprotocol/servers (MIT): the tools written as
                literal JSON Schema objects in the reference servers'
                sources (TypeScript object literals, evaluated with node;
                Python dict literals, read with ast.literal_eval): git
                directory given with --mcp-servers.
  tau-bench     sierra-research/tau-bench (MIT): each tool's get_info()
                dict literal, read with ast: git directory given with
                --tau-bench.
  pypi-<package>
                MCP servers published on PyPI under MIT or Apache-2.0, one
                folder per package: the tools/list answer of each server,
                started locally over stdio (no network), from dumps made by
                dump_mcp.py beside this script (which also records the
                package's license files): --pypi-dumps DIR, one folder per
                package in DIR.
  agentdojo     the agentdojo package on PyPI (MIT): each task suite's tool
                list, from dumps made by dump_agentdojo.py: --agentdojo DIR.

Usage (every source is optional; the output folder is rewritten per source):
  python3 tests/data/toolsets/convert.py --gorilla DIR.git --github-mcp DIR.git \
      --mcp-servers DIR.git --tau-bench DIR.git --pypi-dumps DIR --agentdojo DIR
"""
import argparse
import ast
import copy
import json
import re
import subprocess
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent
NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
MAX_TOOLS = 128

# ---------------------------------------------------------------------------
# common


def git_show(gitdir, rev, path):
    return subprocess.run(["git", "--git-dir", str(gitdir), "show", f"{rev}:{path}"], check=True,
                          capture_output=True).stdout.decode()


def git_ls(gitdir, rev, path):
    r = subprocess.run(["git", "--git-dir", str(gitdir), "ls-tree", "-r", "--name-only", rev, path], check=True,
                       capture_output=True, text=True)
    return r.stdout.split()


def git_rev(gitdir, rev):
    return subprocess.run(["git", "--git-dir", str(gitdir), "rev-parse", rev + "^{commit}"], check=True,
                          capture_output=True, text=True).stdout.strip()


def oai(name, description, parameters):
    f = {"name": name}
    if description is not None:
        f["description"] = description
    if parameters is not None:
        f["parameters"] = parameters
    return {"type": "function", "function": f}


class Writer:
    """Writes one source's sets, checking names and dropping duplicates."""

    seen = {}  # canonical form -> "source/name", across all sources

    def __init__(self, source):
        self.source = source
        self.dir = OUT / source
        if self.dir.exists():
            for p in self.dir.glob("*.json"):
                p.unlink()
        self.dir.mkdir(parents=True, exist_ok=True)
        self.written = []  # (name, n_tools)
        self.dups = []  # (name, kept)
        self.renamed = []  # (set, old, new)

    def add(self, name, tools):
        assert NAME_RE.match(name), name
        assert 1 <= len(tools) <= MAX_TOOLS, (name, len(tools))
        names = set()
        for t in tools:
            f = t["function"]
            if not NAME_RE.match(f["name"]):
                new = re.sub(r"[^a-zA-Z0-9_.-]", "_", f["name"])[:64]
                self.renamed.append((name, f["name"], new))
                f["name"] = new
            assert f["name"] not in names, (name, f["name"])
            names.add(f["name"])
            p = f.get("parameters")
            assert p is None or isinstance(p, dict), (name, f["name"])
        key = json.dumps(sorted(tools, key=lambda t: t["function"]["name"]), sort_keys=True)
        if key in Writer.seen:
            self.dups.append((name, Writer.seen[key]))
            return False
        Writer.seen[key] = f"{self.source}/{name}"
        path = self.dir / f"{name}.json"
        assert not path.exists(), path
        path.write_text(json.dumps(tools, indent=1, ensure_ascii=False) + "\n")
        self.written.append((name, len(tools)))
        return True

    def report(self):
        sizes = [n for _, n in self.written]
        print(f"{self.source}: {len(sizes)} sets, {sum(sizes)} tools, "
              f"{sum(1 for n in sizes if n >= 20)} with 20+, largest {max(sizes) if sizes else 0}; "
              f"{len(self.dups)} duplicates dropped, {len(self.renamed)} names sanitized", file=sys.stderr)
        return {"sets": len(sizes), "tools": sum(sizes), "dups": self.dups, "renamed": self.renamed,
                "sizes": sizes}


# ---------------------------------------------------------------------------
# BFCL

GORILLA = "ShishirPatil/gorilla"
BFCL_DATA = "berkeley-function-call-leaderboard/bfcl_eval/data"

# BFCL's own type names (bfcl_eval/constants/type_mappings.py,
# GORILLA_TO_OPENAPI) to JSON Schema types, as its OpenAI handler maps them;
# "Boolean" (Java) is not in that table and is read as "boolean". "any",
# "Any" and "" (an unnamed type) become no "type" at all: any JSON value
# (BFCL's handler writes "string" there instead).
BFCL_TYPES = {
    "integer": "integer", "number": "number", "float": "number", "string": "string", "boolean": "boolean",
    "bool": "boolean", "array": "array", "list": "array", "dict": "object", "object": "object",
    "tuple": "array", "byte": "integer", "short": "integer", "long": "integer", "double": "number",
    "char": "string", "ArrayList": "array", "Array": "array", "HashMap": "object", "Hashtable": "object",
    "Queue": "array", "Stack": "array", "String": "string", "Bigint": "integer", "Boolean": "boolean",
}
BFCL_UNTYPED = {"any", "Any", ""}


def bfcl_schema(s, log):
    """The schema s with BFCL's type names mapped (recursively, in every
    subschema position BFCL uses); nothing else changes."""
    if not isinstance(s, dict):
        return s
    s = dict(s)
    if "type" in s:
        t = s["type"]
        if isinstance(t, str):
            if t in BFCL_UNTYPED:
                del s["type"]
                log.add(f"{t!r} -> (no type)")
            else:
                if t not in BFCL_TYPES:
                    raise ValueError(f"unknown BFCL type {t!r}")
                if BFCL_TYPES[t] != t:
                    log.add(f"{t} -> {BFCL_TYPES[t]}")
                s["type"] = BFCL_TYPES[t]
    if isinstance(s.get("properties"), dict):
        s["properties"] = {k: bfcl_schema(v, log) for k, v in s["properties"].items()}
    for k in ("items", "additionalProperties"):
        if isinstance(s.get(k), dict):
            s[k] = bfcl_schema(s[k], log)
        elif isinstance(s.get(k), list):
            s[k] = [bfcl_schema(x, log) for x in s[k]]
    for k in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(s.get(k), list):
            s[k] = [bfcl_schema(x, log) for x in s[k]]
    return s


def bfcl_tool(fn, log):
    params = bfcl_schema(fn.get("parameters"), log) if fn.get("parameters") is not None else None
    if params is not None:
        params["type"] = "object"  # as BFCL's handler does (every one is "dict")
    return oai(fn["name"], fn.get("description"), params)


def bfcl_lines(gitdir, rev, rel):
    return [json.loads(l) for l in git_show(gitdir, rev, f"{BFCL_DATA}/{rel}").splitlines() if l.strip()]


def build_bfcl(gitdir, rev):
    w = Writer("bfcl")
    commit = git_rev(gitdir, rev)
    log = set()
    picked = []  # (name, functions, origin)

    # Multi-turn: the tool set of an entry is the union of its involved
    # classes' function docs (multi_turn_func_doc/, mapped as in
    # bfcl_eval/constants/executable_backend_config.py); MemoryAPI entries
    # use one of three memory backends, each a set here.
    files = {"GorillaFileSystem": "gorilla_file_system.json", "MathAPI": "math_api.json",
             "MessageAPI": "message_api.json", "TwitterAPI": "posting_api.json", "TicketAPI": "ticket_api.json",
             "TradingBot": "trading_bot.json", "TravelAPI": "travel_booking.json",
             "VehicleControlAPI": "vehicle_control.json", "WebSearchAPI": "web_search.json",
             "MemoryAPI_kv": "memory_kv.json", "MemoryAPI_vector": "memory_vector.json",
             "MemoryAPI_rec_sum": "memory_rec_sum.json"}
    docs = {c: bfcl_lines(gitdir, rev, f"multi_turn_func_doc/{f}") for c, f in files.items()}
    combos = []
    for cat in ("multi_turn_base", "multi_turn_long_context", "multi_turn_miss_func", "multi_turn_miss_param",
                "web_search", "memory"):
        for e in bfcl_lines(gitdir, rev, f"BFCL_v4_{cat}.json"):
            cl = tuple(sorted(e["involved_classes"]))
            if cl == ("MemoryAPI",):
                for b in ("kv", "vector", "rec_sum"):
                    if ("MemoryAPI_" + b,) not in combos:
                        combos.append(("MemoryAPI_" + b,))
            elif cl not in combos:
                combos.append(cl)
    for c in files:
        if (c,) not in combos:
            combos.append((c,))
    for cl in sorted(combos, key=lambda c: (len(c), c)):
        fns = [f for c in cl for f in docs[c]]
        picked.append(("multi_turn_" + "+".join(cl), fns,
                       "multi_turn_func_doc/" + " + ".join(files[c] for c in cl)))

    # Single-turn categories: distinct function lists, thinned by a stride
    # (every k-th distinct list in file order), and every list with at least
    # `keep_from` functions.
    plan = [  # (file, stride, keep_from)
        ("BFCL_v4_live_multiple.json", 16, 7),
        ("BFCL_v4_live_parallel_multiple.json", 4, 6),
        ("BFCL_v4_live_irrelevance.json", 100, 8),
        ("BFCL_v4_live_relevance.json", 5, 99),
        ("BFCL_v4_live_simple.json", 26, 99),
        ("BFCL_v4_live_parallel.json", 4, 99),
        ("BFCL_v4_multiple.json", 20, 99),
        ("BFCL_v4_parallel_multiple.json", 20, 99),
        ("BFCL_v4_parallel.json", 40, 99),
        ("BFCL_v4_simple_python.json", 50, 99),
        ("BFCL_v4_simple_java.json", 20, 99),
        ("BFCL_v4_simple_javascript.json", 10, 99),
        ("unused_datasets/question/BFCL_v4_exec_multiple.json", 10, 99),
        ("unused_datasets/question/BFCL_v4_exec_parallel_multiple.json", 10, 99),
        ("unused_datasets/question/BFCL_v4_rest.json", 35, 99),
        ("unused_datasets/question/BFCL_v4_sql.json", 50, 99),
    ]
    for rel, stride, keep_from in plan:
        seen, i = set(), 0
        for e in bfcl_lines(gitdir, rev, rel):
            fns = e.get("function") or []
            if not fns:
                continue
            key = json.dumps(sorted(fns, key=lambda f: f["name"]), sort_keys=True)
            if key in seen:
                continue
            seen.add(key)
            if i % stride == 0 or len(fns) >= keep_from:
                picked.append((e["id"], fns, f"{rel} id {e['id']}"))
            i += 1

    origins = []
    for name, fns, origin in picked:
        name = re.sub(r"[^a-zA-Z0-9_.+-]", "_", name).replace("+", "__")
        if len(fns) > MAX_TOOLS:
            continue
        tools = [bfcl_tool(copy.deepcopy(f), log) for f in fns]
        if w.add(name, tools):
            origins.append((name, len(tools), origin))
    rep = w.report()
    rep.update(commit=commit, origins=origins, conversions=sorted(log), repo=GORILLA, path=BFCL_DATA)
    return rep


# ---------------------------------------------------------------------------
# github-mcp-server

GHMCP = "github/github-mcp-server"
SNAPS = "pkg/github/__toolsnaps__"
DEFAULT_TOOLSETS = ["context", "repos", "issues", "pull_requests", "users"]


def readme_toolsets(readme):
    """{toolset title: [tool names]} from the README's generated tool list
    (<summary>Title</summary> followed by "- **name** - ..." lines)."""
    out, cur = {}, None
    start = readme.find("<!-- START AUTOMATED TOOLS -->")
    end = readme.find("<!-- END AUTOMATED TOOLS -->")
    text = readme[start:end] if start >= 0 and end > start else readme
    for line in text.splitlines():
        m = re.search(r"<summary>(.*?)</summary>", line)
        if m:
            title = re.sub(r"<[^>]+>", "", m.group(1)).strip()
            cur = title if not title.startswith("Example") and "PAT" not in title else None
            if cur:
                out.setdefault(cur, [])
            continue
        m = re.match(r"^- \*\*([a-z_0-9]+)\*\*", line)
        if m and cur and m.group(1) not in out[cur]:
            out[cur].append(m.group(1))
    return {k: v for k, v in out.items() if v}


def toolset_id(title):
    ids = {"Repositories": "repos", "Pull Requests": "pull_requests", "Organizations": "orgs",
           "Code Security": "code_security", "Secret Protection": "secret_protection",
           "Security Advisories": "security_advisories", "Copilot Issue Intents": "copilot_issue_intents"}
    return ids.get(title, re.sub(r"[^a-z0-9]+", "_", title.lower()).strip("_"))


def snaps_at(gitdir, rev):
    out = {}
    for p in git_ls(gitdir, rev, SNAPS):
        if p.endswith(".snap"):
            s = json.loads(git_show(gitdir, rev, p))
            out[s["name"]] = (p, s)
    return out


def snap_tool(s):
    return oai(s["name"], s.get("description"), s.get("inputSchema"))


def build_github_mcp(gitdir, revs):
    """revs: [(label, rev)], newest first."""
    w = Writer("github-mcp-server")
    origins, commits = [], {}
    for label, rev in revs:
        commit = git_rev(gitdir, rev)
        commits[label] = commit
        snaps = snaps_at(gitdir, rev)
        groups = readme_toolsets(git_show(gitdir, rev, "README.md"))
        documented = []
        sets = []
        for title, names in groups.items():
            have = [n for n in names if n in snaps]
            documented += [n for n in have if n not in documented]
            if have and len(have) == len(names):  # every documented tool has its schema
                sets.append((toolset_id(title), have, f"README toolset '{title}'"))
        ids = {s[0]: s[1] for s in sets}
        if all(t in ids for t in DEFAULT_TOOLSETS):
            union = []
            for t in DEFAULT_TOOLSETS:
                union += [n for n in ids[t] if n not in union]
            sets.append(("default", union, "the default toolsets " + ", ".join(DEFAULT_TOOLSETS)))
        # The whole server only where every documented tool has its snapshot
        # (early versions snapshot some tools only).
        complete = all(n in snaps for names in groups.values() for n in names)
        if complete and len(documented) <= MAX_TOOLS:
            sets.append(("documented", documented, "every tool the README documents"))
        if complete and len(snaps) <= MAX_TOOLS:
            sets.append(("all_snapshots", sorted(snaps), f"every snapshot in {SNAPS} (feature-flagged tools too)"))
        for sid, names, origin in sets:
            name = f"{label}_{sid}"
            if w.add(name, [snap_tool(snaps[n][1]) for n in names]):
                origins.append((name, len(names), f"{label}: {origin}"))
    rep = w.report()
    rep.update(commits=commits, origins=origins, repo=GHMCP, path=SNAPS)
    return rep


# ---------------------------------------------------------------------------
# modelcontextprotocol/servers: literal schemas

MCPS = "modelcontextprotocol/servers"


def _match_brace(src, i):
    """Index after the bracket that closes src[i] ('{' or '['), skipping
    strings, template literals and comments."""
    depth, j, n = 0, i, len(src)
    while j < n:
        c = src[j]
        if c in "\"'`":
            q, j = c, j + 1
            while j < n and src[j] != q:
                if src[j] == "\\":
                    j += 1
                elif q == "`" and src.startswith("${", j):
                    j = _match_brace(src, j + 1) - 1
                j += 1
        elif src.startswith("//", j):
            j = src.find("\n", j)
            if j < 0:
                return n
        elif src.startswith("/*", j):
            j = src.find("*/", j) + 1
        elif c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    raise ValueError("unbalanced")


def ts_tool_literals(src):
    """The text of every object literal in src that has both a name: and an
    inputSchema: { ... } member, outermost first."""
    out = []
    for m in re.finditer(r"\binputSchema\s*:\s*\{", src):
        # walk back to the '{' that opens the enclosing object
        depth, j = 0, m.start()
        while j > 0:
            j -= 1
            c = src[j]
            if c in "}]":
                depth += 1
            elif c in "{[":
                if depth == 0:
                    break
                depth -= 1
        end = _match_brace(src, j)
        text = src[j:end]
        if re.search(r"\bname\s*:", text):
            out.append(text)
    return out


def node_eval(exprs):
    """Evaluates JavaScript object-literal expressions with node (no
    globals but JSON), returning the JSON values (None where one fails)."""
    prog = ("const vm=require('vm');const xs=JSON.parse(require('fs').readFileSync(0,'utf8'));"
            "console.log(JSON.stringify(xs.map(x=>{try{return vm.runInNewContext('('+x+')',{},{timeout:1000})}"
            "catch(e){return null}})));")
    r = subprocess.run(["node", "-e", prog], input=json.dumps(exprs), capture_output=True, text=True, check=True)
    return json.loads(r.stdout)


def py_tool_literals(src):
    """(name, description, inputSchema) of every Tool(...) call in Python
    source whose keyword arguments are all literals."""
    out = []
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.Call) and any(k.arg == "inputSchema" for k in node.keywords):
            try:
                kw = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg in ("name", "description",
                                                                                            "inputSchema")}
            except ValueError:
                continue
            out.append((kw["name"], kw.get("description"), kw["inputSchema"]))
    return out


def build_mcp_servers(gitdir, revs):
    w = Writer("mcp-servers")
    origins, commits = [], {}
    for label, rev in revs:
        commit = git_rev(gitdir, rev)
        commits[label] = commit
        servers = sorted({p.split("/")[1] for p in git_ls(gitdir, rev, "src") if p.count("/") >= 2})
        for srv in servers:
            files = [p for p in git_ls(gitdir, rev, f"src/{srv}") if re.search(r"\.(ts|py)$", p)
                     and "test" not in p and "__tests__" not in p]
            tools, bad = [], []
            for p in files:
                src = git_show(gitdir, rev, p)
                if p.endswith(".py"):
                    for name, desc, schema in py_tool_literals(src):
                        tools.append((oai(name, desc, schema), p))
                else:
                    lits = [re.sub(r"\s+as\s+const\b", "", t) for t in ts_tool_literals(src)]
                    for text, v in zip(lits, node_eval(lits) if lits else []):
                        if not isinstance(v, dict) or not isinstance(v.get("inputSchema"), dict) or \
                                not isinstance(v.get("name"), str):
                            bad.append(p)
                            continue
                        tools.append((oai(v["name"], v.get("description"), v["inputSchema"]), p))
            # a server whose tools are not all literal (zod, pydantic) is left out
            nonliteral = sum(src.count("inputSchema") for src in
                             (git_show(gitdir, rev, p) for p in files)) - len(tools)
            if not tools or nonliteral > 0 or bad:
                if tools:
                    print(f"mcp-servers {label} {srv}: left out ({nonliteral} non-literal schemas)", file=sys.stderr)
                continue
            name = f"{label}_{srv}"
            paths = sorted({p for _, p in tools})
            if w.add(name, [t for t, _ in tools]):
                origins.append((name, len(tools), f"{label}: " + ", ".join(paths)))
    rep = w.report()
    rep.update(commits=commits, origins=origins, repo=MCPS, path="src/")
    return rep


# ---------------------------------------------------------------------------
# tau-bench

TAU = "sierra-research/tau-bench"


def build_tau(gitdir, rev):
    w = Writer("tau-bench")
    commit = git_rev(gitdir, rev)
    origins = []
    for env in ("airline", "retail"):
        init = git_show(gitdir, rev, f"tau_bench/envs/{env}/tools/__init__.py")
        mods = re.findall(r"from \.(\w+) import (\w+)", init)
        order = re.search(r"ALL_TOOLS\s*=\s*\[(.*?)\]", init, re.S).group(1).split()
        order = [c.strip(",") for c in order if c.strip(",")]
        by_class = {}
        for mod, cls in mods:
            src = git_show(gitdir, rev, f"tau_bench/envs/{env}/tools/{mod}.py")
            for node in ast.walk(ast.parse(src)):
                if isinstance(node, ast.FunctionDef) and node.name == "get_info":
                    ret = [n for n in ast.walk(node) if isinstance(n, ast.Return)][0]
                    by_class[cls] = ast.literal_eval(ret.value)
        tools = [by_class[c] for c in order]
        for t in tools:
            assert t["type"] == "function"
        if w.add(env, tools):
            origins.append((env, len(tools), f"tau_bench/envs/{env}/tools/*.py get_info(), in ALL_TOOLS order"))
    rep = w.report()
    rep.update(commit=commit, origins=origins, repo=TAU, path="tau_bench/envs/*/tools/")
    return rep


# ---------------------------------------------------------------------------
# dumps of PyPI packages (made by dump_mcp.py / dump_agentdojo.py)


def build_dump(source, folder):
    """folder: <set>.json files of one package, each {"package", "version",
    "license", "license_files", "tools": [MCP tools or OpenAI tools]}."""
    w = Writer(source)
    origins, meta = [], None
    natural = lambda p: [int(x) if x.isdigit() else x for x in re.split(r"(\d+)", p.stem)]
    for p in sorted(Path(folder).glob("*.json"), key=natural):  # workspace_v1 before workspace_v1_1
        d = json.loads(p.read_text())
        meta = meta or d
        tools = []
        for t in d["tools"]:
            if t.get("type") == "function":
                tools.append(t)
            else:
                schema = t.get("inputSchema", t.get("input_schema"))
                tools.append(oai(t["name"], t.get("description"), schema))
        if not tools or len(tools) > MAX_TOOLS:
            print(f"{source}: {p.stem}: {len(tools)} tools, left out", file=sys.stderr)
            continue
        if w.add(p.stem, tools):
            extra = " ".join(f"{k}={d[k]}" for k in ("benchmark_version", "suite") if k in d)
            origins.append((p.stem, len(tools), f"{d['package']} {d['version']} {extra}".strip()
                            + (f"; server started as `{' '.join(d['command'])}`" if d.get("command") else "")))
    rep = w.report()
    rep.update(origins=origins, package=meta["package"], version=meta["version"], license=meta["license"],
               license_files=meta.get("license_files") or {})
    return rep


# ---------------------------------------------------------------------------
# LICENSE, SOURCE.md, README.md


def write_source_files(source, rep, license_text, header):
    assert license_text.strip(), f"{source}: no license text"
    d = OUT / source
    d.mkdir(parents=True, exist_ok=True)
    (d / "LICENSE").write_text(license_text.rstrip() + "\n")
    lines = [f"# {source}", "", header.strip(), "", "| set | tools | from |", "| --- | ---: | --- |"]
    for name, n, origin in rep["origins"]:
        lines.append(f"| {name}.json | {n} | {origin} |")
    if rep.get("dups"):
        lines += ["", "Left out as identical to a set already in the corpus (same tools, any order):", ""]
        lines += [f"- {a} (= {b})" for a, b in rep["dups"]]
    if rep.get("renamed"):
        lines += ["", "Tool names sanitized to ^[a-zA-Z0-9_.-]{1,64}$:", ""]
        lines += [f"- {s}: {a} -> {b}" for s, a, b in rep["renamed"]]
    (d / "SOURCE.md").write_text("\n".join(lines) + "\n")


BFCL_HEADER = """\
Tool sets from the Berkeley Function Calling Leaderboard (BFCL v4 data).

- Repository: https://github.com/ShishirPatil/gorilla ({commit})
- Path: `berkeley-function-call-leaderboard/bfcl_eval/data/` (question files, one JSON object a line, each with
  a `function` list; `multi_turn_func_doc/` for the multi-turn API classes)
- License: Apache-2.0 (LICENSE beside this file, the repository's; the package metadata says "Apache 2.0")

Which sets: every distinct multi-turn class combination the multi-turn, memory and web-search questions use (the
union of the classes' function docs, in class order, as BFCL sends them); from the single-turn files, every k-th
distinct function list in file order and every list with many functions (convert.py, `plan`).

Conversion (convert.py, `bfcl_schema`), nothing else changed:

- BFCL's type names become JSON Schema types by BFCL's own table (`bfcl_eval/constants/type_mappings.py`,
  `GORILLA_TO_OPENAPI`, the one its OpenAI handler uses): dict -> object, float -> number, tuple -> array,
  list -> array, bool -> boolean, and the Java/JavaScript names (String, Array, ArrayList, HashMap, long,
  double, char, ...) likewise; Boolean (not in the table) -> boolean. Applied in every subschema (properties,
  items, additionalProperties).
- "any" (and one unnamed type "") becomes no `type` at all, i.e. any JSON value. BFCL's handler writes
  "string" there; the schema here keeps the meaning of "any" instead.
- The top-level `parameters` gets "type": "object" (all are "dict"), as the handler sets.
- Unlike BFCL's OpenAI handler, names keep their dots (OpenAI allows ^[a-zA-Z0-9_-]+$ only, sieve and this
  corpus allow "." too), "float" parameters get no "format": "float" and no description suffix, and untyped
  properties stay untyped.

Conversions applied in this data: {conversions}
"""

GHMCP_HEADER = """\
The GitHub MCP server's tools, grouped as the server exposes them.

- Repository: https://github.com/github/github-mcp-server
- Revisions: {commits}
- Path: `pkg/github/__toolsnaps__/*.snap` (the server's own JSON snapshot of each tool it lists: name,
  description, inputSchema), grouped by the README's generated tool list (`<summary>Toolset</summary>` then
  `- **tool**` lines)
- License: MIT (LICENSE beside this file)

Sets per revision: each documented toolset whose tools all have a snapshot; `default` (the default toolsets
context, repos, issues, pull_requests, users); `documented` (every documented tool) and `all_snapshots` (every
snapshot, feature-flagged tools too), only where every documented tool has a snapshot. Early revisions
snapshot only some tools, so they give only their complete toolsets.

Conversion: `inputSchema` becomes `parameters`; name and description as they are; `annotations` dropped.
"""

MCPS_HEADER = """\
Tools of the MCP reference servers whose input schemas are written as literal JSON Schema objects.

- Repository: https://github.com/modelcontextprotocol/servers
- Revisions: {commits} (the commit before "Archive unmaintained servers", where the servers below were
  still in `src/`)
- Path: `src/<server>/` (TypeScript `inputSchema: {{...}}` object literals, evaluated as JavaScript with node
  with no globals; Python `Tool(name=..., inputSchema={{...}})` dict literals, read with `ast.literal_eval`)
- License: MIT at that commit (LICENSE beside this file). The repository has since begun moving to
  Apache-2.0 for new contributions; nothing here comes from after that.

Servers whose schemas are built by code (zod, pydantic: filesystem, everything, github, gitlab, git, fetch,
time) are left out here: their schemas would have to be rebuilt by a guess at the library's output. (git and
fetch are in pypi-mcp-server-git and pypi-mcp-server-fetch instead, as the published packages list them.)

Conversion: `inputSchema` becomes `parameters`; name and description as they are.
"""

TAU_HEADER = """\
The tau-bench tool sets (airline, retail).

- Repository: https://github.com/sierra-research/tau-bench ({commit})
- Path: `tau_bench/envs/<env>/tools/*.py`, each tool class's `get_info()` return value (an OpenAI tool dict
  literal, read with `ast.literal_eval`), in the order of `ALL_TOOLS` in the tools package
- License: MIT (LICENSE beside this file)

Conversion: none; the dicts are OpenAI tools already.
"""

DUMP_HEADER = """\
The tools of {package} {version} (PyPI), as the published package lists them.

- Package: https://pypi.org/project/{package}/ version {version}
- License: {license} (the license file{s} of the installed distribution beside this file as LICENSE)
- How: {how}

Conversion: {conv}
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gorilla")
    ap.add_argument("--gorilla-rev", default="HEAD")
    ap.add_argument("--github-mcp")
    ap.add_argument("--github-mcp-revs", default="head=HEAD,v1.0.0=v1.0.0,v0.26.0=v0.26.0,v0.20.0=v0.20.0")
    ap.add_argument("--mcp-servers")
    ap.add_argument("--mcp-servers-revs", default="archived=d53d6cc7^")
    ap.add_argument("--tau-bench")
    ap.add_argument("--tau-bench-rev", default="HEAD")
    ap.add_argument("--pypi-dumps", help="folder of dump_mcp.py output: one folder per package")
    ap.add_argument("--agentdojo", help="folder of dump_agentdojo.py output")
    a = ap.parse_args()
    revs = lambda s: [tuple(x.split("=", 1)) for x in s.split(",")]
    if a.gorilla:
        rep = build_bfcl(a.gorilla, a.gorilla_rev)
        write_source_files("bfcl", rep, git_show(a.gorilla, rep["commit"], "LICENSE"), BFCL_HEADER.format(
            commit=rep["commit"], conversions=", ".join(rep["conversions"])))
    if a.github_mcp:
        rep = build_github_mcp(a.github_mcp, revs(a.github_mcp_revs))
        commits = "; ".join(f"{k} = {v}" for k, v in rep["commits"].items())
        write_source_files("github-mcp-server", rep, git_show(a.github_mcp, rep["commits"]["head"], "LICENSE"),
                           GHMCP_HEADER.format(commits=commits))
    if a.mcp_servers:
        rep = build_mcp_servers(a.mcp_servers, revs(a.mcp_servers_revs))
        commits = "; ".join(f"{k} = {v}" for k, v in rep["commits"].items())
        write_source_files("mcp-servers", rep, git_show(a.mcp_servers, list(rep["commits"].values())[0], "LICENSE"),
                           MCPS_HEADER.format(commits=commits))
    if a.tau_bench:
        rep = build_tau(a.tau_bench, a.tau_bench_rev)
        write_source_files("tau-bench", rep, git_show(a.tau_bench, rep["commit"], "LICENSE"),
                           TAU_HEADER.format(commit=rep["commit"]))
    if a.pypi_dumps:
        for folder in sorted(p for p in Path(a.pypi_dumps).iterdir() if p.is_dir()):
            source = "pypi-" + folder.name.replace("awslabs.", "awslabs-")
            rep = build_dump(source, folder)
            lic = "\n\n".join((f"==> {k} <==\n\n" if len(rep["license_files"]) > 1 else "") + v
                               for k, v in rep["license_files"].items())
            write_source_files(source, rep, lic, DUMP_HEADER.format(
                package=rep["package"], version=rep["version"], license=rep["license"],
                s="s" if len(rep["license_files"]) > 1 else "",
                how="the server started locally over stdio (dump_mcp.py, no network) and asked for tools/list; "
                    "each tool's name, description and inputSchema kept",
                conv="`inputSchema` becomes `parameters`; nothing else changed."))
    if a.agentdojo:
        rep = build_dump("agentdojo", a.agentdojo)
        write_source_files("agentdojo", rep, "\n\n".join(rep["license_files"].values()) or "", DUMP_HEADER.format(
            package="agentdojo", version=rep["version"], license=rep["license"], s="",
            how="dump_agentdojo.py: every task suite of every benchmark version, its tools as AgentDojo's "
                "OpenAI pipeline sends them (name, description, parameters = the pydantic model's "
                "model_json_schema()); identical versions of a suite are written once",
            conv="none."))
    write_readme()


def write_readme():
    """README.md: the per-source table and the size distribution, from the
    files on disk (so a partial rebuild keeps it right)."""
    rows, sizes = [], []
    for d in sorted(p for p in OUT.iterdir() if p.is_dir() and (p / "SOURCE.md").exists()):
        n = [len(json.loads(f.read_text())) for f in sorted(d.glob("*.json"))]
        sizes += n
        lic = (d / "LICENSE").read_text()
        kind = ("Apache-2.0" if "Apache License" in lic and "MIT" not in lic[:200] else
                "MIT" if "MIT" in lic[:400] or "Permission is hereby granted" in lic else
                "BSD" if "Redistribution and use" in lic else "see LICENSE")
        rows.append(f"| [{d.name}]({d.name}/SOURCE.md) | {kind} | {len(n)} | {sum(n)} | "
                    f"{sum(1 for x in n if x >= 20)} | {max(n)} |")
    buckets = [(1, 1), (2, 4), (5, 9), (10, 19), (20, 49), (50, 128)]
    hist = [f"| {lo}{'' if lo == hi else '-' + str(hi)} | {sum(1 for x in sizes if lo <= x <= hi)} |"
            for lo, hi in buckets]
    text = README_TEMPLATE.format(
        table="\n".join(rows), total=len(sizes), tools=sum(sizes), big=sum(1 for x in sizes if x >= 20),
        largest=max(sizes), median=sorted(sizes)[len(sizes) // 2], hist="\n".join(hist))
    (OUT / "README.md").write_text(text)


README_TEMPLATE = """\
# Tool-set corpus

Real public tool sets (function-calling benchmarks, MCP servers' tool lists) for testing and timing
sieve's tool-call constraints (`sieve compile --tools`, `sieve sample --tools`, the server's `tools`).
Used by tests/schema/test_toolsets.py and tests/bench/toolsets_ttfm.py.

Each set is one file `<source>/<name>.json`: a JSON array of OpenAI tools,
`[{{"type": "function", "function": {{"name": ..., "description": ..., "parameters": {{JSON Schema}}}}}}]`,
1 to 128 tools, names matching `^[a-zA-Z0-9_.-]{{1,64}}$` and unique within the set. Parameter schemas are as
published, apart from the conversions each source's SOURCE.md lists (only BFCL's own type names are mapped).
Identical sets (the same tools in any order) are kept once. Each source folder has the source's license text
(LICENSE) and SOURCE.md: where the data comes from (repository and commit, or package and version), the path,
the conversion, and where each set comes from.

The files are generated by convert.py (with dump_mcp.py and dump_agentdojo.py for the PyPI packages); the
tests need neither it nor the network. PyPI MCP servers tried and left out: blender-mcp,
awslabs.ecs-mcp-server and mcp-server-time (their distributions carry no license file);
awslabs.amazon-mq-mcp-server, awslabs.amazon-sns-sqs-mcp-server, awslabs.kinesis-mcp-server,
awslabs.prometheus-mcp-server and mcp-neo4j-memory (they do not start without their service); dbt-mcp (did
not install on Python 3.11). From modelcontextprotocol/servers, the servers whose schemas are built by zod or
pydantic at run time (mcp-servers/SOURCE.md).

Use:

    SIEVE_BIN=build/sieve .venv/bin/python -m pytest -q tests/schema/test_toolsets.py
    .venv/bin/python tests/bench/toolsets_ttfm.py --sieve build/sieve --out toolsets_ttfm.jsonl

## Sources

| source | license | sets | tools | sets with 20+ tools | largest |
| --- | --- | ---: | ---: | ---: | ---: |
{table}

## Sizes

{total} sets, {tools} tools; {big} sets have 20 or more tools; the largest has {largest}; the median set has
{median}.

| tools in the set | sets |
| --- | ---: |
{hist}
"""


if __name__ == "__main__":
    main()
