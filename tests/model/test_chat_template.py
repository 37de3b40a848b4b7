"""sieve's chat templates against the models' own Jinja templates.

sieve renders ChatML and Llama 3 in C (src/engine/chat.c) instead of running
Jinja. Here Jinja2 renders each template the way Hugging Face's
apply_chat_template does (messages, add_generation_prompt=True, bos_token),
and `sieve generate --chat --print-prompt` must produce the same bytes, for
conversations with and without a system message and with awkward content
(newlines, surrounding spaces, Unicode, text that looks like markup).

Templates: SmolLM2's (read from the default model's GGUF), and Llama 3's and
Qwen2's ChatML written into small GGUF files here with the gguf package
(metadata only: --print-prompt does not load weights). A template of
another family must be refused, not guessed.
"""
import os
import subprocess
from pathlib import Path

import gguf
import jinja2
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf"

LLAMA3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + "
    "'<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}"
    "{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}")
QWEN2 = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
OTHER = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"

CONVERSATIONS = [
    (None, "What is the capital of France?"),
    ("You answer in JSON.", "List three colours."),
    (None, "  spaces around  \n"),
    ("multi\nline system", "naïve café 日本語 🤖 <b>not markup</b> {{ not jinja }}"),
]


def sieve():
    b = os.environ.get("SIEVE_BIN")
    assert b and os.access(b, os.X_OK), "SIEVE_BIN must name the sieve binary"
    return b


def jinja_render(template, system, user, bos):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    msgs = ([{"role": "system", "content": system}] if system is not None else []) + \
        [{"role": "user", "content": user}]
    return env.from_string(template).render(messages=msgs, add_generation_prompt=True, bos_token=bos)


def sieve_render(model, system, user):
    args = [sieve(), "generate", "-m", str(model), "--chat", "-p", user, "--print-prompt"]
    if system is not None:
        args += ["--system", system]
    r = subprocess.run(args, capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def template_gguf(path, template):
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_chat_template(template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def smollm2_template():
    assert MODEL.is_file(), f"{MODEL} is missing: scripts/fetch-model.sh fetches it"
    r = gguf.GGUFReader(str(MODEL))
    f = r.fields["tokenizer.chat_template"]
    return bytes(f.parts[f.data[0]]).decode()


@pytest.mark.parametrize("system,user", CONVERSATIONS)
def test_smollm2_chatml(system, user):
    assert sieve_render(MODEL, system, user) == jinja_render(smollm2_template(), system, user, "<|im_start|>")


@pytest.mark.parametrize("system,user", CONVERSATIONS)
def test_llama3(system, user, tmp_path):
    m = template_gguf(tmp_path / "llama3.gguf", LLAMA3)
    assert sieve_render(m, system, user) == jinja_render(LLAMA3, system, user, "<|begin_of_text|>")


@pytest.mark.parametrize("system,user", CONVERSATIONS)
def test_qwen2_chatml(system, user, tmp_path):
    m = template_gguf(tmp_path / "qwen2.gguf", QWEN2)
    assert sieve_render(m, system, user) == jinja_render(QWEN2, system, user, "")


def test_other_template_is_refused(tmp_path):
    m = template_gguf(tmp_path / "other.gguf", OTHER)
    r = subprocess.run([sieve(), "generate", "-m", str(m), "--chat", "-p", "x", "--print-prompt"],
                       capture_output=True)
    assert r.returncode != 0 and b"ChatML" in r.stderr
