"""The JSON-Schema-Test-Suite (draft 2020-12) against sieve's schema compiler.

- No invalid instance is ever accepted.
- Every valid instance is accepted, except those in suite_exceptions.txt,
  each with its reason.
- A group that does not compile fails with an error that names the keyword
  (unsupported or over budget), or says the schema is unsatisfiable when
  every test of the group is invalid.
- The per-test outcomes equal suite_outcomes.json: a regression (or an
  improvement) shows up here; refresh with `python tests/schema/suite.py --update`.
"""
import json

import pytest

import suite


@pytest.fixture(scope="module")
def results():
    return suite.run_all()


def groups_by_key():
    out = {}
    for f in suite.suite_files():
        rel = f.relative_to(suite.SUITE).as_posix()
        for gi, g in enumerate(json.loads(f.read_text())):
            out[f"{rel}#{gi} {g['description']}"] = g
    return out


def test_no_invalid_instance_accepted(results):
    bad = [(k, d) for k, v in results.items() if v["compile"] == "ok" for d, o in v["tests"].items()
           if o == "invalid_accepted"]
    assert not bad, f"{len(bad)} invalid instances accepted: {bad[:10]}"


def test_valid_rejections_are_listed(results):
    ex = suite.load_exceptions()
    unlisted = [(k, d) for k, v in results.items() if v["compile"] == "ok" for d, o in v["tests"].items()
                if o == "valid_rejected" and (k.split(" ", 1)[0], d) not in ex]
    assert not unlisted, "valid instances rejected without a reason in suite_exceptions.txt:\n" + \
        "\n".join(f"{k.split(' ', 1)[0]} | {d} | ?" for k, d in unlisted)
    # And no stale entries: each listed instance is really rejected.
    rejected = {(k.split(" ", 1)[0], d) for k, v in results.items() if v["compile"] == "ok"
                for d, o in v["tests"].items() if o == "valid_rejected"}
    stale = [e for e in ex if e not in rejected]
    assert not stale, f"suite_exceptions.txt lists instances that are accepted now: {stale}"


def test_compile_errors_name_their_cause(results):
    groups = groups_by_key()
    bad = []
    for k, v in results.items():
        if v["compile"] == "ok":
            continue
        e = v["error"]
        if e.get("type") in ("unsupported", "budget") and e.get("keyword") and e.get("pointer", "").startswith("/"):
            continue
        if e.get("type") == "empty" and not any(t["valid"] for t in groups[k]["tests"]):
            continue
        bad.append((k, e))
    assert not bad, f"compile errors that name no unsupported keyword: {bad}"


def test_outcomes_match_checked_in(results):
    want = json.loads(suite.OUTCOMES.read_text())
    got = suite.summarize(results)
    diff = [k for k in set(want) | set(got) if want.get(k) != got.get(k)]
    assert not diff, "outcomes changed (refresh with `python tests/schema/suite.py --update` if intended):\n" + \
        "\n".join(f"{k}: was {want.get(k)!r}, now {got.get(k)!r}" for k in sorted(diff)[:20])


def test_key_order_any_accepts_no_invalid_instance(results):
    """--key-order any widens objects to every key order: the suite's invalid
    instances stay rejected in every order, and nothing valid is lost."""
    anyo = suite.run_all(("--key-order", "any"))
    bad = [(k, d) for k, v in anyo.items() if v["compile"] == "ok" for d, o in v["tests"].items()
           if o == "invalid_accepted"]
    assert not bad, f"{len(bad)} invalid instances accepted with --key-order any: {bad[:10]}"
    lost = [(k, d) for k, v in results.items() if v["compile"] == "ok" for d, o in v["tests"].items()
            if o == "pass" and (anyo[k]["compile"] != "ok" or anyo[k]["tests"][d] != "pass")]
    assert not lost, f"outcomes --key-order any loses: {lost[:10]}"
