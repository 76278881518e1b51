# Quick start: `make demo` and `make test`. Both install missing Debian packages first
# (as root; otherwise they print the apt-get line), build into build/ and run.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DCREDISSON_WERROR=ON
endif

.PHONY: all deps build test test-valkey test-tls test-sanitize test-fuzz test-valgrind soak-sentinel demo clean

all: build

deps:
	@scripts/deps.sh

# Quiet unless V=1: what cmake and the compiler print goes to $(BUILD)/build.log, which
# is shown only when the build fails (so `make demo` shows the demo, not the build).
V ?= 0
build: deps
ifeq ($(V),1)
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j$(JOBS)
else
	@mkdir -p $(BUILD) && echo "build: cmake into $(BUILD)/ (output in $(BUILD)/build.log; V=1 shows it)" && \
	if ! { cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) && \
	       cmake --build $(BUILD) -j$(JOBS); } >$(BUILD)/build.log 2>&1; then \
	    cat $(BUILD)/build.log; echo "build: FAILED (the output above is in $(BUILD)/build.log)"; exit 1; \
	fi
endif

# ctest keeps what credisson-bench --quick prints in its log only; the bench_quick test
# also writes it to $(BUILD)/bench/bench_quick.txt, printed here after the suite (also
# when a test failed), without the bench's per-scenario progress lines.
test: build
	@rm -f $(BUILD)/bench/bench_quick.txt
	@echo "cd $(BUILD) && ctest --output-on-failure --timeout 600"; \
	cd $(BUILD) && ctest --output-on-failure --timeout 600; rc=$$?; \
	if [ -s bench/bench_quick.txt ]; then \
	    printf '\ncredisson-bench --quick (ctest bench_quick; printed, not asserted):\n'; \
	    grep -v '^credisson-bench: rep ' bench/bench_quick.txt; \
	fi; \
	exit $$rc

# The server-facing suites again against Valkey 8 (valkey-server and valkey-tools from
# Debian's bookworm-backports, installed beside Redis by scripts/valkey-deps.sh). The
# harness starts CRD_REDIS_SERVER; CRDT_EXPECT_SERVER=valkey makes test_server fail if
# Redis answered instead. valkey-bin/ puts valkey-cli on PATH under the name redis-cli
# for the tests that run it as a shell command (test_cli), and valkey-server under the
# name redis-server for anything that starts the server by name.
VALKEY_SUITES ?= server golden lock exclusion pubsub watchdog fair rwlock cli stress
empty :=
space := $(empty) $(empty)
test-valkey: build
	@scripts/valkey-deps.sh
	@rm -rf $(BUILD)/valkey-bin && mkdir -p $(BUILD)/valkey-bin && \
	    ln -s "$$(command -v valkey-server)" $(BUILD)/valkey-bin/redis-server && \
	    ln -s "$$(command -v valkey-cli)" $(BUILD)/valkey-bin/redis-cli
	@echo "test-valkey: $$(valkey-server --version | cut -d' ' -f1-3): $(VALKEY_SUITES)"
	cd $(BUILD) && PATH="$(abspath $(BUILD))/valkey-bin:$$PATH" \
	    CRD_REDIS_SERVER="$$(command -v valkey-server)" CRD_REDIS_CLI="$$(command -v valkey-cli)" \
	    CRDT_EXPECT_SERVER=valkey \
	    ctest --output-on-failure --timeout 600 -R '^($(subst $(space),|,$(strip $(VALKEY_SUITES))))$$'

# The lock, exclusion, pub/sub and watchdog suites again over TLS: with CRDT_TLS=1 the
# harness's servers also serve TLS (certificates made for the run by
# tests/support/tls_certs.sh) and the suites' clients use it, verified. About a minute;
# tests/test_tls.c (in `make test`) covers what only TLS has.
test-tls: build
	cd $(BUILD) && CRDT_TLS=1 ctest --output-on-failure --timeout 600 -R '^(lock|exclusion|pubsub|watchdog|contention)$$'

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

# Memcheck over the stress program and every Criterion suite, each with the arguments
# ctest gives it (its --jobs, read from the build's CTestTestfile.cmake): no error and no
# definite leak in the tests' processes, in the programs they exec (Criterion's workers,
# the credisson CLI) and in every child they fork. Not followed: redis-server and the
# system's programs (/bin, /usr/bin: the shells and tools test_cli runs as CMD; under
# memcheck they start too slowly for its deadlines, and they are not ours to check).
# VALGRIND_SKIP leaves programs out (none today).
# CRDT_TIME_SCALE is the one slowdown knob (tests/support/harness.h): it stretches the few
# leases a test chooses for a scenario that must fit inside them (crdt_scaled_ms) and
# divides the heavy loops by the same factor (crdt_scaled_count), so memcheck runs about
# a third of the exclusion and renewal rounds.
# No -q: -q drops the ERROR SUMMARY lines the check below reads, and Criterion ignores
# its workers' exit status, so --error-exitcode alone misses an error inside a test.
VALGRIND_SKIP ?=
VALGRIND_TIME_SCALE ?= 3
VALGRIND_TESTS ?= crd_stress $(filter-out $(VALGRIND_SKIP),$(patsubst tests/%.c,%,$(sort $(wildcard tests/test_*.c))))
test-valgrind: build
	@DEPS_EXTRA=valgrind scripts/deps.sh
	@rm -rf $(BUILD)/vg && mkdir -p $(BUILD)/vg
	@cd $(BUILD)/tests && fail=; for t in $(VALGRIND_TESTS); do \
	    a=$$(sed -n "s|^add_test(.*/$$t\"\(.*\))\$$|\1|p" CTestTestfile.cmake | tr -d '"'); \
	    s=$$(date +%s); \
	    CRD_REDIS_SERVER=$$(command -v redis-server) CRDT_TIME_SCALE=$(VALGRIND_TIME_SCALE) \
	        valgrind --trace-children=yes \
	        --trace-children-skip='*redis-server*,/bin/*,/usr/bin/*' \
	        --leak-check=full --errors-for-leak-kinds=definite \
	        --suppressions=$(CURDIR)/tests/valgrind.supp --error-exitcode=99 \
	        --log-file=../vg/$$t.%p.log ./$$t $$a >../vg/$$t.out 2>&1; rc=$$?; \
	    echo "valgrind: $$t$$a: exit $$rc, $$(( $$(date +%s) - s )) s"; \
	    if [ $$rc -ne 0 ]; then tail -n 25 ../vg/$$t.out; fail="$$fail $$t"; fi; \
	done; \
	if grep -l 'ERROR SUMMARY: [1-9]' ../vg/*.log; then echo "valgrind: errors in the logs above"; exit 1; fi; \
	if [ -n "$$fail" ]; then echo "valgrind: failed:$$fail (output in $(BUILD)/vg/*.out)"; exit 1; fi
	@echo "valgrind: $(words $(VALGRIND_TESTS)) programs, 0 errors, no definite leaks"

# Exclusion across Sentinel failovers (a failover every 20 s), replica sync on and then
# off, SOAK_SECONDS each (default 300); prints overlaps and lost locks per mode.
SOAK_SECONDS ?= 300
soak-sentinel: build
	$(BUILD)/tests/soak_sentinel $(SOAK_SECONDS) both

demo: build
	@scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)
