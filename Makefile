# Quick start: `make demo` and `make test`. Both install missing Debian packages first
# (as root; otherwise they print the apt-get line), build into build/ and run.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DCREDISSON_WERROR=ON
endif

.PHONY: all deps build test test-sanitize demo clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

# The whole suite again under ASan+UBSan and under TSan (CI runs this too). The
# interop suite drives peers over the network and is left to the plain build.
test-sanitize: deps
	@for s in address thread; do \
	    cmake -S . -B $(BUILD)-$$s -DCMAKE_BUILD_TYPE=Debug -DCREDISSON_SANITIZE=$$s $(CMAKE_FLAGS) >/dev/null && \
	    cmake --build $(BUILD)-$$s -j$(JOBS) && \
	    (cd $(BUILD)-$$s && ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	        TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
	        ctest --output-on-failure --timeout 900 -E '^interop$$') || exit 1; \
	done

demo: build
	@scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)
