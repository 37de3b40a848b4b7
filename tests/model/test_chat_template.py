"""sieve's chat templates against the models' own Jinja templates.

sieve renders ChatML, Llama 3, Mistral and Gemma in C (src/chat/chat.c) instead of running
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
import json
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
OTHER = "{% for m in messages %}### Instruction:\n{{ m['content'] }}\n### Response:\n{% endfor %}"

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


# ---- Mistral and Gemma, multi-turn conversations and tools ----------------
#
# Longer conversations (and tools) go through tests/server/api_cli (the
# server's own path: request body -> messages -> template), rendered by
# Jinja2 from the same messages. Tool definitions and call arguments are
# written with Hugging Face's tojson (json.dumps, ensure_ascii=False), and
# call arguments reach the template as objects, as vLLM passes them.

MISTRAL = (
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}"
    "{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}"
    "{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}")
GEMMA2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}")
# Gemma 3's handling of a system message (string contents only).
GEMMA3 = (
    "{{ bos_token }}{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = \"\" -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}{%- if (message['role'] == 'assistant') -%}{%- set role = \"model\" -%}"
    "{%- else -%}{%- set role = message['role'] -%}{%- endif -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%}")
# Qwen2.5's template: tools in the system turn, <tool_call> calls,
# <tool_response> results.
QWEN25 = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Current weather — «quoted» \"city\"",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                        "days": {"type": "integer", "minimum": 1, "maximum": 7.5}},
                       "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}},
]

MULTI = [
    {"role": "user", "content": "  Hi there  "},
    {"role": "assistant", "content": "Hello! How can I help?\n"},
    {"role": "user", "content": "naïve café 日本語 🤖 {{ not jinja }}"},
]

TOOL_TALK = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and the time?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "get_weather",
                                                      "arguments": json.dumps({"city": "Paris", "days": 2})}},
        {"id": "c2", "type": "function", "function": {"name": "now", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "18 °C, sun"},
    {"role": "tool", "tool_call_id": "c2", "content": "12:00"},
    {"role": "assistant", "content": "Sunny, 18 °C; it is noon."},
    {"role": "user", "content": "And tomorrow?"},
]


def api_cli():
    b = os.environ.get("API_CLI_BIN")
    assert b and os.access(b, os.X_OK), "API_CLI_BIN must name tests/api_cli"
    return b


def cli_render(template, messages, tools=None, tmp_path=None):
    f = tmp_path / "template.jinja"
    f.write_text(template)
    body = {"messages": messages}
    if tools:
        body["tools"] = tools
    r = subprocess.run([api_cli(), "render", "@" + str(f)], input=json.dumps(body).encode(), capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def hf_render(template, messages, tools=None, bos="", eos=""):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    # Hugging Face's tojson: json.dumps, non-ASCII kept, keys in order
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    env.globals["raise_exception"] = raise_exception
    msgs = []
    for m in messages:
        m = dict(m)
        if m.get("tool_calls"):
            m["tool_calls"] = [{**c, "function": {**c["function"],
                                                  "arguments": json.loads(c["function"]["arguments"])}}
                               for c in m["tool_calls"]]
        msgs.append(m)
    kw = {"tools": tools} if tools else {}
    return env.from_string(template).render(messages=msgs, add_generation_prompt=True, bos_token=bos,
                                            eos_token=eos, **kw)


@pytest.mark.parametrize("system,user", [c for c in CONVERSATIONS if c[0] is None])
def test_mistral(system, user, tmp_path):
    m = template_gguf(tmp_path / "mistral.gguf", MISTRAL)
    assert sieve_render(m, system, user) == jinja_render_ex(MISTRAL, system, user, "<s>", "</s>")


@pytest.mark.parametrize("system,user", [c for c in CONVERSATIONS if c[0] is None])
def test_gemma2(system, user, tmp_path):
    m = template_gguf(tmp_path / "gemma.gguf", GEMMA2)
    assert sieve_render(m, system, user) == jinja_render_ex(GEMMA2, system, user, "<bos>", "<eos>")


@pytest.mark.parametrize("system,user", CONVERSATIONS)
def test_gemma3_system(system, user, tmp_path):
    m = template_gguf(tmp_path / "gemma3.gguf", GEMMA3)
    assert sieve_render(m, system, user) == jinja_render_ex(GEMMA3, system, user, "<bos>", "<eos>")


def jinja_render_ex(template, system, user, bos, eos):
    msgs = ([{"role": "system", "content": system}] if system is not None else []) + \
        [{"role": "user", "content": user}]
    return hf_render(template, msgs, bos=bos, eos=eos)


@pytest.mark.parametrize("template,bos,eos", [(MISTRAL, "<s>", "</s>"), (GEMMA2, "<bos>", "<eos>"),
                                              (GEMMA3, "<bos>", "<eos>"), (LLAMA3, "<|begin_of_text|>", ""),
                                              (QWEN2, "", ""), (QWEN25, "", "")])
def test_multi_turn(template, bos, eos, tmp_path):
    assert cli_render(template, MULTI, tmp_path=tmp_path) == hf_render(template, MULTI, bos=bos, eos=eos)


@pytest.mark.parametrize("messages", [
    TOOL_TALK,
    TOOL_TALK[1:],  # no system message: Qwen's default one
    [{"role": "user", "content": "What can you do?"}],
])
def test_qwen25_tools(messages, tmp_path):
    assert cli_render(QWEN25, messages, TOOLS, tmp_path) == hf_render(QWEN25, messages, TOOLS)


def test_qwen25_tool_results_without_tools(tmp_path):
    # tools absent: the conversation with calls and results still renders as Qwen2.5 does
    assert cli_render(QWEN25, TOOL_TALK, None, tmp_path) == hf_render(QWEN25, TOOL_TALK)


def test_qwen25_default_system_is_found(tmp_path):
    # the template's default system message comes after a Jinja expression
    # that writes the caller's own: it is still found
    out = cli_render(QWEN25, [{"role": "user", "content": "hi"}], None, tmp_path)
    assert out.startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")


@pytest.mark.parametrize("template", [LLAMA3, MISTRAL, GEMMA2])
def test_tools_reach_other_families(template, tmp_path):
    # These families' own tool formats differ between versions: sieve writes
    # the tools into the system text (see src/chat/chat.h). Every tool
    # definition and every call must be in the prompt, as JSON.
    out = cli_render(template, TOOL_TALK, TOOLS, tmp_path)
    for t in TOOLS:
        assert json.dumps(t, ensure_ascii=False) in out
    assert '{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}' in out
    assert "18 °C, sun" in out and "And tomorrow?" in out
