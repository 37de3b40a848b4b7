"""Compile bounds: schemas and regexes built to break the budgets end in a
budget (or timeout) error, within the time budget plus a margin and within
the memory budget plus the process's baseline, never in a crash.

Each compile runs in its own `sieve compile` process; its peak RSS comes
from wait4, so one compile's memory is measured alone. The memory budget is
the whole compile's (util/memacct.h): arenas and every automaton kept at
once, not each structure on its own."""
import json
import os
import subprocess
import tempfile
import time

import pytest

import suite

MAX_MEMORY = 64 << 20
TIMEOUT_MS = 2000


def compile_bounded(kind, text, *args):
    """(returncode, stdout json, wall seconds, peak RSS bytes)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json" if kind == "schema" else ".txt", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        cmd = [suite.sieve_bin(), "compile", "--schema" if kind == "schema" else "--regex-file", path, "--max-memory", str(MAX_MEMORY),
               "--compile-timeout-ms", str(TIMEOUT_MS), *args]
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        out = p.stdout.read()
        p.stderr.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        wall = time.monotonic() - t0
    finally:
        os.unlink(path)
    return p.returncode, json.loads(out) if out.strip() else None, wall, ru.ru_maxrss * 1024


@pytest.fixture(scope="module")
def baseline():
    rc, _, _, rss = compile_bounded("schema", '{"type": "string"}')
    assert rc == 0
    return rss


def ref_fanout(levels, width):
    defs = {}
    for i in range(levels):
        nxt = {"$ref": f"#/$defs/d{i + 1}"} if i + 1 < levels else {"type": "string", "pattern": "^[a-z]{3,40}$"}
        defs[f"d{i}"] = {"type": "object", "properties": {f"p{j}_{i}": nxt for j in range(width)},
                         "required": [f"p{j}_{i}" for j in range(width)], "additionalProperties": False}
    return {"$ref": "#/$defs/d0", "$defs": defs}


BOMBS = [
    # exponential alternations: the last-n-th-letter language needs 2^n states
    ("regex", "(a|b)*a(a|b){24}"),
    ("schema", json.dumps({"type": "string", "pattern": "^(a|b)*a(a|b){22}$"})),
    # products of such languages
    ("schema", json.dumps({"type": "string", "allOf": [{"pattern": "^[ab]*a[ab]{11}$"}, {"pattern": "^[ab]*b[ab]{10}$"},
                                                        {"pattern": "^[ab]*a[ab]{9}$"}]})),
    # deep $ref fan-out: 8 levels of 4 required members, 4^8 leaves
    ("schema", json.dumps(ref_fanout(8, 4))),
    # a wide enum under not, beside a pattern
    ("schema", json.dumps({"type": "string", "not": {"enum": [f"value-{i:05d}-{i * 7919 % 10007}" for i in range(6000)]},
                           "pattern": "^value-[0-9]{5}-[0-9]+$"})),
    # bounded repetition counts and nested counted arrays
    ("schema", json.dumps({"type": "array", "minItems": 40, "maxItems": 60, "items": {
        "type": "array", "minItems": 40, "maxItems": 60, "items": {"type": "string", "maxLength": 100}}})),
]


@pytest.mark.parametrize("i", range(len(BOMBS)))
def test_bombs_end_within_their_budgets(i, baseline):
    kind, text = BOMBS[i]
    rc, out, wall, rss = compile_bounded(kind, text)
    assert rc in (0, 2), (rc, out)
    if i < 2:  # exponential: always over the state budget
        assert rc == 2 and out["error"]["type"] == "budget", out
    if rc == 2:
        assert out["error"]["type"] in ("budget", "timeout"), out
        assert "budget" in out["error"]["message"], out
    assert wall < TIMEOUT_MS / 1000 * 1.1 + 1.0, (wall, out)
    assert rss < baseline + MAX_MEMORY + (48 << 20), (rss >> 20, baseline >> 20, out)
    if rc == 0 and kind == "schema":
        assert out["memory_peak_bytes"] <= MAX_MEMORY, out


def test_memory_budget_bounds_the_whole_compile(baseline):
    """Dozens of products that each fit the budget, kept at once, used to grow
    without bound: the account counts them together. The 40 languages are
    distinct (equal ones are one part, and their tables are charged once)."""
    props = {f"k{i}": {"type": "string", "allOf": [{"pattern": f"^[ab]*a[ab]{{{12 + i // 10}}}$"},
                                                  {"pattern": f"^[ab]*b[ab]{{{i % 10}}}$"}]} for i in range(40)}
    schema = {"type": "object", "properties": props, "required": list(props)}
    rc, out, wall, rss = compile_bounded("schema", json.dumps(schema), "--max-dfa-states", "10000000",
                                         "--max-nfa-states", "50000000")
    # each product fits on its own, and the account refuses the one that
    # would take the compile past its budget
    assert rc == 2 and out["error"]["type"] == "budget" and "memory budget" in out["error"]["message"], (rc, out)
    assert rss < baseline + MAX_MEMORY + (48 << 20), (rss >> 20, out)
    # with room, the same schema compiles, and its peak is what the account saw
    rc, out, _, _ = compile_bounded("schema", json.dumps(schema), "--max-dfa-states", "10000000",
                                    "--max-nfa-states", "50000000", "--max-memory", str(1 << 30),
                                    "--compile-timeout-ms", "20000")
    assert rc == 0 and MAX_MEMORY < out["memory_peak_bytes"] <= 1 << 30, out
