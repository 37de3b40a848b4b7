#!/usr/bin/env python3
"""maskbench_coverage.py — JSON Schema coverage of `sieve` on MaskBench.

For every MaskBench file ({description, meta, schema, tests: [{description,
valid, data}]}) this compiles the schema with `sieve compile --schema`, checks
every test instance with `sieve match --schema` (the instance spelled as
json.dumps(data, indent=None, ensure_ascii=False), as MaskBench does), and
draws `sieve sample --schema -n N` texts, which Python's jsonschema (the
validator class of the schema's draft, format checking on) must accept.
With --sieve-arg=--allow-unknown-formats, formats outside sieve's set are
annotations for sieve, so samples are judged with only sieve's formats
checked (SIEVE_FORMATS).

Outcomes, one per schema, in this precedence:
  crash              sieve died (signal, or an exit status other than 0/2)
  timeout            compile + match + sample took longer than --timeout, or
                     sieve stopped with its own "timeout" compile error
  compile_error      sieve refused the schema (exit 2), or ran out of the
                     --memory-limit-mb address space (error type nomem)
  invalidation_error an invalid instance was accepted      (a soundness bug)
  sample_error       a sample does not validate            (a soundness bug)
  ignored_format     only with --allow-unknown-formats: an invalid instance
                     was accepted, but it is valid once the formats outside
                     sieve's set are annotations, and invalid by such a
                     format (jsonschema says so, or the dataset's error names
                     the format). What the option asks for, not a sieve bug;
                     MaskBench would count an invalidation error.
  validation_error   a valid instance was rejected
  passing            none of the above
A schema can show several problems; the record lists them all, and the
summary counts invalidation and sample errors wherever they occur.

Every rejected valid instance gets a cause, found by experiment:
  key order                 a permutation of its object keys is accepted
                            (all permutations when there are at most 720
                            spellings, else the key order sieve gives each
                            location, and the schema's first-appearance order)
  number spelling           respelling 1.0 as 1 and 1e-05 as 0.00001 is accepted
                            (sieve takes both where it can: 10.0 wherever 10
                            is valid, 1e-05 for typed numbers unless a bound
                            or multipleOf splits the exponent range)
  string too long           accepted with --max-string-length raised
  nesting deeper than any-depth   accepted with --max-any-depth raised (to a
                            uniform 4..8 levels; the default, auto, allows
                            max(3, 6 - L) levels at instance level L)
  recursion deeper than max-ref-depth  accepted with --max-ref-depth raised
  nesting deeper than any-depth (static)  no experiment settled it (raising
                            --max-any-depth exceeds a budget, or the value is
                            more than 8 levels deep), but the instance has a
                            value nested deeper than --max-any-depth allows
                            where the schema allows any value
  jsonschema rejects it     the dataset calls it valid, but jsonschema (format
                            checking on) disagrees
  other                     none of these

Results go to a JSONL file (one record per schema, written as they finish,
so a run can be inspected while it runs and resumed with --resume), and a
summary is printed at the end (--markdown for tables to paste).

Usage:
  tests/bench/maskbench_coverage.py [--data DIR] [--sieve PATH] [--out FILE]
      [--jobs N] [--sample N | --files F ...] [--timeout S] [--samples N]
      [--memory-limit-mb MB] [--resume] [--summary-only] [--markdown]
      [--sieve-arg ARG ...]
"""
from __future__ import annotations

import argparse
import collections
import datetime
import decimal
import itertools
import json
import math
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_DATA = os.path.join(ROOT, "..", "shared", "data", "maskbench")
DEFAULT_SIEVE = os.path.join(ROOT, "build", "sieve")
DEFAULT_OUT = os.path.join(ROOT, "build", "maskbench", "results.jsonl")

OUTCOMES = ["passing", "compile_error", "validation_error", "ignored_format", "invalidation_error",
            "sample_error", "timeout", "crash"]
PERM_LIMIT = 720          # enumerate every key order up to this many spellings
DEFAULT_ANY_DEPTH = 3       # sieve's defaults, mirrored for the cause experiments:
DEFAULT_ANY_DEPTH_TOTAL = 6  # auto gives a free-form value at instance level L
ANY_DEPTH_MIN = 3            # max(3, total - L) levels
DEFAULT_STRING_LENGTH = 512
DEFAULT_REF_DEPTH = 5
DIAG_TIMEOUT = 20.0       # seconds for each diagnostic re-run (not part of the outcome)


# ---------------------------------------------------------------------------
# running sieve

class Timeout(Exception):
    pass


class Crash(Exception):
    pass


MEMORY_LIMIT_MB = [8192]   # address-space limit of every sieve process (--memory-limit-mb)


def _limit_memory():
    import resource
    n = MEMORY_LIMIT_MB[0] * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (n, n))


def run_sieve(argv, stdin_text, timeout):
    """Runs sieve; returns (rc, stdout str, stderr str). Raises Timeout.
    sieve runs under an address-space limit (some schemas grow past any
    machine's memory before the time limit: sieve's --max-memory does not
    bound every structure); when an allocation fails there, sieve reports a
    "nomem" error with exit status 1, which is returned as exit status 2, a
    compile error like the other budgets."""
    if timeout <= 0:
        raise Timeout()
    try:
        p = subprocess.run(argv, input=stdin_text.encode("utf-8") if stdin_text is not None else b"",
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout,
                           preexec_fn=_limit_memory if MEMORY_LIMIT_MB[0] else None)
    except subprocess.TimeoutExpired:
        raise Timeout()
    out = p.stdout.decode("utf-8", "replace")
    rc = p.returncode
    if rc == 1 and out.strip() and _parse_error(out).get("type") == "nomem":
        rc = 2
    return rc, out, p.stderr.decode("utf-8", "replace")


def _deadline_args(deadline):
    left_ms = int((deadline - time.monotonic()) * 1000)
    return ["--compile-timeout-ms", str(max(left_ms, 1))]


def _parse_error(stdout):
    try:
        e = json.loads(stdout.strip().splitlines()[-1])["error"]
        return {k: e.get(k) for k in ("message", "type", "keyword", "pointer")}
    except Exception:  # noqa: BLE001 - anything unparsable is reported raw
        return {"message": stdout.strip()[-500:], "type": "?", "keyword": None, "pointer": None}


def _crash_detail(verb, rc, out, err):
    sig = ""
    if rc < 0:
        try:
            sig = " (" + signal.Signals(-rc).name + ")"
        except ValueError:
            pass
    return {"verb": verb, "rc": rc, "signal": sig.strip(" ()") or None,
            "stderr": err.strip()[-800:], "stdout": out.strip()[-300:]}


def sieve_match(sieve, schema_path, texts, deadline, extra):
    """Returns a list of bools, one per text. Raises Timeout/Crash, or
    returns ("compile_error", err) when the schema does not compile."""
    if not texts:
        return []
    stdin = "".join(json.dumps(t) + "\n" for t in texts)   # ASCII JSON literals
    argv = [sieve, "match", "--schema", schema_path] + extra + _deadline_args(deadline)
    rc, out, err = run_sieve(argv, stdin, deadline - time.monotonic() + 5)
    if rc == 2:
        e = _parse_error(out)
        if e.get("type") == "timeout":    # the rest of the deadline ran out while recompiling
            raise Timeout()
        return ("compile_error", e)
    if rc != 0:
        raise Crash(_crash_detail("match", rc, out, err))
    lines = out.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts) or any(l not in ("0", "1") for l in lines):
        raise Crash({"verb": "match", "rc": rc, "signal": None,
                     "stderr": "expected %d lines of 0/1, got %d" % (len(texts), len(lines)),
                     "stdout": out[-300:]})
    return [l == "1" for l in lines]


# ---------------------------------------------------------------------------
# spellings of an instance

def dumps(v):
    return json.dumps(v, indent=None, ensure_ascii=False)


def count_orders(v):
    if isinstance(v, dict):
        n = math.factorial(len(v))
        for x in v.values():
            n *= count_orders(x)
            if n > 10 ** 9:
                return n
        return n
    if isinstance(v, list):
        n = 1
        for x in v:
            n *= count_orders(x)
            if n > 10 ** 9:
                return n
        return n
    return 1


def all_orders(v):
    """Every value equal to v that differs only in object key order."""
    if isinstance(v, dict):
        keys = list(v)
        subs = [list(all_orders(v[k])) for k in keys]
        for perm in itertools.permutations(range(len(keys))):
            for combo in itertools.product(*[subs[i] for i in perm]):
                yield {keys[i]: c for i, c in zip(perm, combo)}
    elif isinstance(v, list):
        for combo in itertools.product(*[list(all_orders(x)) for x in v]):
            yield list(combo)
    else:
        yield v


def schema_property_order(schema):
    """First-appearance index of every property name in the schema document."""
    order = {}

    def walk(s):
        if isinstance(s, dict):
            for k, x in s.items():
                if k == "properties" and isinstance(x, dict):
                    for name in x:
                        order.setdefault(name, len(order))
                walk(x)
        elif isinstance(s, list):
            for x in s:
                walk(x)
    walk(schema)
    return order


def reorder(v, order):
    if isinstance(v, dict):
        keys = sorted(enumerate(v), key=lambda ik: (order.get(ik[1], len(order)), ik[0]))
        return {k: reorder(v[k], order) for _, k in keys}
    if isinstance(v, list):
        return [reorder(x, order) for x in v]
    return v


class _Plain(float):
    pass


def respell_numbers(v):
    """1.0 -> 1, 1e-05 -> 0.00001 (as the DFA spells numbers). Returns (new, changed)."""
    if isinstance(v, bool) or v is None:
        return v, False
    if isinstance(v, float):
        if math.isfinite(v) and v.is_integer():
            return int(v), True
        r = repr(v)
        if "e" in r or "E" in r:
            return decimal.Decimal(r), True
        return v, False
    if isinstance(v, dict):
        out, ch = {}, False
        for k, x in v.items():
            out[k], c = respell_numbers(x)
            ch |= c
        return out, ch
    if isinstance(v, list):
        out, ch = [], False
        for x in v:
            y, c = respell_numbers(x)
            out.append(y)
            ch |= c
        return out, ch
    return v, False


def dumps_plain(v):
    """json.dumps spelling, with Decimals written positionally."""
    if isinstance(v, decimal.Decimal):
        s = format(v, "f")
        if "." in s:
            s = s.rstrip("0").rstrip(".") if "." in s else s
        return s
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + dumps_plain(x)
                               for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dumps_plain(x) for x in v) + "]"
    return dumps(v)


def max_string_len(v):
    if isinstance(v, str):
        return len(v)
    if isinstance(v, dict):
        return max([len(k) for k in v] + [max_string_len(x) for x in v.values()] + [0])
    if isinstance(v, list):
        return max([max_string_len(x) for x in v] + [0])
    return 0


def depth(v):
    if isinstance(v, dict):
        return 1 + max([depth(x) for x in v.values()] + [0])
    if isinstance(v, list):
        return 1 + max([depth(x) for x in v] + [0])
    return 0


# The key order sieve spells an object in: the order of its location (as
# fsm/schema.c builds sv_loc_t): the schemas that apply there, closed under
# allOf/anyOf/oneOf/not/if/then/else/dependentSchemas/$ref, name keys in
# first-appearance order (their properties, then the keys only required or
# dependency lists name), then the keys of const/enum values there; other
# keys after them. (sieve also accepts a few other orders per location:
# those of anyOf/oneOf branches and of required lists.) Mirrored here only
# to name the cause of a rejection; the experiment (sieve accepts the
# reordered text) decides.

def _resolve_ref(root, ref):
    if not isinstance(ref, str) or "#" not in ref:
        return None
    frag = ref.split("#", 1)[1]
    if frag == "" or frag.startswith("/"):
        node = root
        for part in frag.split("/")[1:] if frag else []:
            from urllib.parse import unquote
            part = unquote(part).replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node
    found = []

    def walk(x):
        if found:
            return
        if isinstance(x, dict):
            if x.get("$anchor") == frag or x.get("$id") == "#" + frag or x.get("id") == "#" + frag:
                found.append(x)
                return
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(root)
    return found[0] if found else None


def _closure(root, seeds, lits):
    out, ids = [], set()

    def add(s, d):
        if not isinstance(s, dict) or d > 64 or id(s) in ids:
            return
        ids.add(id(s))
        out.append(s)
        for kw in ("allOf", "anyOf", "oneOf"):
            if isinstance(s.get(kw), list):
                for x in s[kw]:
                    add(x, d + 1)
        for kw in ("not", "if", "then", "else"):
            add(s.get(kw), d + 1)
        for kw in ("dependentSchemas", "dependencies"):
            if isinstance(s.get(kw), dict):
                for x in s[kw].values():
                    add(x, d + 1)
        if "$ref" in s:
            add(_resolve_ref(root, s["$ref"]), d + 1)
    for x in seeds:
        add(x, 0)
    lits = list(lits)
    for s in out:
        if "const" in s:
            lits.append(s["const"])
        if isinstance(s.get("enum"), list):
            lits += s["enum"]
    return out, lits


def _ecma_search(pattern, key):
    try:
        return _ecma(pattern).find(key) is not None
    except Exception:  # noqa: BLE001 - a pattern regress refuses matches nothing here
        return False


def _loc_keys(loc):
    schemas, lits = loc
    order = {}
    for s in schemas:
        if isinstance(s.get("properties"), dict):
            for k in s["properties"]:
                order.setdefault(k, len(order))
    for s in schemas:
        if isinstance(s.get("required"), list):
            for k in s["required"]:
                if isinstance(k, str):
                    order.setdefault(k, len(order))
        for kw in ("dependentRequired", "dependencies", "dependentSchemas"):
            if isinstance(s.get(kw), dict):
                for k, x in s[kw].items():
                    order.setdefault(k, len(order))
                    if isinstance(x, list):
                        for y in x:
                            if isinstance(y, str):
                                order.setdefault(y, len(order))
    for v in lits:
        if isinstance(v, dict):
            for k in v:
                order.setdefault(k, len(order))
    return order


def _loc_property(root, loc, key):
    schemas, lits = loc
    seeds = []
    for s in schemas:
        matched = False
        if isinstance(s.get("properties"), dict) and key in s["properties"]:
            matched = True
            seeds.append(s["properties"][key])
        if isinstance(s.get("patternProperties"), dict):
            for pat, x in s["patternProperties"].items():
                if _ecma_search(pat, key):
                    matched = True
                    seeds.append(x)
        if not matched and isinstance(s.get("additionalProperties"), dict):
            seeds.append(s["additionalProperties"])
    return _closure(root, seeds, [v[key] for v in lits if isinstance(v, dict) and key in v])


def _loc_item(root, loc, index):
    schemas, lits = loc
    seeds = []
    for s in schemas:
        prefix, items = s.get("prefixItems"), s.get("items")
        tup = prefix if isinstance(prefix, list) else items if isinstance(items, list) else None
        rest = items if isinstance(prefix, list) else s.get("additionalItems") if isinstance(items, list) else items
        if tup is not None and index < len(tup):
            seeds.append(tup[index])
        elif isinstance(rest, dict):
            seeds.append(rest)
        if isinstance(s.get("contains"), dict):
            seeds.append(s["contains"])
    sub = []
    for a in lits:
        if isinstance(a, list):
            sub += a[index:]
    return _closure(root, seeds, sub)


def location_order(v, schema, loc=None):
    """v with every object's keys in the order of its location."""
    if loc is None:
        loc = _closure(schema, [schema], [])
    if isinstance(v, dict):
        order = _loc_keys(loc)
        keys = sorted(enumerate(v), key=lambda ik: (order.get(ik[1], len(order)), ik[0]))
        return {k: location_order(v[k], schema, _loc_property(schema, loc, k)) for _, k in keys}
    if isinstance(v, list):
        return [location_order(x, schema, _loc_item(schema, loc, i)) for i, x in enumerate(v)]
    return v


# Keywords that constrain a value (a location whose schemas have none of
# them, beyond the combinators the closure follows, holds "any value", which
# sieve expands to --max-any-depth levels).
_ASSERTIONS = frozenset("""type enum const properties required additionalProperties patternProperties
    propertyNames minProperties maxProperties dependentRequired dependencies dependentSchemas items
    prefixItems additionalItems minItems maxItems contains minContains maxContains uniqueItems not if
    then else minLength maxLength pattern format minimum maximum exclusiveMinimum exclusiveMaximum
    multipleOf unevaluatedProperties unevaluatedItems $dynamicRef $recursiveRef nullable""".split())


def unconstrained_excess(v, schema, allowed, loc=None, level=0):
    """By how many levels a subvalue of v at a location that holds any value
    nests deeper than allowed(its instance level) permits (0 when none does)."""
    if loc is None:
        loc = _closure(schema, [schema], [])
    schemas, lits = loc
    if not lits and not any(_ASSERTIONS & set(x) for x in schemas) \
            and not any(isinstance(x.get(k), list) and len(x[k]) > 1
                        for x in schemas for k in ("anyOf", "oneOf")):
        return max(0, depth(v) - allowed(level))
    if isinstance(v, dict):
        return max([unconstrained_excess(x, schema, allowed, _loc_property(schema, loc, k), level + 1)
                    for k, x in v.items()] + [0])
    if isinstance(v, list):
        return max([unconstrained_excess(x, schema, allowed, _loc_item(schema, loc, i), level + 1)
                    for i, x in enumerate(v)] + [0])
    return 0


def spellings(data, schema):
    """Alternative spellings of a value: (key-order variants, number-respelled
    variants). The first list excludes the original spelling."""
    orig = dumps(data)
    n = count_orders(data)
    if n <= PERM_LIMIT:
        variants = list(all_orders(data))
    else:
        variants = [reorder(data, schema_property_order(schema))]
        try:
            variants.insert(0, location_order(data, schema))
        except RecursionError:
            pass
    orders = []
    seen = {orig}
    for x in variants:
        t = dumps(x)
        if t not in seen:
            seen.add(t)
            orders.append(t)
    respelled = []
    r, changed = respell_numbers(data)
    if changed:
        seen_r = set()
        for x in [r] + [respell_numbers(x)[0] for x in variants]:
            t = dumps_plain(x)
            if t not in seen_r:
                seen_r.add(t)
                respelled.append(t)
    return orders, respelled


# ---------------------------------------------------------------------------
# jsonschema, the judge of samples

# jsonschema runs `pattern` with Python's `re`, which is not ECMA-262 (no
# \p{..}; `.` matches \r; `$` matches before a final \n): as
# tests/schema/test_sampling.py does, patterns run under `regress`, an
# ECMA-262 engine, and multipleOf is checked exactly.
_rx = {}


def _ecma(pattern):
    if pattern not in _rx:
        import regress
        try:
            _rx[pattern] = regress.Regex(pattern, "u")
        except Exception:  # noqa: BLE001
            _rx[pattern] = regress.Regex(pattern)
    return _rx[pattern]


def _kw_pattern(validator, pattern, instance, schema):
    from jsonschema.exceptions import ValidationError
    if validator.is_type(instance, "string") and _ecma(pattern).find(instance) is None:
        yield ValidationError("%r does not match %r" % (instance, pattern))


def _kw_pattern_properties(validator, pp, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, sub in pp.items():
        for k, v in instance.items():
            if _ecma(pattern).find(k) is not None:
                yield from validator.descend(v, sub, path=k, schema_path=pattern)


def _kw_additional_properties(validator, ap, instance, schema):
    from jsonschema.exceptions import ValidationError
    if not validator.is_type(instance, "object"):
        return
    props = schema.get("properties", {})
    pats = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in props and not any(_ecma(p).find(k) is not None for p in pats)]
    if validator.is_type(ap, "object"):
        for k in extras:
            yield from validator.descend(instance[k], ap, path=k)
    elif ap is False and extras:
        yield ValidationError("additional properties %r" % (extras,))


def _kw_multiple_of(validator, m, instance, schema):
    from fractions import Fraction
    from jsonschema.exceptions import ValidationError
    if validator.is_type(instance, "number") and (Fraction(str(instance)) / Fraction(str(m))).denominator != 1:
        yield ValidationError("%s is not a multiple of %s" % (instance, m))


# The formats sieve compiles (fsm/json_format.c). With --allow-unknown-formats
# every other format is an annotation: samples and instances are then judged
# with only these formats checked.
SIEVE_FORMATS = frozenset(["date-time", "date", "time", "duration", "email", "hostname", "ipv4",
                           "ipv6", "uri", "uri-reference", "uuid"])
ALLOW_UNKNOWN_FORMATS = "--allow-unknown-formats"
_FORMAT_MSG = re.compile(r"is not a '([^']+)'")


def make_validator(schema, formats=None):
    """The schema's draft validator, format checking on (only `formats` when
    given), ECMA patterns, exact numbers. The schema's numbers are read as
    Decimals, as instances are."""
    import jsonschema
    schema = json.loads(json.dumps(schema), parse_float=decimal.Decimal)
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    type_checker = cls.TYPE_CHECKER
    if cls not in (jsonschema.Draft3Validator, jsonschema.Draft4Validator):
        # Draft 6+: an integer is any number with a zero fractional part
        # (404.00 is one). jsonschema grants this to floats only, not to the
        # Decimals numbers are read as here. Drafts 3 and 4 keep "a number
        # without a fraction or exponent part".
        type_checker = type_checker.redefine(
            "integer", lambda checker, x: (isinstance(x, int) and not isinstance(x, bool))
            or (isinstance(x, decimal.Decimal) and x.is_finite() and x == x.to_integral_value())
            or (isinstance(x, float) and x.is_integer()))
    cls = jsonschema.validators.extend(cls, {"pattern": _kw_pattern,
                                             "patternProperties": _kw_pattern_properties,
                                             "additionalProperties": _kw_additional_properties,
                                             "multipleOf": _kw_multiple_of},
                                       type_checker=type_checker)
    checker = cls.FORMAT_CHECKER
    if formats is not None:
        checker = jsonschema.FormatChecker(formats=())
        checker.checkers = {k: v for k, v in cls.FORMAT_CHECKER.checkers.items() if k in formats}
    return cls(schema, format_checker=checker)


def _no_dup_pairs(pairs):
    d = {}
    for k, v in pairs:
        if k in d:
            raise ValueError("duplicate key %r" % k)
        d[k] = v
    return d


def judge(validator, text):
    """('ok'|'invalid'|'unverifiable', message). Numbers are read exactly
    (Decimal); an object with a repeated key is invalid (RFC 8259 leaves its
    meaning open: parsers keep the first, the last, or refuse it)."""
    try:
        value = json.loads(text, object_pairs_hook=_no_dup_pairs, parse_float=decimal.Decimal)
    except ValueError as e:
        return "invalid", "not a JSON text: %s" % e
    try:
        err = next(iter(validator.iter_errors(value)), None)
    except Exception as e:  # noqa: BLE001 - unresolvable $ref, a pattern regress refuses, ...
        return "unverifiable", "%s: %s" % (type(e).__name__, str(e)[:300])
    if err is None:
        return "ok", None
    return "invalid", "%s (at /%s, schema /%s)" % (err.message[:300], "/".join(map(str, err.absolute_path)),
                                                   "/".join(map(str, err.absolute_schema_path)))


# ---------------------------------------------------------------------------
# one file

def evaluate(path, sieve, timeout=60.0, nsamples=5, seed=1, extra=(), tmpdir=None):
    extra = list(extra)
    name = os.path.basename(path)
    t0 = time.monotonic()
    deadline = t0 + timeout
    rec = {"file": name, "outcome": None, "problems": []}
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    schema = doc["schema"]
    tests = doc.get("tests", [])
    rec["n_valid"] = sum(1 for t in tests if t["valid"])
    rec["n_invalid"] = len(tests) - rec["n_valid"]
    fd, schema_path = tempfile.mkstemp(suffix=".json", dir=tmpdir)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(schema, f, ensure_ascii=False)
    try:
        _evaluate(rec, schema, schema_path, tests, sieve, deadline, nsamples, seed, extra)
    except Timeout:
        rec["outcome"] = "timeout"
        rec["problems"].append("timeout")
    except Crash as c:
        rec["outcome"] = "crash"
        rec["crash"] = c.args[0]
        rec["problems"].append("crash")
    finally:
        os.unlink(schema_path)
    rec["wall_s"] = round(time.monotonic() - t0, 3)
    return rec


def _evaluate(rec, schema, schema_path, tests, sieve, deadline, nsamples, seed, extra):
    # compile
    argv = [sieve, "compile", "--schema", schema_path] + extra + _deadline_args(deadline)
    tc = time.monotonic()
    rc, out, err = run_sieve(argv, None, deadline - time.monotonic() + 5)
    rec["compile_wall_s"] = round(time.monotonic() - tc, 4)
    if rc == 2:
        e = _parse_error(out)
        rec["error"] = e
        if e.get("type") == "timeout":
            rec["outcome"] = "timeout"
            rec["problems"].append("timeout")
        else:
            rec["outcome"] = "compile_error"
            rec["problems"].append("compile_error")
        return
    if rc != 0:
        raise Crash(_crash_detail("compile", rc, out, err))
    try:
        rec["stats"] = json.loads(out)
    except ValueError:
        raise Crash({"verb": "compile", "rc": rc, "signal": None, "stderr": "unparsable stats",
                     "stdout": out[-300:]})

    # match every instance
    texts = [dumps(t["data"]) for t in tests]
    got = sieve_match(sieve, schema_path, texts, deadline, extra)
    if isinstance(got, tuple):   # compiled once, refused now: report, do not guess
        raise Crash({"verb": "match", "rc": 2, "signal": None,
                     "stderr": "compile succeeded but match refused: %s" % got[1], "stdout": ""})
    rejected_valid = [i for i, t in enumerate(tests) if t["valid"] and not got[i]]
    accepted_invalid = [i for i, t in enumerate(tests) if not t["valid"] and got[i]]

    validator = None       # every format checked
    lax = None             # only the formats sieve was asked to check
    validator_error = None
    allow_unknown = ALLOW_UNKNOWN_FORMATS in extra
    try:
        validator = make_validator(schema)
        lax = make_validator(schema, SIEVE_FORMATS) if allow_unknown else validator
    except Exception as e:  # noqa: BLE001
        validator_error = "%s: %s" % (type(e).__name__, str(e)[:300])

    for i in accepted_invalid:
        item = {"test": i, "text": texts[i][:2000],
                "description": tests[i].get("description"),
                "expected_error": (tests[i].get("python_error") or "")[:300]}
        if validator is not None:
            item["jsonschema"] = judge(validator, texts[i])[0]
        if allow_unknown and lax is not None and judge(lax, texts[i])[0] == "ok":
            # Valid once the formats outside sieve's set are annotations, as
            # --allow-unknown-formats asks; invalid by such a format (jsonschema
            # says so, or the dataset's own error names one).
            m = _FORMAT_MSG.search(tests[i].get("python_error") or "")
            if item.get("jsonschema") == "invalid" or (m and m.group(1) not in SIEVE_FORMATS):
                rec.setdefault("ignored_format_accepts", []).append(item)
                continue
        rec.setdefault("invalidation_errors", []).append(item)
    if rec.get("invalidation_errors"):
        rec["problems"].append("invalidation_error")
    if rec.get("ignored_format_accepts"):
        rec["problems"].append("ignored_format")

    # samples
    argv = [sieve, "sample", "--schema", schema_path, "-n", str(nsamples), "--seed", str(seed)] \
        + extra + _deadline_args(deadline)
    rc, out, err = run_sieve(argv, None, deadline - time.monotonic() + 5)
    if rc == 2 and _parse_error(out).get("type") == "timeout":
        raise Timeout()   # the rest of the deadline ran out while recompiling
    if rc != 0:
        raise Crash(_crash_detail("sample", rc, out, err))
    lines = out.split("\n")      # not splitlines(): a sample may contain U+2028
    if lines and lines[-1] == "":
        lines.pop()
    samples = []
    for l in lines:
        try:
            samples.append(json.loads(l))
        except ValueError:
            raise Crash({"verb": "sample", "rc": rc, "signal": None,
                         "stderr": "not a JSON string literal: %r" % l[:200], "stdout": ""})
    rec["n_samples"] = len(samples)
    if len(samples) != nsamples:
        rec["sample_count_mismatch"] = len(samples)
    sample_errors, unverified = [], []
    outside = 0
    if lax is None:
        unverified.append(validator_error)
    else:
        for s in samples:
            verdict, msg = judge(lax, s)
            if verdict == "invalid":
                sample_errors.append({"text": s[:2000], "error": msg})
            elif verdict == "unverifiable":
                unverified.append(msg)
            elif lax is not validator and judge(validator, s)[0] == "invalid":
                outside += 1
    if outside:
        rec["samples_outside_ignored_formats"] = outside
    if unverified:
        rec["samples_unverified"] = unverified[:3]
    if sample_errors:
        rec["problems"].append("sample_error")
        rec["sample_errors"] = sample_errors

    if time.monotonic() > deadline:
        raise Timeout()

    # causes of rejected valid instances (diagnostics; not part of the time budget)
    if rejected_valid:
        rec["problems"].append("validation_error")
        rec["validation_errors"] = diagnose(schema, schema_path, tests, texts, rejected_valid,
                                            sieve, extra, validator, rec.get("stats", {}))

    for o in ("invalidation_error", "sample_error", "ignored_format", "validation_error"):
        if o in rec["problems"]:
            rec["outcome"] = o
            return
    rec["outcome"] = "passing"


def _opt_value(extra, flag, default):
    for i, a in enumerate(extra):
        v = extra[i + 1] if a == flag and i + 1 < len(extra) else a[len(flag) + 1:] if a.startswith(flag + "=") else None
        if v is not None:
            try:
                return int(v)
            except ValueError:
                return v
    return default


def allowed_depth(any_depth, total, level):
    """The nesting sieve allows a free-form value at instance level `level`."""
    if any_depth == "auto":
        return max(ANY_DEPTH_MIN, total - level)
    return any_depth


def _with_opt(extra, flag, value):
    """extra with `flag value` set (any earlier value of flag dropped)."""
    out, skip = [], False
    for x in extra:
        if skip:
            skip = False
        elif x == flag:
            skip = True
        elif not x.startswith(flag + "="):
            out.append(x)
    return out + [flag, str(value)]


def diagnose(schema, schema_path, tests, texts, idxs, sieve, extra, validator, stats):
    out = []
    pending = {}
    for i in idxs:
        data = tests[i]["data"]
        orders, respelled = spellings(data, schema)
        pending[i] = {"orders": orders, "respelled": respelled}
        out.append({"test": i, "text": texts[i][:2000], "cause": None})
    by_test = {o["test"]: o for o in out}
    failed = set()   # why an experiment could not run

    def try_texts(cands, extra2):
        """cands: list of (test, tag, text); returns set of (test, tag) accepted."""
        if not cands:
            return set()
        try:
            got = sieve_match(sieve, schema_path, [c[2] for c in cands], time.monotonic() + DIAG_TIMEOUT,
                              extra2)
        except Timeout:
            failed.add("timed out")
            return None
        except Crash:
            failed.add("crashed")
            return None
        if isinstance(got, tuple):
            failed.add("did not compile: %s" % (got[1].get("type") or "?"))
            return None
        return {(c[0], c[1]) for c, g in zip(cands, got) if g}

    # 1. key order, 2. number spelling
    cands = []
    for i, p in pending.items():
        cands += [(i, "key order", t) for t in p["orders"]]
        if p["respelled"]:
            cands.append((i, "number spelling", p["respelled"][0]))
            cands += [(i, "number spelling + key order", t) for t in p["respelled"][1:]]
    acc = try_texts(cands, extra) or set()
    for tag in ("key order", "number spelling", "number spelling + key order"):
        for i in list(pending):
            if (i, tag) in acc:
                by_test[i]["cause"] = tag
                del pending[i]

    # 3. options raised one at a time
    any_depth = _opt_value(extra, "--max-any-depth", DEFAULT_ANY_DEPTH)
    any_total = _opt_value(extra, "--any-depth-total", DEFAULT_ANY_DEPTH_TOTAL)
    str_len = _opt_value(extra, "--max-string-length", DEFAULT_STRING_LENGTH)
    ref_depth = _opt_value(extra, "--max-ref-depth", DEFAULT_REF_DEPTH)
    # (tag, flag, values tried in turn: a deeper any-depth grows the DFA fast,
    # so the smallest value that accepts is found before a budget stops it)
    experiments = []
    longest = max([max_string_len(tests[i]["data"]) for i in pending] + [0])
    if longest > str_len:
        experiments.append(("string too long", "--max-string-length", [min(longest, 8192)]))
    deepest = max([depth(tests[i]["data"]) for i in pending] + [0])
    least = allowed_depth(any_depth, any_total, 99)
    if deepest > least:
        experiments.append(("nesting deeper than any-depth", "--max-any-depth",
                            list(range(least + 1, min(deepest, 8) + 1))))
    if stats.get("recursion_truncated"):
        experiments.append(("recursion deeper than max-ref-depth", "--max-ref-depth", [ref_depth + 7]))
    for tag, flag, values in experiments:
        for value in values:
            if not pending:
                break
            cands = []
            for i, p in pending.items():
                cands.append((i, "", texts[i]))
                cands += [(i, "+", t) for t in p["orders"][:50] + p["respelled"][:50]]
            acc = try_texts(cands, _with_opt(extra, flag, value))
            if acc is None:
                break
            for i in list(pending):
                if (i, "") in acc:
                    by_test[i]["cause"] = tag
                    del pending[i]
                elif (i, "+") in acc:
                    by_test[i]["cause"] = tag + " + respelling"
                    del pending[i]

    # 3b. not settled by experiment (a deeper any-depth exceeds a budget, or
    # is past the 8 levels tried): a value deeper than --max-any-depth where
    # the schema allows any value, found by walking the schema
    for i in list(pending):
        try:
            d = unconstrained_excess(tests[i]["data"], schema, lambda lv: allowed_depth(any_depth, any_total, lv))
        except RecursionError:
            d = 0
        if d > 0:
            by_test[i]["cause"] = "nesting deeper than any-depth (static)"
            by_test[i]["unconstrained_excess"] = d
            del pending[i]

    # 4. does jsonschema agree that it is valid?
    for i in list(pending):
        if validator is not None:
            verdict, msg = judge(validator, texts[i])
            if verdict == "invalid":
                by_test[i]["cause"] = "jsonschema rejects it"
                by_test[i]["jsonschema_error"] = msg
                del pending[i]
                continue
        by_test[i]["cause"] = ("other (an experiment %s)" % ", ".join(sorted(failed))) if failed else "other"
    return out


# ---------------------------------------------------------------------------
# the run

_WORKER = {}


def _init_worker(cfg):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _WORKER.update(cfg)
    MEMORY_LIMIT_MB[0] = cfg.get("memory_mb", MEMORY_LIMIT_MB[0])
    _WORKER["tmp"] = tempfile.mkdtemp(prefix="maskbench-")


def _work(path):
    c = _WORKER
    try:
        return evaluate(path, c["sieve"], c["timeout"], c["samples"], c["seed"], c["extra"], c["tmp"])
    except Exception as e:  # noqa: BLE001 - a harness failure is recorded, not fatal
        import traceback
        return {"file": os.path.basename(path), "outcome": "crash", "problems": ["crash"],
                "crash": {"verb": "harness", "rc": None, "signal": None,
                          "stderr": traceback.format_exc()[-1500:], "stdout": ""}}


def loud(rec, stream=sys.stderr):
    """Prints soundness problems in a way nobody can miss."""
    for e in rec.get("invalidation_errors", []):
        print("!!! INVALIDATION ERROR %s test %d (jsonschema says: %s): %s"
              % (rec["file"], e["test"], e.get("jsonschema", "?"), e["text"][:500]), file=stream)
    for e in rec.get("sample_errors", []):
        print("!!! SAMPLE ERROR %s: %s\n    %s" % (rec["file"], e["text"][:500], e["error"]), file=stream)
    stream.flush()


def select_files(data, sample=None, files=None):
    if files:
        out = []
        for f in files:
            p = f if os.path.exists(f) else os.path.join(data, f)
            if not os.path.exists(p):
                sys.exit("maskbench: no such file: %s" % f)
            out.append(p)
        return out
    names = sorted(n for n in os.listdir(data) if n.endswith(".json"))
    if sample:
        k = max(1, len(names) // sample)
        names = names[::k][:sample]
    return [os.path.join(data, n) for n in names]


def run_all(paths, cfg, jobs, out_path=None, resume=False, progress=True, on_result=None):
    """Evaluates paths in `jobs` processes; returns {file: record}."""
    results = {}
    if out_path and resume and os.path.exists(out_path):
        with open(out_path, encoding="utf-8") as f:
            for line in f:
                try:
                    r = json.loads(line)
                    results[r["file"]] = r
                except ValueError:
                    pass
    todo = [p for p in paths if os.path.basename(p) not in results]
    outf = None
    if out_path:
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        outf = open(out_path, "a" if resume else "w", encoding="utf-8")
    t0 = time.monotonic()
    done = 0
    counts = collections.Counter(r["outcome"] for r in results.values())
    try:
        with multiprocessing.Pool(jobs, initializer=_init_worker, initargs=(cfg,)) as pool:
            for rec in pool.imap_unordered(_work, todo, chunksize=1):
                results[rec["file"]] = rec
                done += 1
                counts[rec["outcome"]] += 1
                if outf:
                    outf.write(json.dumps(rec, ensure_ascii=False) + "\n")
                    outf.flush()
                loud(rec)
                if on_result:
                    on_result(rec)
                if progress and (done % 100 == 0 or done == len(todo)):
                    el = time.monotonic() - t0
                    print("[%5d/%d %6.0fs] %s" % (done, len(todo), el,
                          " ".join("%s=%d" % (o, counts[o]) for o in OUTCOMES if counts[o])),
                          file=sys.stderr, flush=True)
    finally:
        if outf:
            outf.close()
    return results


# ---------------------------------------------------------------------------
# summary

def _pct(a, b):
    return "%.1f%%" % (100.0 * a / b) if b else "-"


def _quantile(xs, q):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(math.ceil(q * len(xs))) - 1))]


def subset_of(name):
    if "---" in name:
        return name.split("---")[0]
    return re.sub(r"_\d+\.json$", "", name).split("_")[0]


def summarize(results, markdown=False, top=10):
    recs = list(results.values())
    n = len(recs)
    lines = []
    w = lines.append

    def table(header, rows, align=None):
        if markdown:
            w("| " + " | ".join(header) + " |")
            numeric = [i > 0 and all(re.fullmatch(r"[-\d.,%]*", str(r[i])) for r in rows)
                       for i in range(len(header))]
            w("|" + "|".join(("--:" if numeric[i] else ":--") for i in range(len(header))) + "|")
            for r in rows:
                w("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
        else:
            cols = [header] + [[str(c) for c in r] for r in rows]
            wid = [max(len(c[i]) for c in cols) for i in range(len(header))]
            for j, r in enumerate(cols):
                w("  ".join((c.ljust(wid[i]) if i == 0 else c.rjust(wid[i])) for i, c in enumerate(r)))
                if j == 0:
                    w("  ".join("-" * x for x in wid))
        w("")

    c = collections.Counter(r["outcome"] for r in recs)
    w("## Outcomes (%d schemas)" % n if markdown else "Outcomes (%d schemas)" % n)
    w("")
    table(["outcome", "schemas", "share"], [[o, c[o], _pct(c[o], n)] for o in OUTCOMES])

    inv = [r for r in recs if "invalidation_error" in r.get("problems", [])]
    smp = [r for r in recs if "sample_error" in r.get("problems", [])]
    w("Schemas with an invalidation error (any outcome): %d; with a sample error: %d."
      % (len(inv), len(smp)))
    ign = [r for r in recs if "ignored_format" in r.get("problems", [])]
    if ign:
        fmts = collections.Counter()
        for r in ign:
            for e in r["ignored_format_accepts"]:
                m = _FORMAT_MSG.search(e.get("expected_error") or "")
                fmts[m.group(1) if m else "?"] += 1
        w("Schemas accepting an instance that is invalid only by an ignored format (any outcome): %d; "
          "formats (instances): %s." % (len(ign), ", ".join("%s %d" % kv for kv in fmts.most_common())))
    outside = [r for r in recs if r.get("samples_outside_ignored_formats")]
    if outside:
        w("Schemas with samples outside an ignored format (valid for sieve's formats only): %d." % len(outside))
    unver = [r for r in recs if r.get("samples_unverified")]
    w("Schemas whose samples jsonschema could not check (counted as verified): %d%s."
      % (len(unver), " (%d of them passing)" % sum(1 for r in unver if r["outcome"] == "passing")))
    w("")

    # by subset
    subsets = collections.defaultdict(collections.Counter)
    for r in recs:
        subsets[subset_of(r["file"])][r["outcome"]] += 1
    rows = []
    for s in sorted(subsets, key=lambda s: -sum(subsets[s].values())):
        cc = subsets[s]
        tot = sum(cc.values())
        rows.append([s, tot, cc["passing"], _pct(cc["passing"], tot), cc["compile_error"],
                     cc["validation_error"], cc["ignored_format"], cc["invalidation_error"], cc["sample_error"],
                     cc["timeout"], cc["crash"]])
    w("By subset:" if not markdown else "### By subset")
    w("")
    table(["subset", "schemas", "passing", "share", "compile err", "validation err", "ignored format",
           "invalidation err", "sample err", "timeout", "crash"], rows)

    # compile errors (outcome compile_error; timeouts are counted apart)
    ce = [r for r in recs if r["outcome"] == "compile_error" and r.get("error")]

    def elide(m):
        return re.sub(r'"[^"]*"|/[^/ ]+/|\d+', "…", m or "")[:110]
    groups = collections.defaultdict(collections.Counter)
    for r in ce:
        groups[(r["error"].get("type"), r["error"].get("keyword"))][elide(r["error"].get("message"))] += 1
    order = sorted(groups, key=lambda g: -sum(groups[g].values()))
    w("Compile errors by type and keyword (%d schemas, %s):" % (len(ce), _pct(len(ce), n)) if not markdown
      else "### Compile errors by type and keyword (%d schemas, %s)" % (len(ce), _pct(len(ce), n)))
    w("")
    rest = sum(sum(groups[g].values()) for g in order[top:])
    table(["type", "keyword", "schemas", "share of all", "most common message (quoted parts, patterns, numbers elided)"],
          [[t or "-", k or "-", sum(groups[(t, k)].values()), _pct(sum(groups[(t, k)].values()), n),
            groups[(t, k)].most_common(1)[0][0]] for t, k in order[:top]]
          + ([["(other)", "", rest, _pct(rest, n), ""]] if rest else []))
    by_msg = collections.Counter(elide(r["error"].get("message")) for r in ce)
    w("Compile errors by message:" if not markdown else "### Compile errors by message")
    w("")
    table(["message (quoted parts, patterns, numbers elided)", "schemas", "share of all"],
          [[m, k, _pct(k, n)] for m, k in by_msg.most_common(top)])
    to = [r for r in recs if r["outcome"] == "timeout"]
    if to:
        own = sum(1 for r in to if (r.get("error") or {}).get("type") == "timeout")
        w("Timeouts: %d (%d stopped by sieve's own --compile-timeout-ms, set to the time left of the "
          "schema's limit; %d by the harness)." % (len(to), own, len(to) - own))
        w("")

    # validation-error causes
    sc, ic = collections.Counter(), collections.Counter()
    for r in recs:
        ve = r.get("validation_errors") or []
        causes = set()
        for e in ve:
            ic[e["cause"]] += 1
            causes.add(e["cause"])
        for x in causes:
            sc[x] += 1
    w("Rejected valid instances by cause (a schema can have several causes):" if not markdown
      else "### Rejected valid instances by cause (a schema can have several)")
    w("")
    ve_n = sum(1 for r in recs if r.get("validation_errors"))
    w("Schemas with a rejected valid instance (any outcome): %d (%s of all)." % (ve_n, _pct(ve_n, n)))
    w("")
    table(["cause", "schemas", "share of all", "instances"],
          [[k, sc[k], _pct(sc[k], n), ic[k]] for k, _ in sc.most_common()])

    # times
    walls = [r["wall_s"] for r in recs if "wall_s" in r]
    cus = [r["stats"]["compile_us"] / 1000.0 for r in recs if r.get("stats", {}).get("compile_us") is not None]
    states = [r["stats"]["states"] for r in recs if r.get("stats", {}).get("states") is not None]
    rows = []
    for label, xs, fmt in (("compile (sieve's compile_us), ms", cus, "%.1f"),
                           ("DFA states", states, "%d"),
                           ("wall per schema (compile+match+sample+diagnosis), s", walls, "%.2f")):
        if xs:
            rows.append([label] + [fmt % _quantile(xs, q) for q in (0.5, 0.9, 0.99)] + [fmt % max(xs)])
    w("Distributions over the schemas that compiled (wall: all schemas):" if not markdown
      else "### Distributions")
    w("")
    table(["quantity", "p50", "p90", "p99", "max"], rows)
    if walls:
        w("Sum of per-schema wall times: %.0f s." % sum(walls))
    slow = sorted((r for r in recs if "wall_s" in r), key=lambda r: -r["wall_s"])[:5]
    if slow:
        w("Slowest: " + ", ".join("%s %.1f s (%s)" % (r["file"], r["wall_s"], r["outcome"]) for r in slow))
    crashes = [r for r in recs if r["outcome"] == "crash"]
    for r in crashes[:10]:
        w("CRASH %s: %s" % (r["file"], json.dumps(r.get("crash"))[:400]))
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=DEFAULT_DATA, help="the maskbench folder (default ../shared/data/maskbench)")
    ap.add_argument("--sieve", default=os.environ.get("SIEVE_BIN", DEFAULT_SIEVE), help="the sieve binary")
    ap.add_argument("--out", default=DEFAULT_OUT, help="JSONL results (default build/maskbench/results.jsonl)")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    ap.add_argument("--sample", type=int, metavar="N", help="only N files: every k-th by sorted name")
    ap.add_argument("--files", nargs="+", metavar="F", help="only these files (names or paths)")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per schema (default 60)")
    ap.add_argument("--samples", type=int, default=5, help="sieve sample -n (default 5)")
    ap.add_argument("--seed", type=int, default=1, help="sieve sample --seed (default 1)")
    ap.add_argument("--sieve-arg", action="append", default=[], metavar="ARG",
                    help="extra argument for every sieve call (repeat; e.g. --sieve-arg=--allow-unknown-formats)")
    ap.add_argument("--memory-limit-mb", type=int, default=MEMORY_LIMIT_MB[0], metavar="MB",
                    help="address-space limit of each sieve process (default %(default)s; 0 = none); "
                         "running out is a compile error of type nomem")
    ap.add_argument("--resume", action="store_true", help="keep the records already in --out; run the rest")
    ap.add_argument("--summary-only", action="store_true", help="summarize --out; run nothing")
    ap.add_argument("--markdown", action="store_true", help="print the summary as Markdown tables")
    a = ap.parse_args(argv)

    if a.summary_only:
        results = {}
        with open(a.out, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                results[r["file"]] = r
        print(summarize(results, a.markdown))
        return 0
    if not os.path.isdir(a.data):
        print("maskbench_coverage: data folder %s is missing; this benchmark needs ../shared/data"
              % a.data, file=sys.stderr)
        return 1
    if not os.access(a.sieve, os.X_OK):
        print("maskbench_coverage: %s is not an executable; build sieve first" % a.sieve, file=sys.stderr)
        return 1
    paths = select_files(a.data, a.sample, a.files)
    cfg = {"sieve": os.path.abspath(a.sieve), "timeout": a.timeout, "samples": a.samples,
           "seed": a.seed, "extra": a.sieve_arg, "memory_mb": a.memory_limit_mb}
    started = datetime.datetime.now(datetime.timezone.utc)
    t0 = time.monotonic()
    results = run_all(paths, cfg, a.jobs, a.out, a.resume)
    el = time.monotonic() - t0
    keep = {os.path.basename(p) for p in paths}
    results = {k: v for k, v in results.items() if k in keep}
    print(summarize(results, a.markdown))
    print("\n%d files, %d jobs, wall %.0f s (started %s); results in %s"
          % (len(paths), a.jobs, el, started.strftime("%Y-%m-%d %H:%M UTC"), a.out))
    bad = sum(1 for r in results.values()
              if {"invalidation_error", "sample_error"} & set(r.get("problems", [])))
    if bad:
        print("!!! %d schemas with invalidation or sample errors: soundness bugs" % bad, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
