"""A second reading of structural tags (docs/structural_tag.md),
written from the documented rules and sharing no code with
fsm/structural_tag.c: a matcher over Python strings that returns every
position where a format can end. JSON contents are judged by json.loads,
the `jsonschema` package and json.dumps (sieve writes canonical JSON: the
text must be the value's json.dumps spelling), regexes by re.fullmatch,
grammars by a Python regex built from the parsed GBNF (gbnf_harness's
to_python_re) or, for grammars with recursion, by Lark's Earley parser on
a translation of the grammar (gbnf_harness.oracle)."""
import json
import re

import jsonschema

from gbnf_harness import Recursive, oracle, to_python_re

UNLIMITED = {"any_text", "triggered_tags", "tags_with_separator"}


def unlimited(f):
    t = f["type"]
    if t in UNLIMITED:
        return True
    if t == "sequence":
        return unlimited(f["elements"][-1])
    if t == "or":
        return any(unlimited(e) for e in f["elements"])
    return False


def _ends_list(tag):
    e = tag["end"]
    return [e] if isinstance(e, str) else list(e)


class _LarkMatch:
    """re.fullmatch's interface over the Lark oracle of a recursive grammar."""

    def __init__(self, grammar):
        self.o = oracle(grammar)

    def fullmatch(self, s, i, j):
        return self.o.accepts(s[i:j])


class Oracle:
    def __init__(self, stag):
        assert stag["type"] == "structural_tag"
        if "format" in stag:
            self.root = stag["format"]
        else:  # legacy: triggered tags of JSON Schemas
            self.root = {"type": "triggered_tags", "triggers": stag["triggers"],
                         "tags": [{"begin": s["begin"], "content": {"type": "json_schema", "json_schema": s["schema"]},
                                   "end": s["end"]} for s in stag["structures"]]}
        self._res = {}

    def accepts(self, s):
        self.s = s
        return len(s) in self.ends(self.root, 0, None)

    # every j such that s[i:j] matches f; stops: the enclosing tag's end strings
    # (the format then takes one of them), or None (it runs to the end of s)
    def ends(self, f, i, stops):
        s, t = self.s, f["type"]
        if t == "const_string":
            return {i + len(f["value"])} if s.startswith(f["value"], i) else set()
        if t == "regex":
            r = self._re(f["pattern"])
            return {j for j in range(i, len(s) + 1) if r.fullmatch(s, i, j)}
        if t == "grammar":
            r = self._gbnf(f["grammar"])
            return {j for j in range(i, len(s) + 1) if r.fullmatch(s, i, j)}
        if t == "json_schema":
            return {j for j in range(i + 1, len(s) + 1) if self._json_ok(f["json_schema"], s[i:j])}
        if t == "sequence":
            cur = {i}
            for k, e in enumerate(f["elements"]):
                last = k == len(f["elements"]) - 1
                cur = set().union(*[self.ends(e, p, stops if last else None) for p in cur]) if cur else set()
            return cur
        if t == "or":
            return set().union(*[self.ends(e, i, stops) for e in f["elements"]])
        if t == "tag":
            return self.tag(f, i)
        if t == "any_text":
            return self.text(i, [], stops, f.get("excludes", []), lambda p, w: {p + len(w)})
        if t == "triggered_tags":
            return self.triggered(f, i, stops)
        if t == "tags_with_separator":
            return self.with_sep(f, i, stops)
        raise AssertionError(t)

    def tag(self, tag, i):
        s = self.s
        if not s.startswith(tag["begin"], i):
            return set()
        i += len(tag["begin"])
        ends = _ends_list(tag)
        if unlimited(tag["content"]):
            return self.ends(tag["content"], i, ends)
        out = set()
        for j in self.ends(tag["content"], i, None):
            out |= {j + len(e) for e in ends if s.startswith(e, j)}
        return out

    def text(self, i, triggers, stops, excludes, on_stop, on_trigger=None):
        """Free text from i: the first occurrence of a trigger, a stop or an
        excluded string decides (none of them is part of another)."""
        s = self.s
        best = None
        for kind, ws in (("trigger", triggers), ("stop", stops or []), ("exclude", excludes)):
            for w in ws:
                p = s.find(w, i)
                if p >= 0 and (best is None or p + len(w) < best[0] + len(best[2])):
                    best = (p, kind, w)
        if best is None:
            return {len(s)} if stops is None else set()
        p, kind, w = best
        if kind == "exclude":
            return set()
        if kind == "stop":
            return on_stop(p, w)
        return on_trigger(p, w)

    def _then_end(self, js, stops):
        s = self.s
        if stops is None:
            return set(js)
        return {j + len(e) for j in js for e in stops if s.startswith(e, j)}

    def triggered(self, f, i, stops):
        tags = f["tags"]
        alo, saf = f.get("at_least_one", False), f.get("stop_after_first", False)

        def any_tag(p):
            return set().union(*[self.tag(t, p) for t in tags])

        if alo and saf:
            return self._then_end(any_tag(i), stops)

        def loop(p):
            def on_trigger(q, w):
                after = set().union(*[self.tag(t, q) for t in tags if t["begin"].startswith(w)])
                if saf:
                    return self._then_end(after, stops)
                return set().union(*[loop(j) for j in after]) if after else set()
            return self.text(p, f["triggers"], stops, f.get("excludes", []), lambda q, w: {q + len(w)}, on_trigger)

        if alo:
            return set().union(*[loop(j) for j in any_tag(i)]) if any_tag(i) else set()
        return loop(i)

    def with_sep(self, f, i, stops):
        s = self.s
        sep = f["separator"]
        alo, saf = f.get("at_least_one", False), f.get("stop_after_first", False)
        if stops is not None and sep in stops:
            saf = True

        def any_tag(p):
            return set().union(*[self.tag(t, p) for t in f["tags"]])

        cur = any_tag(i)
        bodies = set(cur)
        while cur and not saf:
            nxt = set()
            for j in cur:
                if s.startswith(sep, j):
                    nxt |= any_tag(j + len(sep))
            cur = nxt - bodies
            bodies |= nxt
        out = self._then_end(bodies, stops)
        if not alo:
            out |= self._then_end({i}, stops)
        return out

    def _re(self, p):
        if p not in self._res:
            self._res[p] = re.compile(p)
        return self._res[p]

    def _gbnf(self, g):
        if g not in self._res:
            try:
                self._res[g] = to_python_re(g)
            except Recursive:
                self._res[g] = _LarkMatch(g)
        return self._res[g]

    @staticmethod
    def _json_ok(schema, text):
        if text != text.strip():
            return False
        try:
            v = json.loads(text)
        except ValueError:
            return False
        if json.dumps(v, ensure_ascii=False) != text:
            return False
        return jsonschema.Draft202012Validator(schema).is_valid(v)
