# isomer front door: make deps | build | test | demo | models | clean
PY     := $(CURDIR)/.venv/bin/python
BIN    := $(CURDIR)/build/isomer
JOBS   ?= $(shell nproc)

.PHONY: all deps build test demo models clean

all: build

# Install Debian packages and the project venv (.venv); fast when already done.
deps:
	bash scripts/install-deps.sh

# Configure and build in build/ (Release); produces build/isomer.
build: deps
	cmake -S . -B build --no-warn-unused-cli -DCMAKE_BUILD_TYPE=Release -DPython3_EXECUTABLE=$(PY)
	cmake --build build -j$(JOBS)

# Run the C++ tests (ctest), then the Python tests (pytest exit 5 = none collected is ok).
test: build
	ctest --test-dir build --output-on-failure -j2
	@if [ -d tests/python ]; then \
	  ISOMER_BIN=$(BIN) $(PY) -m pytest -q tests/python; rc=$$?; \
	  if [ $$rc -eq 5 ]; then echo "pytest: no tests collected"; rc=0; fi; exit $$rc; \
	else echo "pytest: no tests/python directory"; fi

# Optimize the shipped demo model and print the report.
demo: build
	$(BIN) optimize examples/demo.onnx -o build/demo.opt.onnx --report-json build/demo.report.json
	$(PY) -m json.tool build/demo.report.json

# Export torchvision models (random weights) to build/models/*.onnx.
models: deps
	$(PY) scripts/export_torchvision.py --out build/models

# Remove all build outputs.
clean:
	rm -rf build
