# Thin wrapper over CMake. `make setup` installs the Debian packages the build needs (root or sudo), Slurm
# for the job-array test (optional: a failed install only warns), and the Python packages the end-to-end
# tests compare against (pinned; a package pip cannot install is named, and the tests that need it skip
# visibly), and ccache (CMake uses it when installed). `make run` builds only the cbatch binary; `make test`
# builds everything (tests included), runs ctest and ends with one line per skipped test
# (tools/skip_report.py; with CBATCH_STRICT_SKIPS=1 a skip for another reason than a missing GPU or a
# package setup could not install fails the target). docs/development.md has the build options.
# `make test-robust`: the CPU tests under ASan+UBSan (clang) and a bounded run of every fuzz target.
BUILD ?= build
ROBUST_BUILD ?= build-robust
FUZZ_SECONDS ?= 30
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc)
CBATCH := $(BUILD)/cbatch
MODEL := models/SmolLM2-135M-Instruct.Q4_1.gguf
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
PY_TEST_PACKAGES := tokenizers==0.23.3 gguf==0.19.0 jinja2==3.1.6 "numpy>=1.24" jsonschema==4.26.0 transformers==5.24.0 pyyaml==6.0.3 openai==3.57.0

JUNIT := $(abspath $(BUILD))/ctest-junit.xml

.PHONY: all setup configure build build-cbatch test test-data test-robust run bench model clean

all: build

setup:
	$(SUDO) apt-get update -qq
	$(SUDO) apt-get install -y -qq cmake g++ make python3 python3-pip libcli11-dev libsimdjson-dev libpcre2-dev doctest-dev ccache
	@# All at once, else one by one, naming each package pip could not install.
	PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet $(PY_TEST_PACKAGES) || \
	  for package in $(PY_TEST_PACKAGES); do \
	    PIP_BREAK_SYSTEM_PACKAGES=1 python3 -m pip install --quiet "$$package" || \
	    echo "warning: could not install the Python package $$package; the tests that need it will be skipped"; \
	  done
	$(SUDO) apt-get install -y -qq --no-install-recommends clang libclang-rt-dev time
	@# A single-node Slurm for tests/e2e/test_slurm_array.py (its daemons are started by the test, never as services).
	$(SUDO) apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge || \
	  echo "warning: could not install Slurm; the Slurm array test will be skipped"

configure:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

build: configure
	cmake --build $(BUILD) -j$(JOBS)

build-cbatch: configure
	cmake --build $(BUILD) -j$(JOBS) --target cbatch

# The skip report runs even when a test failed; the target fails when ctest or the report does.
test: build test-data
	@rm -f $(JUNIT)
	@status=0; \
	ctest --test-dir $(BUILD) --parallel $(JOBS) --output-on-failure --output-junit $(JUNIT) --test-output-size-passed 1048576 \
	  || status=$$?; \
	python3 tools/skip_report.py --setup-packages '$(PY_TEST_PACKAGES)' $(JUNIT) || status=1; \
	exit $$status

# The default model for the SmolLM2 tests, Gemma 3 270M (Q4_K_M) for the family tests and all-MiniLM-L6-v2
# (a sentence-transformers directory) for the embedding tests. A test whose model
# could not be fetched skips with a message, which the skip report lists and CI (strict) counts as a failure.
test-data:
	@tools/fetch_model.sh models >/dev/null || echo "warning: could not fetch $(MODEL); the SmolLM2 tests will be skipped"
	@tools/fetch_gemma3.sh models >/dev/null || echo "warning: could not fetch Gemma 3 270M; its tests will be skipped"
	@tools/fetch_minilm.sh models >/dev/null || echo "warning: could not fetch all-MiniLM-L6-v2; the embedding tests will be skipped"
	@tools/fetch_llama_vocabs.sh models >/dev/null || echo "warning: could not fetch llama.cpp's vocabulary test files; test_llama_vocabs will be skipped"

# One clang build serves both: sanitizers everywhere, fuzzer coverage outside the compute kernels.
test-robust:
	CC=clang CXX=clang++ cmake -S . -B $(ROBUST_BUILD) -DCBATCH_CUDA=OFF -DCBATCH_FUZZ=ON \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build $(ROBUST_BUILD) -j$(JOBS)
	ctest --test-dir $(ROBUST_BUILD) --parallel $(JOBS) --output-on-failure
	tools/run_fuzzers.sh $(ROBUST_BUILD) $(FUZZ_SECONDS)

model: $(MODEL)

$(MODEL):
	tools/fetch_model.sh models

run: build-cbatch $(MODEL)
	@mkdir -p out
	$(CBATCH) run examples/prompts/chat.jsonl --model $(MODEL) -o out/chat.jsonl --trace out/chat-trace.jsonl --ordered
	$(CBATCH) run examples/prompts/completions.jsonl --model $(MODEL) -o out/completions.jsonl --ordered
	@echo "outputs: out/chat.jsonl out/completions.jsonl (trace: out/chat-trace.jsonl)"

bench: build-cbatch
	$(CBATCH) bench --model dummy:examples/models/smollm2-135m.json --num-prompts 64 --input-len 16:256 \
	  --output-len 16:256 --max-num-seqs 16 --json out-bench.json

clean:
	rm -rf $(BUILD) $(ROBUST_BUILD)
