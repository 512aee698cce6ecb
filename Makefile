# The README's commands. CMake does the building; this file only strings the steps together.
#   make        install missing build packages (as root), build the library and the CLI
#   make demo   the same, then run the main job on built-in defaults
#   make test   install missing build and test packages (as root), build everything, run the whole
#               fast test suite
# scripts/deps.sh says which Debian packages each needs (`scripts/deps.sh --list build|test`).
BUILD ?= build
JOBS ?= 2
CMAKE_FLAGS ?=

.PHONY: all deps deps-test configure build build-all test test-long demo bench clean

all: build

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

configure:
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

# The library and the CLI only: what `make demo` needs.
build: deps configure
	@cmake --build $(BUILD) -j $(JOBS) --target parity parity_shared

# Everything: tests, test plugins, examples, optional pieces.
build-all: deps-test configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build-all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -LE long

test-long: build-all
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) -L long

# Exit 1 from `parity check` means "a verdict failed": the catalog holds known-bad mutants, so
# that is the expected outcome of the demo; only 2 (usage) or 3 (input) make the demo fail.
demo: build
	@$(BUILD)/parity check embedding_rmsnorm_bwd --kernel builtin:all --baselines --quick; rc=$$?; \
	  if [ $$rc -le 1 ]; then echo "(demo: exit $$rc; 1 means some kernels are unfaithful, as the catalog's mutants should be)"; exit 0; else exit $$rc; fi

bench: build-all
	@for b in $(BUILD)/bench/bench_*; do [ -x "$$b" ] && "$$b"; done; \
	  for p in bench/*.py; do [ -f "$$p" ] && PARITY_LIB=$(BUILD)/libparity.so .venv/bin/python "$$p"; done

clean:
	rm -rf $(BUILD)
