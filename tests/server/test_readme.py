"""The README's three examples run, as written, against a live server (so they cannot rot).

The curl block and the two Python blocks of "Three examples" are taken from README.md; only the
address (127.0.0.1:8000) and the model name (the default model's file name, which `make serve`
serves under) are replaced by the test server's. The curl answer must validate against its
schema, the Python blocks run in one namespace and must print a parsed Person and tool calls of
the one tool."""
import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema

from live import NAME, Server

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NAME = "SmolLM2-135M-Instruct.Q4_1"


def blocks(lang):
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Three examples"):text.index("## What works")]
    return re.findall(r"```%s\n(.*?)```" % lang, section, flags=re.S)


def test_readme_examples(tmp_path):
    s = Server(api_key=None)
    try:
        port = s.url.rsplit(":", 1)[1]

        def local(code):
            return code.replace("127.0.0.1:8000", "127.0.0.1:" + port).replace(DEFAULT_NAME, NAME)

        (curl,) = blocks("sh")
        r = subprocess.run(["bash", "-c", local(curl)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        body = json.loads(r.stdout)
        schema = json.loads(re.search(r'"schema": (\{.*\})\}\}\}', curl, flags=re.S).group(1))
        jsonschema.validate(json.loads(body["choices"][0]["message"]["content"]), schema)

        py = blocks("python")
        assert len(py) == 2
        script = tmp_path / "readme_examples.py"
        script.write_text(local("\n".join(py)))
        r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        out = r.stdout.splitlines()
        assert out[0].startswith("name=") and "age=" in out[0] and "languages=" in out[0], out
        assert "ChatCompletionMessageFunctionToolCall" in out[1] or "ChatCompletionMessageToolCall" in out[1], out
        assert "name='get_weather'" in out[1], out
    finally:
        s.stop()
