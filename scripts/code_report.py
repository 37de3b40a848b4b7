#!/usr/bin/env python3
"""code_report.py - size, duplication and function-length report for sieve's
C/CUDA sources (util/, fsm/, src/, kernels/, optionally tests/unit/).

Reads files only (the working tree, or a git revision with --rev); builds
nothing. Standard library only.

  python3 scripts/code_report.py                  # Markdown report, working tree
  python3 scripts/code_report.py --rev 097d78d    # same, for a commit's tree
  python3 scripts/code_report.py --tests --json   # include tests/unit/, JSON out
  python3 scripts/code_report.py --self-test      # check the analysis itself

Options: --top N (rows in the "largest" tables, default 25), --min-lines N
(shortest repeated block, default 6), --include-generated (generated tables
such as fsm/unicode_tables.c are listed under sizes but are skipped by the
duplicate and function analyses unless this is given), --root DIR.
"""
import argparse
import bisect
import json
import os
import re
import subprocess
import sys
import tempfile

FOLDERS = ["util", "fsm", "src", "kernels"]
TEST_FOLDER = "tests/unit"
EXTS = (".c", ".h", ".cu", ".cuh")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "do", "else",
            "case", "_Alignof", "_Static_assert", "defined"}


# ---------------------------------------------------------------- reading

def list_sources(root, rev, tests):
    """Return {path: text} for the selected folders, from a rev or the tree."""
    folders = FOLDERS + ([TEST_FOLDER] if tests else [])
    if rev:
        out = subprocess.run(["git", "-C", root, "ls-tree", "-r", "--name-only",
                              rev, "--"] + folders, check=True,
                             capture_output=True, text=True).stdout
        paths = [p for p in out.splitlines() if p.endswith(EXTS)]
        read = lambda p: subprocess.run(["git", "-C", root, "show", f"{rev}:{p}"],
                                        check=True, capture_output=True).stdout
    else:
        paths = []
        for folder in folders:
            for dirpath, dirnames, filenames in os.walk(os.path.join(root, folder)):
                dirnames[:] = [d for d in dirnames if not d.startswith(".")]
                paths += [os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                          for f in filenames if f.endswith(EXTS)]
        read = lambda p: open(os.path.join(root, p), "rb").read()
    return {p: read(p).decode("utf-8", "replace") for p in sorted(paths)}


def group_of(path):
    """Folder a file is totalled under: src/<sub>, tests/unit, or top level."""
    parts = path.split("/")
    if parts[0] in ("src", "tests") and len(parts) > 2:
        return "/".join(parts[:2])
    return parts[0]


def is_generated(text):
    head = "\n".join(text.splitlines()[:5]).lower()
    return "generated" in head and "do not edit" in head


# ---------------------------------------------------------------- lexing

# One token per comment / string / char literal; everything else is code.
LEX = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                 re.S)


def blank(s):
    """Spaces for every character but newlines (keeps line numbers)."""
    return re.sub(r"[^\n]", " ", s)


def lex(text):
    """Return (code, skeleton), both line-aligned with text: `code` has the
    comments blanked; `skeleton` also blanks string/char contents and
    preprocessor lines, so braces in it are real braces."""
    code, skel, last = [], [], 0
    for m in LEX.finditer(text):
        tok = m.group()
        code.append(text[last:m.start()])
        skel.append(text[last:m.start()])
        if tok.startswith(("//", "/*")):
            code.append(blank(tok))
            skel.append(blank(tok))
        else:
            code.append(tok)
            skel.append(tok[0] + blank(tok[1:-1]) + tok[-1])
        last = m.end()
    code.append(text[last:])
    skel.append(text[last:])
    code_lines = "".join(code).split("\n")
    skel_lines = "".join(skel).split("\n")
    in_pp = False                              # blank #directives (+ continuations)
    for i, line in enumerate(skel_lines):
        if in_pp or line.lstrip().startswith("#"):
            in_pp = line.rstrip().endswith("\\")
            skel_lines[i] = ""
    return code_lines, skel_lines


# ---------------------------------------------------------------- duplicates

TRIVIAL = re.compile(r"[{}()\[\];,\s]*(else)?[{}()\[\];,\s]*|#\s*(else|endif|include|pragma once)\b.*")


def normalize(code_lines):
    """[(normalized line, 1-based line number)] without blank, comment-only
    and punctuation-only (`}`, `{`, `} else {`, `);`) lines, nor the
    boilerplate directives #include, #else, #endif, #pragma once."""
    out = []
    for n, line in enumerate(code_lines, 1):
        s = " ".join(line.split())
        if s and not TRIVIAL.fullmatch(s):
            out.append((s, n))
    return out


def find_repeats(norm, k):
    """Maximal blocks of >= k normalized lines found in >= 2 places.
    norm: {path: [(line, lineno)]}. Returns a list of dicts."""
    files = sorted(norm)
    seqs = [[s for s, _ in norm[f]] for f in files]
    occ = {}                                   # window -> [(file idx, start)]
    wkey = {}                                  # (file idx, start) -> window
    for fi, seq in enumerate(seqs):
        for i in range(len(seq) - k + 1):
            w = tuple(seq[i:i + k])
            occ.setdefault(w, []).append((fi, i))
            wkey[(fi, i)] = w
    shift = lambda ps, d: [(f, i + d) for f, i in ps]
    blocks = {}
    for w, ps in occ.items():
        if len(ps) < 2:
            continue
        prev = wkey.get((ps[0][0], ps[0][1] - 1))
        if prev is not None and occ[prev] == shift(ps, -1):
            continue                           # not the first window of a chain
        # Walk forward while the next window occurs in exactly the same places.
        n = k
        while True:
            nxt = wkey.get((ps[0][0], ps[0][1] + n - k + 1))
            if nxt is None or occ[nxt] != shift(ps, n - k + 1):
                break
            n += 1
        # Walk back while every copy's preceding line still agrees (a chain
        # that starts where a bigger group of copies ended).
        while all(i > 0 for _, i in ps) and \
                len({seqs[f][i - 1] for f, i in ps}) == 1:
            ps, n = shift(ps, -1), n + 1
        # Copies of a block that overlap themselves in one file count once.
        kept = []
        for f, i in ps:
            if not kept or kept[-1][0] != f or kept[-1][1] + n <= i:
                kept.append((f, i))
        if len(kept) >= 2:
            blocks[(tuple(kept), n)] = (kept, n)
    result = []
    for kept, n in blocks.values():
        locs = [{"file": files[f], "start": norm[files[f]][i][1],
                 "end": norm[files[f]][i + n - 1][1], "index": i} for f, i in kept]
        result.append({"lines": n, "copies": len(kept), "locations": locs,
                       "text": seqs[kept[0][0]][kept[0][1]:kept[0][1] + n]})
    result.sort(key=lambda b: (-b["lines"], -b["copies"], b["locations"][0]["file"],
                               b["locations"][0]["start"]))
    return result


def repeated_line_count(blocks):
    """Distinct normalized lines lying in some copy of some repeated block."""
    seen = set()
    for b in blocks:
        for loc in b["locations"]:
            seen.update((loc["file"], loc["index"] + j) for j in range(b["lines"]))
    return len(seen)


# ---------------------------------------------------------------- functions

def function_name(header):
    """Name if `header` (text before a depth-0 `{`) is a function signature."""
    h = " ".join(header.split())
    h = re.sub(r"(\s*__attribute__\s*\(\(.*?\)\))+$", "", h)
    if not h.endswith(")"):
        return None
    depth, j = 0, len(h) - 1                   # find the '(' matching the last ')'
    while j >= 0:
        depth += {")": 1, "(": -1}.get(h[j], 0)
        if depth == 0:
            break
        j -= 1
    m = re.search(r"([A-Za-z_]\w*)\s*$", h[:max(j, 0)])
    if j < 0 or not m or m.group(1) in KEYWORDS:
        return None
    if not h[:m.start()].strip() or "=" in re.sub(r"\(.*\)", "", h):
        return None                            # no return type, or an initializer
    return m.group(1)


def find_functions(skel_lines):
    """[(name, first line, last line)] of function definitions at depth 0."""
    text = "\n".join(skel_lines)
    nl = [m.start() for m in re.finditer("\n", text)]
    line_of = lambda pos: bisect.bisect_left(nl, pos) + 1
    funcs, depth, hdr, cur = [], 0, 0, None
    for m in re.finditer(r"[{};]", text):
        c, pos = m.group(), m.start()
        if depth == 0:
            if c == "{":
                header = text[hdr:pos]
                if re.fullmatch(r'\s*extern\s*"\s*"\s*', header):
                    hdr = pos + 1              # extern "C" { ... } is transparent
                    continue
                # The signature starts after the header's last blank line.
                header_lines = header.rstrip().split("\n")
                blanks = [i for i, l in enumerate(header_lines) if not l.strip()]
                skip = blanks[-1] + 1 if blanks else 0
                sig = "\n".join(header_lines[skip:])
                name = function_name(sig)
                if name:
                    start = line_of(hdr) + skip
                    cur = (name, start)
                depth = 1
            else:                              # ';' or a stray '}' ends a header
                hdr = pos + 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                if cur:
                    funcs.append((cur[0], cur[1], line_of(pos)))
                cur, hdr = None, pos + 1
    return funcs


# ---------------------------------------------------------------- analysis

def analyse(sources, min_lines=6, include_generated=False):
    files, norm, funcs = [], {}, []
    for path, text in sources.items():
        n = text.count("\n") + (1 if text and not text.endswith("\n") else 0)
        gen = is_generated(text)
        files.append({"file": path, "lines": n, "group": group_of(path), "generated": gen})
        if gen and not include_generated:
            continue
        code, skel = lex(text)
        norm[path] = normalize(code)
        funcs += [{"name": name, "file": path, "start": a, "end": b, "lines": b - a + 1}
                  for name, a, b in find_functions(skel)]
    files.sort(key=lambda f: (-f["lines"], f["file"]))
    groups = {}
    for f in files:
        g = groups.setdefault(f["group"], {"group": f["group"], "files": 0, "lines": 0})
        g["files"] += 1
        g["lines"] += f["lines"]
    blocks = find_repeats(norm, min_lines)
    funcs.sort(key=lambda f: (-f["lines"], f["file"], f["start"]))
    return {"files": files,
            "groups": sorted(groups.values(), key=lambda g: -g["lines"]),
            "total_lines": sum(f["lines"] for f in files),
            "total_files": len(files),
            "normalized_lines": sum(len(v) for v in norm.values()),
            "repeated_blocks": len(blocks),
            "repeated_lines": repeated_line_count(blocks),
            "blocks": blocks,
            "function_count": len(funcs),
            "functions": funcs}


def markdown(r, title, top, min_lines):
    out = [f"# Code report: {title}", "",
           f"- Files: **{r['total_files']}**, lines: **{r['total_lines']}** "
           f"({r['normalized_lines']} normalized lines analysed for repeats)",
           f"- Repeated blocks (>= {min_lines} normalized lines, >= 2 places): "
           f"**{r['repeated_blocks']}**, covering **{r['repeated_lines']}** "
           "normalized lines (all copies)",
           f"- Function definitions: **{r['function_count']}**; over 100 lines: "
           f"{sum(f['lines'] > 100 for f in r['functions'])}; over 50: "
           f"{sum(f['lines'] > 50 for f in r['functions'])}", "",
           "## Lines per folder", "", "| folder | files | lines |", "|---|---:|---:|"]
    out += [f"| {g['group']} | {g['files']} | {g['lines']} |" for g in r["groups"]]
    out += ["", "## Lines per file", "", "| file | lines |", "|---|---:|"]
    out += [f"| {f['file']}{' (generated)' if f['generated'] else ''} | {f['lines']} |"
            for f in r["files"]]
    out += ["", f"## Largest functions (top {top})", "",
            "| # | function | location | lines |", "|---:|---|---|---:|"]
    out += [f"| {i} | `{f['name']}` | {f['file']}:{f['start']}-{f['end']} | {f['lines']} |"
            for i, f in enumerate(r["functions"][:top], 1)]
    out += ["", "## Repeated blocks", "",
            "Lengths count normalized lines (no blanks, comments or lone braces); "
            "locations give the original line span. "
            f"The first {top} show their opening lines.", ""]
    for i, b in enumerate(r["blocks"], 1):
        locs = ", ".join(f"{l['file']}:{l['start']}-{l['end']}" for l in b["locations"])
        out.append(f"{i}. **{b['lines']} lines x {b['copies']}**: {locs}")
        if i <= top:
            out += ["   ```c"] + [f"   {s}" for s in b["text"][:4]] + \
                   (["   ..."] if b["lines"] > 4 else []) + ["   ```"]
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- self-test

SELF_A = """/* a.c */
#include <stdio.h>
static const int table[] = { 1, 2, 3 };
struct pair { int a, b; };

int
long_one(int x,
         int y)
{
    const char *s = "} not a brace {";
    char c = '}';   /* } neither */
    // { nor this
    if (x) {
        x += y;
    } else {
        y += x;
    }
    int total = x + y;
    total *= 2;
    total -= 1;
    printf("%d\\n", total);
    total += table[0];
    total ^= 3;
    return total;
}

static int short_one(void) { return 1; }
"""
SELF_B = """#define MACRO(x) { (x) }
extern "C" {
void other(int x, int y) {

    int  total = x + y;   // same block, other spacing and comments
    total *= 2;
    /* comment only */
    total -= 1;
    printf("%d\\n", total);
    total += table[0];
    total ^= 3;
    return;
}
}
"""


def self_test():
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "fsm"))
        os.makedirs(os.path.join(tmp, "util"))
        for path, text in (("fsm/a.c", SELF_A), ("util/b.cu", SELF_B)):
            with open(os.path.join(tmp, path), "w") as f:
                f.write(text)
        runs = [analyse(list_sources(tmp, None, False))]
        git = ["git", "-C", tmp, "-c", "user.name=t", "-c", "user.email=t@t"]
        try:                                   # the same tree through --rev
            for cmd in (["init", "-q"], ["add", "."], ["commit", "-qm", "t"]):
                subprocess.run(git + cmd, check=True, capture_output=True)
            runs.append(analyse(list_sources(tmp, "HEAD", False)))
        except (OSError, subprocess.CalledProcessError):
            print("self-test: git unavailable, --rev path not checked")
        for r in runs:
            assert r["total_files"] == 2 and r["total_lines"] == 41, r["total_lines"]
            assert [g["group"] for g in r["groups"]] == ["fsm", "util"]
            fn = {f["name"]: (f["start"], f["end"], f["lines"]) for f in r["functions"]}
            assert fn == {"long_one": (6, 25, 20), "short_one": (27, 27, 1),
                          "other": (3, 13, 11)}, fn
            assert r["repeated_blocks"] == 1, r["blocks"]
            b = r["blocks"][0]
            assert b["lines"] == 6 and b["copies"] == 2, b
            assert [(l["file"], l["start"], l["end"]) for l in b["locations"]] == \
                [("fsm/a.c", 18, 23), ("util/b.cu", 5, 11)], b["locations"]
            assert r["repeated_lines"] == 12
        # Overlapping windows merge; a block repeated 3 times, 2 of them longer.
        seq = lambda names: [(s, i) for i, s in enumerate(names, 1)]
        base = [f"l{i};" for i in range(10)]
        blocks = find_repeats({"x": seq(base + ["a;", "b;"]), "y": seq(["q;"] + base + ["a;", "b;"]),
                               "z": seq(base + ["zz;"])}, 6)
        got = sorted((b["lines"], b["copies"]) for b in blocks)
        assert got == [(10, 3), (12, 2)], got
    print("self-test: ok")
    return 0


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rev", help="read this git revision's tree instead of the working tree")
    ap.add_argument("--tests", action="store_true", help="also scan tests/unit/")
    ap.add_argument("--json", action="store_true", help="machine-readable output")
    ap.add_argument("--top", type=int, default=25, help="rows in the 'largest' tables")
    ap.add_argument("--min-lines", type=int, default=6, help="shortest repeated block")
    ap.add_argument("--include-generated", action="store_true",
                    help="analyse generated tables for repeats and functions too")
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="repository root (default: this script's parent folder)")
    ap.add_argument("--self-test", action="store_true", help="check the analysis and exit")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    r = analyse(list_sources(a.root, a.rev, a.tests), a.min_lines, a.include_generated)
    if a.json:
        r["rev"] = a.rev
        json.dump(r, sys.stdout, indent=1)
        print()
    else:
        title = f"revision {a.rev}" if a.rev else "working tree"
        sys.stdout.write(markdown(r, title + (" (with tests/unit)" if a.tests else ""),
                                  a.top, a.min_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
