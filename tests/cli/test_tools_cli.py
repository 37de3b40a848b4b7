"""`sieve compile | match | sample --tools`: the tool-call constraint the server
builds (src/api/tools.c sv_tools_call_schema), compiled without a server.

A generated list of 64 tools with realistic parameter schemas (enums,
bounded integers, nested objects, arrays, optional fields, an open object)
compiles under every mode a request can ask for; what `sample` draws parses,
names real tools and has arguments Python's jsonschema accepts under that
tool's parameters, some draws holding more than 8 calls (the old cap); `match`
accepts a list of 12 calls to different tools and rejects an unknown tool,
bad arguments, an empty list and a second call where only one is allowed."""
import json
import random

import jsonschema
import pytest

N_TOOLS = 64


def _param(rng, i):
    """One property schema, cycling through the shapes agents' tools use."""
    k = i % 9
    if k == 0:
        return {"type": "string", "enum": rng.sample(["low", "medium", "high", "urgent", "none", "auto"], 3),
                "description": "How much"}
    if k == 1:
        lo = rng.randint(-10, 5)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.choice([9, 100, 1000])}
    if k == 2:
        # most strings are free text; a few are bounded
        if rng.random() < 0.25:
            return {"type": "string", "maxLength": rng.choice([8, 16]), "description": "A short name"}
        return {"type": "string", "description": "Free text"}
    if k == 3:
        return {"type": "array", "items": {"type": "string"}, "maxItems": rng.choice([3, 5])}
    if k == 4:
        return {"type": "object", "properties": {"lat": {"type": "number", "minimum": -90, "maximum": 90},
                                                 "lon": {"type": "number", "minimum": -180, "maximum": 180}},
                "required": ["lat", "lon"], "additionalProperties": False}
    if k == 5:
        return {"type": "boolean"}
    if k == 6:
        return {"type": "string", "pattern": "^[A-Z]{2,3}-[0-9]{1,4}$"}
    if k == 7:
        return {"type": "array", "minItems": 1, "maxItems": 3,
                "items": {"type": "object", "properties": {"id": {"type": "integer", "minimum": 0},
                                                           "tag": {"enum": ["a", "b", "c"]}},
                          "required": ["id"], "additionalProperties": False}}
    return {"type": ["string", "null"]}


def make_tools(n=N_TOOLS, seed=14):
    rng = random.Random(seed)
    verbs = ["get", "set", "list", "create", "delete", "search", "update", "send"]
    nouns = ["weather", "ticket", "user", "file", "event", "order", "message", "invoice"]
    tools = []
    for t in range(n):
        name = f"{verbs[t % 8]}_{nouns[(t // 8) % 8]}_{t}"
        props, required = {}, []
        for j in range(rng.randint(1, 5)):
            pname = f"p{j}_{rng.choice(['id', 'name', 'level', 'count', 'when', 'where', 'tags'])}"
            props[pname] = _param(rng, t + j)
            if rng.random() < 0.6:
                required.append(pname)
        params = {"type": "object", "properties": props, "required": required}
        if t % 16 != 3:  # every sixteenth tool is an open object: extra keys allowed
            params["additionalProperties"] = False
        if t % 16 == 5:
            params = {"type": "object", "properties": {}, "additionalProperties": False}  # no arguments
        tools.append({"type": "function",
                      "function": {"name": name, "description": f"Tool {t}: {name.replace('_', ' ')}",
                                   "parameters": params}})
    return tools


TOOLS = make_tools()
PARAMS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
OPEN = TOOLS[3]["function"]["name"]


@pytest.fixture(scope="module")
def tools_file(tmp_path_factory):
    p = tmp_path_factory.mktemp("tools") / "tools.json"
    p.write_text(json.dumps(TOOLS))
    assert "additionalProperties" not in PARAMS[OPEN]
    return str(p)


def valid_args(name, args):
    jsonschema.Draft202012Validator(PARAMS[name]).validate(args)


def check_calls(calls, names=None):
    assert isinstance(calls, list) and calls
    for c in calls:
        assert set(c) == {"name", "arguments"}, c
        assert c["name"] in (names or PARAMS), c["name"]
        valid_args(c["name"], c["arguments"])


def stats(sieve, *args):
    r = sieve("compile", *args)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    st = json.loads(r.stdout)
    assert st["states"] > 0 and st["compile_us"] >= 0
    return st


def test_compiles_in_every_mode(sieve, tools_file):
    par = stats(sieve, "--tools", tools_file)
    one = stats(sieve, "--tools", tools_file, "--parallel-tool-calls", "false")
    named = stats(sieve, "--tools", tools_file, "--tool-choice", TOOLS[45]["function"]["name"])
    obj = stats(sieve, "--tools", tools_file, "--tool-format", "object")
    auto = stats(sieve, "--tools", tools_file, "--tool-choice", "auto")
    # An open call list is one copy of the calls' union and a loop: about
    # the size of exactly one call, not eight (or k) of them.
    assert par["states"] <= one["states"] + 8, (par, one)
    assert obj["states"] < one["states"] and named["states"] < one["states"] // 8
    # the shortest output is one call; a named call is longer than the
    # shortest call of any tool
    assert par["min_len"] == one["min_len"] == obj["min_len"] + 2
    assert named["min_len"] > one["min_len"]
    # auto constrains the same call as required once the model opens one
    assert auto["states"] == par["states"] and auto["min_len"] == par["min_len"]


def sample(sieve, *args, n=50, seed=1, max_len=64):
    r = sieve("sample", *args, "-n", str(n), "--seed", str(seed), "--max-len", str(max_len), timeout=300)
    assert r.returncode == 0, (args, r.stdout, r.stderr)
    lines = r.stdout.split("\n")[:-1]  # not splitlines: U+2028 and friends occur inside the literals
    assert len(lines) == n
    return [json.loads(json.loads(line)) for line in lines]


def test_samples_are_valid_calls(sieve, tools_file):
    # After each call the sampler continues or closes the list with even
    # odds, so about 1 draw in 256 has more than 8 calls: 2000 draws give
    # some whatever the seed (none in 2000 has odds near e**-8).
    many = sample(sieve, "--tools", tools_file, n=2000, seed=7, max_len=2000)
    for calls in many:
        check_calls(calls)
    counts = [len(c) for c in many]
    assert max(counts) > 8, max(counts)  # no cap on parallel calls
    assert any(c["name"] == OPEN for calls in many for c in calls)
    assert len({c["name"] for calls in many for c in calls}) > N_TOOLS // 2

    for calls in sample(sieve, "--tools", tools_file, "--parallel-tool-calls", "false", n=40, seed=2):
        assert len(calls) == 1
        check_calls(calls)
    name = TOOLS[39]["function"]["name"]
    for calls in sample(sieve, "--tools", tools_file, "--tool-choice", name, n=40, seed=3, max_len=500):
        assert len(calls) == 1
        check_calls(calls, names=[name])
    for call in sample(sieve, "--tools", tools_file, "--tool-format", "object", n=40, seed=4):
        assert isinstance(call, dict)
        check_calls([call])


def twelve_calls(sieve, tools_file):
    """Twelve calls to different tools, each as the constraint spells it: one
    call object drawn by `sample --tool-format object` (the items of the call
    list are the same language)."""
    texts, names = [], set()
    r = sieve("sample", "--tools", tools_file, "--tool-format", "object", "-n", "300", "--seed", "11")
    assert r.returncode == 0, r.stderr
    for line in r.stdout.split("\n")[:-1]:
        text = json.loads(line)
        call = json.loads(text)
        if call["name"] not in names and len(texts) < 12:
            names.add(call["name"])
            texts.append(text)
    assert len(texts) == 12
    return texts


def match(sieve, tools_file, texts, *args):
    r = sieve("match", "--tools", tools_file, *args, stdin="".join(json.dumps(t) + "\n" for t in texts))
    assert r.returncode == 0, r.stderr
    return r.stdout.split()


def listed(texts):
    return "[" + ", ".join(texts) + "]"


def test_match_twelve_calls(sieve, tools_file):
    texts = twelve_calls(sieve, tools_file)
    calls = [json.loads(t) for t in texts]
    check_calls(calls)
    good = listed(texts)
    unknown = listed(texts[:10] + [json.dumps({"name": "no_such_tool", "arguments": {}})] + texts[10:])
    # bad arguments in the tenth call or later: an unknown key where
    # additionalProperties is false, a required key missing
    closed = next(i for i, c in enumerate(calls) if i >= 9 and PARAMS[c["name"]].get("additionalProperties") is False)
    extra = dict(calls[closed], arguments=dict(calls[closed]["arguments"], zzz_unknown=1))
    bad_args = listed(texts[:closed] + [json.dumps(extra, ensure_ascii=False)] + texts[closed + 1:])
    needy = next(i for i, c in enumerate(calls) if i >= 9 and PARAMS[c["name"]].get("required"))
    empty = json.dumps({"name": calls[needy]["name"], "arguments": {}})
    missing = listed(texts[:needy] + [empty] + texts[needy + 1:])
    assert match(sieve, tools_file, [good, listed(texts[:9]), unknown, bad_args, missing, "[]"]) == \
        ["1", "1", "0", "0", "0", "0"]
    # one call only: parallel false, or a named tool (a call with at most one
    # argument: see test_arguments_in_each_tools_own_order for why)
    one = listed(texts[:1])
    assert match(sieve, tools_file, [one, good], "--parallel-tool-calls", "false") == ["1", "0"]
    k = next(i for i, c in enumerate(calls) if len(c["arguments"]) <= 1)
    other = listed(texts[k + 1:k + 2] or texts[:1])
    assert match(sieve, tools_file, [listed(texts[k:k + 1]), other, listed(texts[k:k + 1] * 2)],
                 "--tool-choice", calls[k]["name"]) == ["1", "0", "0"]
    # object format: one call object, no list
    assert match(sieve, tools_file, [texts[0], one], "--tool-format", "object") == ["1", "0"]


def test_parameters_with_defs_and_refs(sieve, tmp_path):
    """Parameters written as Pydantic writes them: $defs with $refs into
    them, and a recursive $ref to the parameters' root. The refs resolve
    inside each tool's own parameters, whatever the call schema wraps them
    in."""
    tree = {"type": "object", "properties": {"label": {"type": "string"},
                                             "kids": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}},
            "required": ["label"], "additionalProperties": False}
    pyd = {"type": "object", "properties": {"where": {"$ref": "#/$defs/Place"},
                                            "when": {"anyOf": [{"$ref": "#/$defs/Span"}, {"type": "null"}]}},
           "required": ["where"], "additionalProperties": False,
           "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                               "additionalProperties": False},
                     "Span": {"type": "object", "properties": {"days": {"type": "integer", "minimum": 1}},
                              "required": ["days"], "additionalProperties": False}}}
    tools = [{"type": "function", "function": {"name": "plan", "parameters": pyd}},
             {"type": "function", "function": {"name": "tree", "parameters": tree}}]
    p = tmp_path / "tools.json"
    p.write_text(json.dumps(tools))
    good = [{"name": "plan", "arguments": {"where": {"city": "Oslo"}, "when": {"days": 3}}},
            {"name": "tree", "arguments": {"label": "a", "kids": [{"label": "b", "kids": [{"label": "c"}]}]}}]
    bad = [[{"name": "plan", "arguments": {"where": {"town": "Oslo"}}}],
           [{"name": "plan", "arguments": {"where": {"city": "Oslo"}, "when": {"days": 0}}}],
           [{"name": "tree", "arguments": {"label": "a", "kids": [{"kids": []}]}}]]
    assert match(sieve, str(p), [json.dumps(good)] + [json.dumps(b) for b in bad]) == ["1", "0", "0", "0"]
    for draw in sample(sieve, "--tools", str(p), n=40, seed=5, max_len=300):
        for call in draw:
            schema = pyd if call["name"] == "plan" else tree
            assert not list(jsonschema.Draft202012Validator(schema).iter_errors(call["arguments"])), call


def test_arguments_in_each_tools_own_order(sieve, tmp_path):
    """A tool's arguments in the order its own parameters list them, whatever
    order another tool lists the same names in."""
    def tool(name, keys):
        return {"type": "function", "function": {"name": name, "parameters": {
            "type": "object", "properties": {k: {"type": "integer"} for k in keys}, "additionalProperties": False}}}
    p = tmp_path / "tools.json"
    p.write_text(json.dumps([tool("f", ["x", "y"]), tool("g", ["y", "x"])]))
    calls = [[{"name": "f", "arguments": {"x": 1, "y": 2}}], [{"name": "g", "arguments": {"y": 1, "x": 2}}]]
    assert match(sieve, str(p), [json.dumps(calls[1])], "--tool-choice", "g") == ["1"]  # g alone: its order
    assert match(sieve, str(p), [json.dumps(c) for c in calls]) == ["1", "1"]  # g among the tools: still its order
    swapped = [[{"name": "f", "arguments": {"y": 2, "x": 1}}], [{"name": "g", "arguments": {"x": 2, "y": 1}}]]
    assert match(sieve, str(p), [json.dumps(c) for c in swapped]) == ["0", "0"]  # the other tool's order is not taken


def test_arguments_in_definition_order_only(sieve, tmp_path):
    """Tool calls compile with the definition order of keys alone, as the
    server compiles them (src/server/server.c constraint_opts): the orders a
    schema also takes for data written elsewhere (a required list's, a
    branch's) are not in a constraint that only generation reads.
    --extra-key-orders true puts them back, and a schema keeps them."""
    params = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                               "c": {"type": "integer"}},
              "required": ["c", "b"], "additionalProperties": False}
    p = tmp_path / "tools.json"
    p.write_text(json.dumps([{"type": "function", "function": {"name": "f", "parameters": params}}]))
    defined = [{"name": "f", "arguments": {"a": 1, "b": 2, "c": 3}}, {"name": "f", "arguments": {"b": 2, "c": 3}}]
    required_first = [{"name": "f", "arguments": {"c": 3, "b": 2, "a": 1}}]
    texts = [json.dumps([x]) for x in defined + required_first]
    for x in defined + required_first:
        jsonschema.validate(x["arguments"], params)
    assert match(sieve, str(p), texts) == ["1", "1", "0"]
    assert match(sieve, str(p), texts, "--extra-key-orders", "true") == ["1", "1", "1"]
    s = tmp_path / "params.json"
    s.write_text(json.dumps(params))
    r = sieve("match", "--schema", str(s), stdin="".join(json.dumps(json.dumps(x["arguments"])) + "\n"
                                                         for x in defined + required_first))
    assert r.stdout.split() == ["1", "1", "1"], r.stderr
    # fewer states, and the first key is forced once no other order may start
    a, b = stats(sieve, "--tools", str(p)), stats(sieve, "--tools", str(p), "--extra-key-orders", "true")
    assert a["states"] < b["states"] and a["forced_states"] > 0


@pytest.mark.parametrize("args, needle", [
    (["--extra-key-orders", "maybe"], "invalid value 'maybe' for --extra-key-orders"),
    (["--tool-choice", "auto"], "need --tools"),
    (["--tools", "TOOLS", "--regex", "a"], "exactly one constraint"),
    (["--tools", "TOOLS", "--tool-choice", "no_such_tool"], "'no_such_tool' is not one of the tools"),
    (["--tools", "TOOLS", "--tool-choice", "none"], "invalid value 'none' for --tool-choice"),
    (["--tools", "TOOLS", "--parallel-tool-calls", "yes"], "invalid value 'yes' for --parallel-tool-calls"),
    (["--tools", "TOOLS", "--tool-format", "list"], "invalid value 'list' for --tool-format"),
])
@pytest.mark.parametrize("verb", ["compile", "match", "sample"])
def test_usage_errors(sieve, tools_file, verb, args, needle):
    r = sieve(verb, *[tools_file if a == "TOOLS" else a for a in args], stdin="")
    assert r.returncode == 64, (r.stdout, r.stderr)
    assert needle in r.stderr


@pytest.mark.parametrize("tools, kind, needle", [
    ("[{bad", "syntax", "not JSON"),
    ("[]", "arg", "empty"),
    ('{"type": "function"}', "arg", "must be a list"),
    ('[{"type": "function", "function": {"name": "a b"}}]', "arg", "function.name"),
    ('[{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}]',
     "arg", "defined twice"),
    ('[{"type": "function", "function": {"name": "f", "parameters": []}}]', "arg", "parameters"),
    ('[{"type": "function", "function": {"name": "f", "parameters": {"type": "array", "uniqueItems": true}}}]',
     "unsupported", "uniqueItems"),
])
def test_bad_tools(sieve, tools, kind, needle):
    """Tools the server refuses are constraint errors: exit 2, the error object on stdout."""
    r = sieve("compile", "--tools", "-", stdin=tools)
    assert r.returncode == 2, (r.stdout, r.stderr)
    err = json.loads(r.stdout)["error"]
    assert err["type"] == kind and needle in err["message"], err


def test_unreadable_file(sieve, tmp_path):
    r = sieve("compile", "--tools", str(tmp_path / "missing.json"))
    assert r.returncode == 1 and "cannot open" in r.stderr


@pytest.mark.parametrize("verb", ["compile", "match", "sample"])
def test_help_lists_the_tool_flags(sieve, verb):
    r = sieve(verb, "--help")
    assert r.returncode == 0
    for flag in ("--tools FILE", "--tool-choice", "--parallel-tool-calls true|false",
                 "--tool-format array|object|tagged"):
        assert flag in r.stdout, (verb, flag)


def test_print_schema_is_what_compiles(sieve, tools_file, tmp_path):
    # --print-schema gives the call schema itself (the benchmarks hand it to
    # peers): it is JSON Schema that Python's jsonschema takes, it names every
    # tool once, and compiled as a schema it is the same automaton as --tools.
    for mode in ([], ["--parallel-tool-calls", "false"], ["--tool-choice", TOOLS[45]["function"]["name"]],
                 ["--tool-format", "object"]):
        r = sieve("compile", "--tools", tools_file, *mode, "--print-schema")
        assert r.returncode == 0, (mode, r.stdout, r.stderr)
        doc = json.loads(r.stdout)
        jsonschema.Draft202012Validator.check_schema(doc)
        named = bool(mode) and mode[0] == "--tool-choice"
        assert len(doc["$defs"]) == (1 if named else N_TOOLS)
        p = tmp_path / "calls.json"
        p.write_text(r.stdout)
        a, b = stats(sieve, "--tools", tools_file, *mode), stats(sieve, "--schema", str(p), "--extra-key-orders", "false")
        for k in ("states", "byte_classes", "forced_states", "min_len", "parts"):
            assert a[k] == b[k], (mode, k, a, b)
    # one valid call list and one invalid, judged by the printed schema
    doc = json.loads(sieve("compile", "--tools", tools_file, "--print-schema").stdout)
    name = TOOLS[5]["function"]["name"]  # no arguments
    jsonschema.Draft202012Validator(doc).validate([{"name": name, "arguments": {}}])
    assert not jsonschema.Draft202012Validator(doc).is_valid([{"name": "no_such_tool", "arguments": {}}])
    r = sieve("compile", "--schema", str(p), "--print-schema")
    assert r.returncode == 64 and "--print-schema" in r.stderr
    r = sieve("match", "--tools", tools_file, "--print-schema")
    assert r.returncode == 64


def tagged(texts, between="\n"):
    return between.join("<tool_call>\n" + t + "\n</tool_call>" for t in texts)


def test_tagged_auto(sieve, tools_file):
    """tool_choice auto for the ChatML family (src/api/tools.h): free text in
    which every <tool_call> block is a call of one of the tools, any number
    of them (one with parallel_tool_calls false), as a structural tag."""
    texts = twelve_calls(sieve, tools_file)
    calls = [json.loads(t) for t in texts]
    closed = next(i for i, c in enumerate(calls) if PARAMS[c["name"]].get("additionalProperties") is False)
    extra = json.dumps(dict(calls[closed], arguments=dict(calls[closed]["arguments"], zzz_unknown=1)))
    unknown = json.dumps({"name": "no_such_tool", "arguments": {}})
    cases = {
        "Just text, no call.": "1",
        "": "1",
        "Let me check. " + tagged(texts[:1]): "1",
        tagged(texts[:1]) + " Done.": "1",
        "First: " + tagged(texts[:12], between="\nthen\n"): "1",
        tagged(texts[:3], between=""): "1",
        "Text " + tagged([unknown]): "0",
        tagged(texts[:closed] + [extra]): "0",
        "Text <tool_call>\nnot a call\n</tool_call>": "0",
        "Text <tool_call>" + texts[0]: "0",  # the block's newline is part of the format
        tagged(texts[:1])[:-3]: "0",  # a call cut short
        "A trigger written as text <tool_call> is a call.": "0",
    }
    got = match(sieve, tools_file, list(cases), "--tool-choice", "auto", "--tool-format", "tagged")
    assert got == list(cases.values()), [t for t, g, w in zip(cases, got, cases.values()) if g != w]
    one = {"Hi " + tagged(texts[:1]): "1", tagged(texts[:2]): "0", tagged(texts[:1]) + " and more": "0",
           "No call at all.": "1"}
    got = match(sieve, tools_file, list(one), "--tool-choice", "auto", "--tool-format", "tagged",
                "--parallel-tool-calls", "false")
    assert got == list(one.values()), got
    # what the server compiles: the call object schema (as --tool-format
    # object prints it) in free text that stops at "<tool_call>"
    r = sieve("compile", "--tools", tools_file, "--tool-choice", "auto", "--tool-format", "tagged",
              "--print-schema")
    doc = json.loads(r.stdout)
    assert doc["frame"] == {"trigger": "<tool_call>", "open": "\n", "close": "\n</tool_call>", "blocks": True,
                            "repeat": True}
    obj = json.loads(sieve("compile", "--tools", tools_file, "--tool-choice", "auto", "--tool-format", "object",
                           "--print-schema").stdout)
    assert doc["schema"] == obj and len(obj["$defs"]) == N_TOOLS
    # and it keeps the call schema's parts: about its size, not a flat copy
    framed = stats(sieve, "--tools", tools_file, "--tool-choice", "auto", "--tool-format", "tagged")
    plain = stats(sieve, "--tools", tools_file, "--tool-format", "object")
    assert framed["states"] < 2 * plain["states"], (framed, plain)


def test_tagged_list_auto(sieve, tools_file):
    """tool_choice auto for the other families: free text, then (from its
    `[{"name"` on) the call list, which ends the answer."""
    texts = twelve_calls(sieve, tools_file)
    unknown = json.dumps({"name": "no_such_tool", "arguments": {}})
    cases = {
        "Just text.": "1",
        listed(texts[:1]): "1",
        listed(texts): "1",
        "Sure. " + listed(texts[:3]): "1",
        listed(texts[:2]) + " and text after": "0",
        listed(texts[:1] + [unknown]): "0",
        '[{"name": "no_such_tool"': "0",
        "[1, 2] is a list, not a call": "1",
    }
    args = ("--tool-choice", "auto", "--tool-format", "tagged-list")
    got = match(sieve, tools_file, list(cases), *args)
    assert got == list(cases.values()), [t for t, g, w in zip(cases, got, cases.values()) if g != w]
    got = match(sieve, tools_file, [listed(texts[:1]), listed(texts[:2])], *args, "--parallel-tool-calls", "false")
    assert got == ["1", "0"]
