"""`sieve serve` on the command line: help, usage errors, start-up failures."""
import socket
import subprocess

from live import MODEL, sieve_bin


def run(*args, timeout=60):
    return subprocess.run([sieve_bin(), "serve", *args], capture_output=True, timeout=timeout)


def test_help():
    r = run("--help")
    assert r.returncode == 0 and b"Usage: sieve serve -m MODEL" in r.stdout
    for opt in [b"--api-key", b"--served-model-name", b"--max-num-seqs", b"--max-body-bytes", b"--chat-template",
                b"--request-timeout", b"--drain-timeout", b"--any-deep-levels", b"--any-calls", b"--key-order",
                b"--compile-queue", b"--compile-memory-mb", b"--compile-memory-each-mb", b"--compile-timeout-ms", b"--compile-max-states",
                b"--dfa-memo-mb", b"--batch-step-tokens", b"--data-dir", b"--max-file-bytes", b"--metrics-compat"]:
        assert opt in r.stdout


def test_listed_as_a_verb():
    r = subprocess.run([sieve_bin(), "--help"], capture_output=True)
    assert b"serve" in r.stdout and b"batch" in r.stdout


def test_usage_errors():
    for args, msg in [((), b"-m MODEL is required"),
                      (("-m", str(MODEL), "--port", "99999"), b"--port"),
                      (("-m", str(MODEL), "--chat-template", "alpaca"), b"chatml, llama3, mistral or gemma"),
                      (("-m", str(MODEL), "--max-body-bytes", "10"), b"--max-body-bytes"),
                      (("-m", str(MODEL), "--bogus"), b"unknown option"),
                      (("-m", str(MODEL), "--request-timeout", "soon"), b"--request-timeout"),
                      (("-m", str(MODEL), "--any-deep-levels", "14"), b"--any-deep-levels"),
                      (("-m", str(MODEL), "--any-calls", "maybe"), b"--any-calls"),
                      (("-m", str(MODEL), "--key-order", "sorted"), b"--key-order"),
                      (("-m", str(MODEL), "--compile-queue", "0"), b"--compile-queue"),
                      (("-m", str(MODEL), "--compile-memory-mb", "1"), b"--compile-memory-mb"),
                      (("-m", str(MODEL), "--compile-memory-each-mb", "8"), b"--compile-memory-each-mb"),
                      (("-m", str(MODEL), "--metrics-compat", "tgi"), b"--metrics-compat"),
                      (("-m", str(MODEL), "--compile-timeout-ms", "x"), b"--compile-timeout-ms"),
                      (("-m", str(MODEL), "--compile-max-states", "2"), b"--compile-max-states"),
                      (("-m", str(MODEL), "--dfa-memo-mb", "-1"), b"--dfa-memo-mb"),
                      (("-m", str(MODEL), "--batch-step-tokens", "x"), b"--batch-step-tokens")]:
        r = run(*args)
        assert r.returncode == 64 and msg in r.stderr, (args, r.stderr)


def test_missing_model_is_a_runtime_error(tmp_path):
    r = run("-m", str(tmp_path / "nope.gguf"))
    assert r.returncode == 1 and b"sieve serve:" in r.stderr


def test_port_in_use():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run("-m", str(MODEL), "--port", str(port), "--threads", "1")
    assert r.returncode == 1 and b"cannot listen" in r.stderr


def test_chat_template_override(server):
    """--chat-template gemma renders Gemma turns for the same messages: the
    prompt differs from the model's own ChatML one, and chat still works."""
    from live import Server
    msgs = [{"role": "user", "content": "Say hi."}]
    own = server.client().chat.completions.create(model="smol", messages=msgs, max_tokens=2, temperature=0)
    g = Server("--chat-template", "gemma")
    try:
        r = g.client().chat.completions.create(model="smol", messages=msgs, max_tokens=2, temperature=0)
        assert r.usage.prompt_tokens != own.usage.prompt_tokens
        assert r.choices[0].message.content is not None
    finally:
        g.stop()


def test_key_order_any_serves_valid_objects():
    """--key-order any is server-wide: schema-constrained answers stay valid,
    with no key twice, whatever order the model writes its keys in."""
    import json

    import jsonschema

    from live import Server
    schema = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                               "country": {"type": "string", "maxLength": 12},
                                               "population": {"type": "integer", "minimum": 0}},
              "required": ["population", "city", "country"], "additionalProperties": False}
    fmt = {"type": "json_schema", "json_schema": {"name": "place", "schema": schema, "strict": True}}
    g = Server("--key-order", "any")
    try:
        c = g.client()
        for seed in range(3):
            r = c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "A big city, as JSON."}],
                                          response_format=fmt, max_tokens=60, temperature=1.0, seed=seed)
            text = r.choices[0].message.content

            def once(pairs):
                assert len({k for k, _ in pairs}) == len(pairs), text
                return dict(pairs)
            jsonschema.validate(json.loads(text, object_pairs_hook=once), schema)
        # an object too wide for its key-set automaton keeps its set in the
        # walk (docs/fsm.md, "Key sets in the walk"); a tight max_tokens
        # still ends in a valid object (the budget rule counts the required
        # keys still missing)
        wide = {"type": "object", "properties": {f"f{i}": {"type": "integer"} for i in range(20)},
                "required": ["f3", "f11", "f17"], "additionalProperties": False}
        wfmt = {"type": "json_schema", "json_schema": {"name": "wide", "schema": wide, "strict": True}}
        for seed, budget in ((0, 40), (1, 60), (2, 200)):
            r = c.chat.completions.create(model="smol", messages=[{"role": "user", "content": "Some numbers, as JSON."}],
                                          response_format=wfmt, max_tokens=budget, temperature=1.0, seed=seed)
            text = r.choices[0].message.content
            jsonschema.validate(json.loads(text, object_pairs_hook=once), wide)
    finally:
        g.stop()
