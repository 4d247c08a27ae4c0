# isomer front door: make deps | build | test | fuzz | demo | models | corpus | bench | rules | profile | clean
PY     := $(CURDIR)/.venv/bin/python
JOBS   ?= $(shell nproc)

# SANITIZE=1: build and test with AddressSanitizer + UndefinedBehaviorSanitizer in
# build/sanitize (no Python module: an ASan library cannot load into python).
ifeq ($(SANITIZE),1)
BUILD       := build/sanitize
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=RelWithDebInfo -DISOMER_SANITIZE=ON -DISOMER_BUILD_PYTHON=OFF
else
BUILD       := build
CMAKE_FLAGS := -DCMAKE_BUILD_TYPE=Release
endif
BIN    := $(CURDIR)/$(BUILD)/isomer

.PHONY: all deps build test fuzz demo models corpus bench rules profile clean

all: build

# Install Debian packages and the project venv (.venv); fast when already done.
deps:
	bash scripts/install-deps.sh

# Configure and build in $(BUILD) (build/: Release); produces $(BUILD)/isomer.
build: deps
	cmake -S . -B $(BUILD) --no-warn-unused-cli $(CMAKE_FLAGS) -DPython3_EXECUTABLE=$(PY)
	cmake --build $(BUILD) -j$(JOBS)

# Run the C++ tests (ctest), then the Python tests (pytest exit 5 = none collected is ok),
# then the libFuzzer harnesses for a few seconds each over their seed corpus.
test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2
	@if [ -d tests/python ]; then \
	  ISOMER_BIN=$(BIN) ISOMER_BUILD_DIR=$(CURDIR)/$(BUILD) $(PY) -m pytest -q tests/python; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; rc=0; fi; exit $$rc; \
	else echo "pytest: no tests/python directory"; fi
	bash scripts/fuzz.sh --quick

# Every fuzzer (optimizer differential, ONNX importer, graph text parser) side by side for
# about FUZZ_SECONDS; non-zero exit and the reproducer's path on any finding.
FUZZ_SECONDS ?= 60
fuzz: build
	bash scripts/fuzz.sh --seconds $(FUZZ_SECONDS) --tests $(CURDIR)/$(BUILD)/tests/isomer_tests

# Optimize the shipped demo model and print the report.
demo: build
	$(BIN) optimize examples/demo.onnx -o build/demo.opt.onnx --report-json build/demo.report.json
	$(PY) -m json.tool build/demo.report.json

# Export torchvision models (random weights) to build/models/*.onnx.
models: deps
	$(PY) scripts/export_torchvision.py --out build/models

# The benchmark corpus, build/corpus/<name>.onnx (+ .onnx.data) and manifest.json:
# torchvision CNNs exported by torch, transformer, RNN and MLP blocks written the way
# current PyTorch exports them, the TASO/Tensat suite; random weights, nothing
# downloaded. Models already built are skipped (scripts/corpus/build.py --force redoes).
corpus: deps
	$(PY) scripts/corpus/build.py --out build/corpus

# isomer next to ONNX Runtime (original and isomer's output), onnxsim and OpenVINO on the
# corpus (built if missing), at 1 and 2 threads, with the cost model's predictions:
# build/bench.json and build/bench.png (BENCH_ARGS="--only resnet50 --quick" narrows it;
# requirements-bench.txt goes into .venv first). Then the μGraph kernels of
# scripts/bench_mugraph.py at 1 and 2 threads, each region and the corpus's transformer
# blocks under `optimize --mugraph`, against the unfused runtime and ONNX Runtime
# (build/bench_mugraph.t{1,2}.json and .png; MUGRAPH_ARGS="--only softmax_8x512" narrows
# it; torch.compile joins both benches where ISOMER_TORCH_PYTHON names a Python with
# torch >= 2). Then the rule generator's stages, time and memory for each N in
# BENCH_MAX_OPS (build/bench_rules.json; BENCH_MAX_OPS=3,4 adds the 4-operator run,
# about 8 minutes on 2 cores).
BENCH_MAX_OPS ?= 3
BENCH_ARGS ?=
MUGRAPH_ARGS ?= --models $(foreach m,gpt2_block llama_block bert_base vit_s16,build/corpus/$(m).onnx)
bench: build
	@want=$$(sha256sum requirements-bench.txt | cut -d' ' -f1); stamp=.venv/.bench-requirements.stamp; \
	if [ "$$(cat $$stamp 2>/dev/null)" != "$$want" ]; then echo "bench: pip install -r requirements-bench.txt"; \
	  PIP_DISABLE_PIP_VERSION_CHECK=1 $(PY) -m pip install -q --no-input -r requirements-bench.txt && echo $$want > $$stamp \
	  || echo "bench: pip install failed: the engines that need it are skipped"; fi
	$(PY) scripts/corpus/build.py --out build/corpus
	$(PY) scripts/bench.py --isomer $(BIN) --corpus build/corpus --json build/bench.json --png build/bench.png $(BENCH_ARGS)
	for t in 1 2; do $(PY) scripts/bench_mugraph.py --isomer $(BIN) --threads $$t --json build/bench_mugraph.t$$t.json \
	  --png build/bench_mugraph.t$$t.png $(MUGRAPH_ARGS) || exit 1; done
	$(PY) scripts/bench_rules.py --isomer $(BIN) --max-ops $(BENCH_MAX_OPS) --json build/bench_rules.json
	$(PY) scripts/export_parallel_models.py --out build/models/parallel && $(PY) scripts/bench_parallel.py --isomer $(BIN) --json build/bench_parallel.json

# isomer's runtime step by step next to ONNX Runtime on the same nodes:
# make profile MODEL=path/to/model.onnx [THREADS=1] [INPUTS=in.npz]
THREADS ?= 1
profile: build
	@[ -n "$(MODEL)" ] || { echo "make profile MODEL=path/to/model.onnx [THREADS=1] [INPUTS=in.npz]"; exit 2; }
	$(PY) scripts/profile.py $(MODEL) --isomer $(BIN) --threads $(THREADS) $(if $(INPUTS),--inputs $(INPUTS)) --json $(BUILD)/profile.json

# Regenerate the shipped rule set: every identity of up to 3 operators the generator
# finds and the verifier accepts (verdicts recorded), in rules/generated.rules.
rules: build
	$(BIN) rules generate --max-ops 3 -o rules/generated.rules --report-json $(BUILD)/generated.report.json

# Remove all build outputs.
clean:
	rm -rf build
