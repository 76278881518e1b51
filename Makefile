# Quick start: `make demo` and `make test`. Both install missing Debian packages first
# (as root; otherwise they print the apt-get line), build into build/ and run.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DCREDISSON_WERROR=ON
endif

.PHONY: all deps build test test-sanitize test-fuzz test-valgrind demo clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

# The whole suite again under ASan+UBSan and under TSan (CI runs this too); the TSan
# build runs the Criterion files with tests/support/crlite (Criterion cannot run under
# TSan). The interop suite drives peers over the network and is left to the plain build.
test-sanitize: deps
	@for s in address thread; do \
	    cmake -S . -B $(BUILD)-$$s -DCMAKE_BUILD_TYPE=Debug -DCREDISSON_SANITIZE=$$s $(CMAKE_FLAGS) >/dev/null && \
	    cmake --build $(BUILD)-$$s -j$(JOBS) && \
	    (cd $(BUILD)-$$s && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	        TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	        CRDT_CHAOS_SECONDS=30 ctest --output-on-failure --timeout 900 \
	        -E '^(interop|install|bench_quick)$$') || exit 1; \
	done

# libFuzzer targets (clang, ASan+UBSan), 60 s each on top of the committed corpus.
test-fuzz:
	@DEPS_EXTRA="clang libclang-rt-14-dev" scripts/deps.sh
	@CC=clang cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCREDISSON_FUZZ=ON \
	    -DCREDISSON_BUILD_EXAMPLES=OFF -DCREDISSON_BUILD_CLI=OFF >/dev/null
	@cmake --build $(BUILD)-fuzz -j$(JOBS) --target fuzz_url fuzz_names fuzz_reply
	cd $(BUILD)-fuzz && ctest --output-on-failure -R '^fuzz_'

# Memcheck over the stress program and the suites that exercise the most paths: no
# error and no definite leak, in the tests' processes and in every child they fork.
VALGRIND_TESTS ?= crd_stress test_names test_lock test_faults
test-valgrind: build
	@DEPS_EXTRA=valgrind scripts/deps.sh
	@rm -rf $(BUILD)/vg && mkdir -p $(BUILD)/vg
	@cd $(BUILD)/tests && for t in $(VALGRIND_TESTS); do \
	    a="--jobs 1"; [ $$t = crd_stress ] && a=; \
	    echo "valgrind: $$t"; \
	    CRD_REDIS_SERVER=$$(command -v redis-server) valgrind -q --trace-children=yes \
	        --trace-children-skip='*redis-server*' --leak-check=full --errors-for-leak-kinds=definite \
	        --suppressions=$(CURDIR)/tests/valgrind.supp \
	        --error-exitcode=99 --log-file=../vg/$$t.%p.log ./$$t $$a >/dev/null || exit 1; \
	done
	@if grep -l 'ERROR SUMMARY: [1-9]' $(BUILD)/vg/*.log; then echo "valgrind: errors above"; exit 1; fi
	@echo "valgrind: $(words $(VALGRIND_TESTS)) programs, 0 errors, no definite leaks"

demo: build
	@scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)
