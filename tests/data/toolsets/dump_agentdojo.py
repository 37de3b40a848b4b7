#!/usr/bin/env python3
"""Dumps AgentDojo's task-suite tool lists for convert.py --agentdojo.

Run with a Python that has the agentdojo package (PyPI, MIT) installed:
    python dump_agentdojo.py OUTDIR [VERSION ...]
Each suite of each benchmark version becomes OUTDIR/<suite>_<version>.json,
the tools as AgentDojo's OpenAI pipeline sends them
(agent_pipeline/llms/openai_llm.py, _function_to_openai: name,
description, parameters = the pydantic model's model_json_schema())."""
import json
import sys
from importlib.metadata import distribution, version
from pathlib import Path

from agentdojo.task_suite.load_suites import get_suites

dist = distribution("agentdojo")
license_files = {str(f).split("dist-info/", 1)[1]: f.read_text() for f in dist.files or []
                 if "dist-info/" in str(f) and "LICEN" in f.name.upper()}
out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
for v in sys.argv[2:] or ["v1", "v1.1", "v1.1.1", "v1.1.2", "v1.2", "v1.2.1", "v1.2.2"]:
    for name, suite in get_suites(v).items():
        tools = [{"type": "function", "function": {"name": f.name, "description": f.description,
                                                   "parameters": f.parameters.model_json_schema()}}
                 for f in suite.tools]
        (out / f"{name}_{v.replace('.', '_')}.json").write_text(json.dumps(
            {"package": "agentdojo", "version": version("agentdojo"), "license": "MIT", "license_files": license_files,
             "suite": name, "benchmark_version": v, "tools": tools}, indent=1))
        print(v, name, len(tools))
