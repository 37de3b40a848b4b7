"""Helpers shared by the tokenizer tests: running tok_cli."""
import json
import subprocess

TOKENIZERS = ["llama3", "qwen3"]


def run_cli(tok_cli, args, lines):
    """Runs tok_cli with one input line per record; returns its output lines."""
    out = subprocess.run([tok_cli] + list(args), input="".join(l + "\n" for l in lines).encode(),
                         capture_output=True, timeout=600)
    if out.returncode != 0:
        raise AssertionError("tok_cli %s failed (%d): %s" % (" ".join(args), out.returncode,
                                                            out.stderr.decode(errors="replace")))
    res = out.stdout.decode().split("\n")
    assert res[-1] == ""
    return res[:-1]


def json_lines(recs):
    return [json.dumps(r) for r in recs]
