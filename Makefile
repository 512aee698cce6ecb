# The README's commands. CMake does the building; this file only strings the steps together.
#   make demo   install missing packages (as root), build, run the main job on built-in defaults
#   make test   install missing packages (as root), build, run the whole fast test suite
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps build test test-long demo bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

test-long: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L long

# Exit 1 from `parity check` means "a verdict failed": the catalog holds known-bad mutants, so
# that is the expected outcome of the demo; only 2 (usage) or 3 (input) make the demo fail.
demo: build
	@$(BUILD)/parity check embedding_rmsnorm_bwd --kernel builtin:all --baselines --quick; rc=$$?; \
	  if [ $$rc -le 1 ]; then echo "(demo: exit $$rc; 1 means some kernels are unfaithful, as the catalog's mutants should be)"; exit 0; else exit $$rc; fi

bench: build
	@for b in $(BUILD)/bench/bench_*; do [ -x "$$b" ] && "$$b"; done; \
	  for p in bench/*.py; do [ -f "$$p" ] && PARITY_LIB=$(BUILD)/libparity.so .venv/bin/python "$$p"; done

clean:
	rm -rf $(BUILD)
