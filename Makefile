# Quick start: `make demo` and `make test`. Both install missing Debian packages first
# (as root; otherwise they print the apt-get line), build into build/ and run.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DCREDISSON_WERROR=ON
endif

.PHONY: all deps build test test-valkey test-tls test-sanitize test-fuzz test-valgrind soak-sentinel soak-partition soak-r47 demo clean \
	test-clang analyze test-hiredis1 bench-compare

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

# Suites at a time under ctest (make test, test-valkey, test-sanitize): two on this
# project's 2-core machines. Every suite starts its own servers on free ports, so they run
# side by side; the longest ones (failovers, paced replays, the timed chaos run: waiting
# more than computing) start first (their COST in tests/CMakeLists.txt), and the two that
# time the machine itself run alone (demo and bench_quick: RUN_SERIAL). CTEST_JOBS=1 runs
# them one by one, as before (17 min against 8.6 on this VM, 2026-12-02).
CTEST_JOBS ?= $(JOBS)

# ctest keeps what credisson-bench --quick prints in its log only; the bench_quick test
# also writes it to $(BUILD)/bench/bench_quick.txt, printed here after the suite (also
# when a test failed), without the bench's per-scenario progress lines.
test: build
	@rm -f $(BUILD)/bench/bench_quick.txt
	@echo "cd $(BUILD) && ctest -j$(CTEST_JOBS) --output-on-failure --timeout 600"; \
	cd $(BUILD) && ctest -j$(CTEST_JOBS) --output-on-failure --timeout 600; rc=$$?; \
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
# name redis-server for anything that starts the server by name. The Cluster and
# Sentinel suites run on Valkey too: cluster nodes are CRD_REDIS_SERVER, made a cluster
# by CRD_REDIS_CLI (valkey-cli --cluster create); the sentinels are CRD_REDIS_SENTINEL
# (valkey-server --sentinel; Debian's valkey-sentinel package is not needed). With
# CRDT_EXPECT_SERVER the harness checks every node and sentinel it starts is Valkey.
VALKEY_SUITES ?= server golden lock exclusion pubsub watchdog fair rwlock cli stress cluster sentinel
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
	    CRD_REDIS_SENTINEL="$$(command -v valkey-server)" \
	    CRDT_EXPECT_SERVER=valkey \
	    ctest -j$(CTEST_JOBS) --output-on-failure --timeout 600 -R '^($(subst $(space),|,$(strip $(VALKEY_SUITES))))$$'

# The lock, exclusion, pub/sub, watchdog, contention, semaphore and latch suites again
# over TLS (the synchronizers' lost-reply tests stay plain: the fault proxy reads the
# commands): with CRDT_TLS=1 the harness's servers also serve TLS (certificates made for
# the run by tests/support/tls_certs.sh) and the suites' clients use it, verified. About a
# minute;
# tests/test_tls.c (in `make test`) covers what only TLS has.
test-tls: build
	cd $(BUILD) && CRDT_TLS=1 ctest --output-on-failure --timeout 600 -R '^(lock|exclusion|pubsub|watchdog|contention|semaphore|latch)$$'

# The whole suite again under ASan+UBSan and under TSan (CI runs this too); the TSan
# build runs the Criterion files with tests/support/crlite (Criterion cannot run under
# TSan). The interop suite drives peers over the network and is left to the plain build.
test-sanitize: deps
	@for s in address thread; do \
	    cmake -S . -B $(BUILD)-$$s -DCMAKE_BUILD_TYPE=Debug -DCREDISSON_SANITIZE=$$s $(CMAKE_FLAGS) >/dev/null && \
	    cmake --build $(BUILD)-$$s -j$(JOBS) && \
	    (cd $(BUILD)-$$s && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	        TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	        CRDT_CHAOS_SECONDS=30 ctest -j$(CTEST_JOBS) --output-on-failure --timeout 900 \
	        -E '^(interop|install|bench_quick)$$') || exit 1; \
	done

# credisson against hiredis 1.x, as most users build it (Debian 13, Ubuntu 24.04, Fedora,
# Homebrew and vcpkg ship 1.x; this machine's own libhiredis-dev is 0.14):
# scripts/hiredis1.sh fetches Debian trixie's hiredis source package through a private
# apt state (a deb-src line used for that `apt-get source` only; nothing is installed)
# and builds it into $(BUILD)-hiredis1/hiredis/prefix; credisson is built against it with
# -Werror, found through hiredis's CMake package (the check below fails the target if
# the build took the system's 0.14 instead), and the server-facing suites run.
HIREDIS1_SUITES ?= server golden lock pubsub watchdog tls cli
test-hiredis1: deps
	@scripts/hiredis1.sh $(BUILD)-hiredis1/hiredis >/dev/null
	@cmake -S . -B $(BUILD)-hiredis1 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCREDISSON_WERROR=ON \
	    -DCMAKE_PREFIX_PATH="$(abspath $(BUILD)-hiredis1/hiredis/prefix)" $(CMAKE_FLAGS) >/dev/null
	@grep -q '^hiredis_DIR:PATH=$(abspath $(BUILD)-hiredis1/hiredis/prefix)/' $(BUILD)-hiredis1/CMakeCache.txt || \
	    { echo "test-hiredis1: CMake did not find the private hiredis 1.x" >&2; exit 1; }
	cmake --build $(BUILD)-hiredis1 -j$(JOBS)
	@ldd $(BUILD)-hiredis1/libcredisson.so | grep -q '$(abspath $(BUILD)-hiredis1/hiredis/prefix)/lib/libhiredis.so.1' || \
	    { echo "test-hiredis1: libcredisson.so is not linked to the private hiredis 1.x" >&2; exit 1; }
	@echo "test-hiredis1: $$(basename $$(ls -d $(BUILD)-hiredis1/hiredis/src/hiredis-1.*/)): $(HIREDIS1_SUITES)"
	cd $(BUILD)-hiredis1 && ctest --output-on-failure --timeout 600 \
	    -R '^($(subst $(space),|,$(strip $(HIREDIS1_SUITES))))$$'

# The whole tree (library, CLI, examples, tests, bench) built with clang and -Werror in
# $(BUILD)-clang, then the suites that need no server and two that do, and the C++
# header's suite built with clang++. Clang's warnings differ from gcc's
# (-Wformat-nonliteral under -Wformat=2, -Wfor-loop-analysis).
CLANG_SUITES ?= units names lock cli openmetrics cpp
test-clang:
	@DEPS_EXTRA="clang" scripts/deps.sh
	@CC=clang CXX=clang++ cmake -S . -B $(BUILD)-clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCREDISSON_WERROR=ON \
	    $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD)-clang -j$(JOBS)
	cd $(BUILD)-clang && ctest --output-on-failure --timeout 600 \
	    -R '^($(subst $(space),|,$(strip $(CLANG_SUITES))))$$'

# Clang's static analyzer (scan-build, package clang-tools) over src/ and cli/: the
# library and the CLI only, configured afresh so that every file is compiled (and
# analyzed) under scan-build. Any finding fails the target (--status-bugs); the HTML
# report stays in $(BUILD)-analyze/report. Where the analyzer is wrong, the code says so
# in a comment next to the line that answers it (search for "clang's analyzer").
analyze:
	@DEPS_EXTRA="clang clang-tools" scripts/deps.sh
	@rm -rf $(BUILD)-analyze
	@scan-build -o $(BUILD)-analyze/report cmake -S . -B $(BUILD)-analyze -DCMAKE_BUILD_TYPE=Debug \
	    -DCREDISSON_BUILD_TESTS=OFF -DCREDISSON_BUILD_EXAMPLES=OFF >/dev/null
	scan-build --status-bugs -o $(BUILD)-analyze/report \
	    cmake --build $(BUILD)-analyze -j$(JOBS) --target credisson_obj credisson_cli

# libFuzzer targets (clang, ASan+UBSan), 60 s each on top of the committed corpus, the three
# at once (each is bounded by time, not by runs).
test-fuzz:
	@DEPS_EXTRA="clang libclang-rt-14-dev" scripts/deps.sh
	@CC=clang cmake -S . -B $(BUILD)-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCREDISSON_FUZZ=ON \
	    -DCREDISSON_BUILD_EXAMPLES=OFF -DCREDISSON_BUILD_CLI=OFF >/dev/null
	@cmake --build $(BUILD)-fuzz -j$(JOBS) --target fuzz_url fuzz_names fuzz_reply
	cd $(BUILD)-fuzz && ctest --output-on-failure -j3 -R '^fuzz_'

# Memcheck over the stress program and every Criterion suite, each with the arguments
# ctest gives it (its --jobs, read from the build's CTestTestfile.cmake): no error and no
# definite leak in the tests' processes, in the programs they exec (Criterion's workers,
# the credisson CLI) and in every child they fork. Not followed: redis-server and the
# system's programs (/bin, /usr/bin: the shells and tools test_cli runs as CMD; under
# memcheck they start too slowly for its deadlines, and they are not ours to check).
# VALGRIND_SKIP leaves programs out (.ci/run leaves out the three longest).
# CRDT_TIME_SCALE is the one slowdown knob (tests/support/harness.h): it stretches the few
# leases a test chooses for a scenario that must fit inside them (crdt_scaled_ms) and
# divides the heavy loops by the same factor (crdt_scaled_count), so memcheck runs about
# a third of the exclusion and renewal rounds.
# No -q: -q drops the ERROR SUMMARY lines the check below reads, and Criterion ignores
# its workers' exit status, so --error-exitcode alone misses an error inside a test
# (scripts/memcheck.sh reads every log).
VALGRIND_SKIP ?=
# Programs under memcheck at a time (scripts/memcheck.sh: one keeps about one core busy).
VALGRIND_JOBS ?= $(JOBS)
VALGRIND_TIME_SCALE ?= 3
VALGRIND_TESTS ?= crd_stress $(filter-out $(VALGRIND_SKIP),$(patsubst tests/%.c,%,$(sort $(wildcard tests/test_*.c))))
test-valgrind: build
	@DEPS_EXTRA=valgrind scripts/deps.sh
	@rm -rf $(BUILD)/vg && mkdir -p $(BUILD)/vg
	@CRD_REDIS_SERVER=$$(command -v redis-server) CRDT_TIME_SCALE=$(VALGRIND_TIME_SCALE) \
	    scripts/memcheck.sh $(BUILD)/tests $(abspath $(BUILD))/vg $(CURDIR)/tests/valgrind.supp \
	    $(VALGRIND_JOBS) $(VALGRIND_TESTS)
	@echo "valgrind: $(words $(VALGRIND_TESTS)) programs, 0 errors, no definite leaks"

# Exclusion across Sentinel failovers (a failover every 20 s), replica sync on and then
# off, SOAK_SECONDS each (default 300); prints overlaps and lost locks per mode.
SOAK_SECONDS ?= 300
# Issue 44's rate limiter at full length: 8 processes sharing 50 permits a second for 10 s
# (make test runs the same test over 3 s), standalone; about 15 s.
soak-r47: build
	cd $(BUILD) && CRDT_RL_WINDOW_S=10 ./tests/test_r47 --jobs 1 \
	    --filter 'r47/eight_processes_sharing_fifty_permits_a_second_get_fifty_a_second' --verbose

soak-sentinel: build
	$(BUILD)/tests/soak_sentinel $(SOAK_SECONDS) both

# The partition suite (issue 26 part 3) as a soak: tests/test_partition.c's scenarios
# (a holder cut off past its lease, a client cut off from one sentinel or one cluster
# node, a Sentinel and a Cluster split brain with replica sync on and off) repeated for SOAK_MINUTES
# in all, shared among its PARTITION_TESTS tests, then its figures summed per
# replica-sync mode. An overlap with sync on fails the run (the suite asserts it); with
# sync off the overlaps are counted. The whole output is in $(BUILD)/soak-partition.log.
SOAK_MINUTES ?= 5
PARTITION_TESTS = 7
soak-partition: build
	@secs=$$(( $(SOAK_MINUTES) * 60 / $(PARTITION_TESTS) )); log=$(BUILD)/soak-partition.log; \
	echo "soak-partition: $(SOAK_MINUTES) min, $$secs s per test (log in $$log)"; \
	CRDT_PARTITION_SOAK_SECONDS=$$secs $(BUILD)/tests/test_partition --jobs 1 >$$log 2>&1; rc=$$?; \
	grep -E '^\[partition\] scenario=|Synthesis|FAIL|Assertion' $$log; \
	awk '/^\[partition\] scenario=/ { \
	        for (i = 2; i <= NF; i++) { split($$i, kv, "="); v[kv[1]] = kv[2] } \
	        s = v["sync"]; p[s] += v["partitions"]; h[s] += v["holds"]; l[s] += v["losses"]; \
	        n[s] += v["not_synced"]; o[s] += v["overlaps"] } \
	    END { for (s in p) printf "soak-partition: replica sync %-3s: partitions %d, holds %d, " \
	        "losses reported %d, acquires refused not synced %d, overlaps %d\n", \
	        s, p[s], h[s], l[s], n[s], o[s] }' $$log; \
	exit $$rc

# Another revision's library against the working tree's, every bench scenario (or
# SCENARIOS="procs-4 handoff"), alternating in one sitting, ROUNDS rounds (default 3):
# each metric's median and range per side, the ratio and a Mann-Whitney p-value
# (bench/compare). BASE defaults to the previous release (bench/baseline). A report: a
# difference never fails it (a failed exclusion check inside the bench does).
# BENCH_COMPARE_FLAGS="--quick" for short runs (CI uses it).
BASE ?= $(shell sed -n 's/^\([0-9a-f][0-9a-f]*\) .*/\1/p' bench/baseline | head -1)
ROUNDS ?= 3
SCENARIOS ?=
BENCH_COMPARE_FLAGS ?=
bench-compare: build
	@BUILD=$(BUILD) bench/compare --rounds $(ROUNDS) $(BENCH_COMPARE_FLAGS) \
	    $(foreach s,$(SCENARIOS),--scenario $(s)) $(BASE)

demo: build
	@scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)
