"""The tool-set corpus (tests/data/toolsets: real public tool sets from
function-calling benchmarks and MCP servers, at least 150 of them) through
`sieve compile --tools` and `sieve sample --tools`.

- Every set compiles as a tool_choice "required" call list with parallel
  calls (--tool-choice required --parallel-tool-calls true) and as the one
  call object "auto" constrains (--tool-choice auto --tool-format object).
- Soundness by sampling: every sampled call list (required, parallel) parses
  as JSON, is a non-empty list of {"name", "arguments"} objects, each name
  one of the set's tools, and each call's arguments valid under that tool's
  parameters (a tool without parameters takes an object), judged by Python's
  jsonschema (Draft 2020-12 unless a schema names its draft; integers
  spelled 10.0 count as integers, patterns run by an ECMA-262 engine, as in
  test_sampling.py). Formats are checked when every format in the set is
  one sieve supports (all of the corpus today), else not at all.

The sets are run two at a time (the machines have 2 cores). Compiling every
set twice and sampling it once took 2m10s there (Dec 2026), while 75 of the
246 sets still failed fast on compile budgets; sets that compile take longer
than sets that fail, so expect more once they do."""
import json
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal

import suite
from test_sampling import validator

CORPUS = suite.ROOT / "tests" / "data" / "toolsets"
MIN_SETS = 150
NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
MAX_TOOLS = 128
N_SAMPLES = 3
SEED = 11
JOBS = min(2, os.cpu_count() or 1)
MODES = {
    "required": ["--tool-choice", "required", "--parallel-tool-calls", "true"],
    "auto-object": ["--tool-choice", "auto", "--tool-format", "object"],
}
# fsm/internal/json_format.h: the formats sieve generates (narrower than or equal to
# what jsonschema's FormatChecker accepts).
SIEVE_FORMATS = {"date-time", "date", "time", "duration", "email", "hostname", "ipv4", "ipv6", "uri",
                 "uri-reference", "uuid"}


def toolsets():
    if not CORPUS.is_dir():
        raise AssertionError(f"the tool-set corpus is missing: {CORPUS}")
    sets = sorted(CORPUS.glob("*/*.json"))
    assert len(sets) >= MIN_SETS, f"the tool-set corpus has {len(sets)} sets in {CORPUS}, fewer than {MIN_SETS}"
    return sets


def rel(path):
    return path.relative_to(CORPUS).as_posix()


def run(args, timeout=300):
    t = time.monotonic()
    r = subprocess.run([suite.sieve_bin(), *args], capture_output=True, text=True, timeout=timeout)
    return r, time.monotonic() - t


def parallel(fn, items):
    with ThreadPoolExecutor(JOBS) as ex:
        return list(ex.map(fn, items))


def outcome(r):
    """The error of a failed sieve run, as one line."""
    try:
        e = json.loads(r.stdout)["error"]
        return f"exit {r.returncode}: {e.get('type')}: {e.get('message')}"
    except (ValueError, KeyError, TypeError):
        return f"exit {r.returncode}: {(r.stderr or r.stdout).strip()[-300:]}"


def test_corpus_layout():
    """Every set is a list of 1-128 OpenAI tools with valid, unique names and
    object parameters; every source folder carries LICENSE and SOURCE.md."""
    sets = toolsets()
    bad = []
    for path in sets:
        tools = json.loads(path.read_text())
        if not isinstance(tools, list) or not 1 <= len(tools) <= MAX_TOOLS:
            bad.append((rel(path), "not a list of 1 to 128 tools"))
            continue
        names = [t.get("function", {}).get("name") for t in tools]
        if any(t.get("type") != "function" or not isinstance(n, str) or not NAME_RE.match(n)
               for t, n in zip(tools, names)):
            bad.append((rel(path), "a tool is not {type: function, function: {name}} with a valid name"))
        if len(set(names)) != len(names):
            bad.append((rel(path), "duplicate tool names"))
        if any(not isinstance(t["function"].get("parameters", {}), dict) for t in tools):
            bad.append((rel(path), "parameters that are not an object"))
    for d in {p.parent for p in sets}:
        for f in ("LICENSE", "SOURCE.md"):
            if not (d / f).is_file():
                bad.append((d.name, f"no {f}"))
    assert not bad, f"{len(bad)} problems in the corpus: {bad[:10]}"


def test_every_set_compiles():
    """Both modes, every set: exit 0 and the stats object."""
    sets = toolsets()
    jobs = [(p, m) for p in sets for m in MODES]

    def one(job):
        path, mode = job
        r, dt = run(["compile", "--tools", str(path), *MODES[mode]])
        if r.returncode != 0:
            return job, dt, outcome(r)
        try:
            stats = json.loads(r.stdout)
            assert "compile_us" in stats and "states" in stats
        except (ValueError, AssertionError):
            return job, dt, f"exit 0 but no stats object: {r.stdout[:200]!r}"
        return job, dt, None

    t = time.monotonic()
    res = parallel(one, jobs)
    failed = [(f"{rel(p)} [{m}]", err) for (p, m), _, err in res if err]
    print(f"toolsets: {len(jobs) - len(failed)} of {len(jobs)} compiles ({len(sets)} sets x {len(MODES)} modes) "
          f"in {time.monotonic() - t:.0f} s")
    for name, err in failed:
        print(f"  FAIL {name}: {err}")
    assert not failed, (f"{len(failed)} of {len(jobs)} tool-set compiles failed, e.g.\n  "
                        + "\n  ".join(f"{n}: {e}" for n, e in failed[:15]))


def formats_in(v):
    if isinstance(v, dict):
        out = {v["format"]} if isinstance(v.get("format"), str) else set()
        for x in v.values():
            out |= formats_in(x)
        return out
    if isinstance(v, list):
        return set().union(*map(formats_in, v)) if v else set()
    return set()


def validators(tools):
    """{name: validator of the tool's arguments}."""
    check_formats = formats_in([t["function"].get("parameters") for t in tools]) <= SIEVE_FORMATS
    out = {}
    for t in tools:
        p = t["function"].get("parameters")
        schema = json.loads(json.dumps(p if p is not None else {"type": "object"}), parse_float=Decimal)
        v = validator(schema)
        out[t["function"]["name"]] = v if check_formats else v.evolve(format_checker=None)
    return out


def check_calls(text, vals):
    """Why the sampled call list text is wrong, or None."""
    try:
        calls = json.loads(text, parse_float=Decimal)
    except ValueError as e:
        return f"not JSON: {e}"
    if not isinstance(calls, list) or not calls:
        return "not a non-empty list of calls"
    for i, c in enumerate(calls):
        if not isinstance(c, dict) or set(c) != {"name", "arguments"}:
            return f"call {i} is not {{name, arguments}}"
        if c["name"] not in vals:
            return f"call {i} names {c['name']!r}, not a tool of the set"
        if not isinstance(c["arguments"], dict):
            return f"call {i}: arguments are not an object"
        errs = list(vals[c["name"]].iter_errors(c["arguments"]))
        if errs:
            return f"call {i} ({c['name']}): {errs[0].message[:200]} at {list(errs[0].absolute_path)}"
    return None


def test_samples_validate():
    """Samples of every set that compiles (the sets that do not are
    test_every_set_compiles' failures) are valid tool calls."""
    sets = toolsets()

    def one(path):
        r, _ = run(["sample", "--tools", str(path), *MODES["required"], "-n", str(N_SAMPLES), "--seed", str(SEED)])
        if r.returncode == 2:
            return path, None, []  # does not compile: reported by test_every_set_compiles
        if r.returncode != 0:
            return path, 0, [("crash", outcome(r))]
        vals = validators(json.loads(path.read_text()))
        lines = r.stdout.split("\n")[:-1]
        bad = [] if len(lines) == N_SAMPLES else [("output", f"{len(lines)} lines for -n {N_SAMPLES}")]
        for line in lines:
            text = json.loads(line)
            why = check_calls(text, vals)
            if why:
                bad.append((text[:300], why))
        return path, len(lines), bad

    t = time.monotonic()
    res = parallel(one, sets)
    checked = [x for x in res if x[1] is not None]
    bad = [(rel(p), text, why) for p, _, b in res for text, why in b]
    print(f"toolsets: {sum(n for _, n, _ in checked)} samples of {len(checked)} of {len(sets)} sets validated "
          f"with jsonschema in {time.monotonic() - t:.0f} s")
    assert not bad, f"{len(bad)} invalid samples, e.g. {bad[:5]}"
    assert checked, "no tool set compiled"
