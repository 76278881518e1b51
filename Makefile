# Quick start: `make demo` and `make test`. Both install missing Debian packages first
# (as root; otherwise they print the apt-get line), build into build/ and run.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
ifeq ($(CI),true)
CMAKE_FLAGS += -DCREDISSON_WERROR=ON
endif

.PHONY: all deps build test demo clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 600

demo: build
	@scripts/demo.sh $(BUILD)

clean:
	rm -rf $(BUILD)
