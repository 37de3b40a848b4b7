# sieve — the entry points. `make test` and `make serve` work on a fresh
# Debian 12 clone: they run scripts/bootstrap.sh first.
SHELL := /bin/bash
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
SHARED_DATA ?= ../shared/data

.PHONY: all bootstrap build test test-unit test-cli test-asan test-extended test-soak test-soak-long test-compile-bounds fuzz-smoke bench serve clean

all: build

.venv/.requirements.sha256: tests/requirements.txt scripts/bootstrap.sh
	scripts/bootstrap.sh

bootstrap: .venv/.requirements.sha256

build: bootstrap
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	scripts/fetch-model.sh >/dev/null
	SIEVE_BIN=$(abspath $(BUILD))/sieve SAMPLE_FORMAT_BIN=$(abspath $(BUILD))/tests/sample_format \
	  TOK_CLI_BIN=$(abspath $(BUILD))/tests/tok_cli DEQUANT_CLI_BIN=$(abspath $(BUILD))/tests/dequant_cli \
	  SAMPLE_CLI_BIN=$(abspath $(BUILD))/tests/sample_cli LOGITS_CLI_BIN=$(abspath $(BUILD))/tests/logits_cli \
	  API_CLI_BIN=$(abspath $(BUILD))/tests/api_cli \
	  .venv/bin/python -m pytest -q tests/cli tests/schema tests/format/check_formats.py tests/tokenizer/test_nfc.py \
	  tests/model tests/server tests/deploy tests/layout tests/grammar

# The unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: bootstrap
	cmake -S . -B build-asan -DSV_CUDA=OFF -DSV_SANITIZE=address,undefined >/dev/null
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS)

# Checks on the benchmark data in ../shared/data; fails loudly without it.
test-extended: build
	@if [ ! -d "$(SHARED_DATA)" ]; then \
	  echo "test-extended: $(SHARED_DATA) is missing; these checks need the benchmark data (see README)" >&2; exit 1; fi
	tests/extended/run_regex_corpus.sh $(BUILD) $(SHARED_DATA)
	$(BUILD)/tests/test_token_index --tokenizer $(SHARED_DATA)/tokenizers/llama3/tokenizer.json --states 3
	$(BUILD)/tests/test_matcher --tokenizer $(SHARED_DATA)/tokenizers/llama3/tokenizer.json
	$(BUILD)/tests/test_structural_tag --tokenizer $(SHARED_DATA)/tokenizers/llama3/tokenizer.json
	.venv/bin/python tests/extended/maskbench_subset.py --sieve $(BUILD)/sieve --data $(SHARED_DATA)
	scripts/fetch-model.sh >/dev/null
	TOK_CLI_BIN=$(abspath $(BUILD))/tests/tok_cli SIEVE_SHARED_DATA=$(abspath $(SHARED_DATA)) \
	  .venv/bin/python -m pytest -q tests/tokenizer/test_parity.py tests/tokenizer/test_gguf_parity.py
	SIEVE_BIN=$(abspath $(BUILD))/sieve TOK_CLI_BIN=$(abspath $(BUILD))/tests/tok_cli \
	  SIEVE_SHARED_DATA=$(abspath $(SHARED_DATA)) .venv/bin/python -m pytest -q tests/extended/test_engine_maskbench.py
	.venv/bin/python tests/reliability/compile_bounds.py --sieve $(BUILD)/sieve --data $(SHARED_DATA) --stride 19

# Every MaskBench schema under hard compile bounds (2 GiB address space,
# 512 MiB, 5 s): about 10 minutes on 2 cores. See BENCHMARKS.md.
test-compile-bounds: build
	@if [ ! -d "$(SHARED_DATA)" ]; then \
	  echo "test-compile-bounds: $(SHARED_DATA) is missing (see README)" >&2; exit 1; fi
	.venv/bin/python tests/reliability/compile_bounds.py --sieve $(BUILD)/sieve --data $(SHARED_DATA) \
	  --out $(BUILD)/compile_bounds.json

# The server under mixed good and hostile load on loopback (tests/soak/soak.py):
# 60 seconds in CI; test-soak-long is the 10-minute run of BENCHMARKS.md.
test-soak: build
	scripts/fetch-model.sh >/dev/null
	.venv/bin/python tests/soak/soak.py --sieve $(BUILD)/sieve --seconds 60 --out $(BUILD)/soak.json

test-soak-long: build
	scripts/fetch-model.sh >/dev/null
	.venv/bin/python tests/soak/soak.py --sieve $(BUILD)/sieve --seconds 600 --out $(BUILD)/soak-long.json

fuzz-smoke: bootstrap
	scripts/fuzz-smoke.sh 60

bench: bootstrap
	cmake -S . -B build-rel -DSV_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build-rel -j $(JOBS)
	build-rel/tests/bench/bench_regex_compile

# JSON Schema coverage on all of MaskBench (../shared/data/maskbench; about
# an hour on 2 cores): compile, match every test instance, judge samples.
# Records go to build-rel/maskbench/results.jsonl; see BENCHMARKS.md. Run (b)
# there: make bench-coverage COVERAGE_ARGS=--sieve-arg=--allow-unknown-formats
COVERAGE_ARGS ?=
.PHONY: bench-coverage
bench-coverage: bootstrap
	@if [ ! -d "$(SHARED_DATA)/maskbench" ]; then \
	  echo "bench-coverage: $(SHARED_DATA)/maskbench is missing; this benchmark needs the data (see README)" >&2; exit 1; fi
	cmake -S . -B build-rel -DSV_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build-rel -j $(JOBS)
	.venv/bin/python tests/bench/maskbench_coverage.py --sieve build-rel/sieve \
	  --data $(SHARED_DATA)/maskbench --out build-rel/maskbench/results.jsonl --jobs $(JOBS) $(COVERAGE_ARGS)

# Token masks on the fixed 537-file MaskBench sample (about 4 minutes): the
# MaskBench method with the Llama 3 tokenizer, one thread. The side-by-side
# run with llguidance and XGrammar is tests/bench/maskbench_compare.sh (it
# needs tests/bench/peers/setup.sh first; see BENCHMARKS.md).
.PHONY: bench-masks
bench-masks: bootstrap
	@if [ ! -d "$(SHARED_DATA)/maskbench" ]; then \
	  echo "bench-masks: $(SHARED_DATA)/maskbench is missing; this benchmark needs the data (see README)" >&2; exit 1; fi
	cmake -S . -B build-rel -DSV_CUDA=OFF -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build build-rel -j $(JOBS)
	python3 tests/bench/maskbench_prep.py --data $(SHARED_DATA)/maskbench \
	  --sample tests/bench/maskbench_sample.txt --out build-rel/maskbench-prep
	build-rel/sieve maskbench --tokenizer $(SHARED_DATA)/tokenizers/llama3/tokenizer.json \
	  --tokenizer-config $(SHARED_DATA)/tokenizers/llama3/tokenizer_config.json \
	  --per-schema build-rel/maskbench-prep > build-rel/maskbench-masks.jsonl
	tail -1 build-rel/maskbench-masks.jsonl

# The OpenAI-compatible server on the default model, CPU backend, at
# http://127.0.0.1:8000 (SERVE_ARGS adds options: see sieve serve --help).
SERVE_ARGS ?=
serve: build
	scripts/fetch-model.sh >/dev/null
	$(BUILD)/sieve serve -m models/SmolLM2-135M-Instruct.Q4_1.gguf --device cpu $(SERVE_ARGS)

clean:
	rm -rf $(BUILD) build-asan build-rel build-fuzz
