# Thin wrapper over CMake so the first two commands work: `make run`, `make test`.
BUILD   ?= build
MODEL   ?= ../shared/models/stories260K.gguf
PROMPT  ?= Once upon a time
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build run test asan asan-quick clean

all: build

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/bin/minfer run -m $(MODEL) -p "$(PROMPT)" -n 128

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# AddressSanitizer + UBSan build of everything, with the whole test suite.
asan:
	$(MAKE) test BUILD=build-asan CMAKE_FLAGS="-DMINFER_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug"

clean:
	rm -rf build build-asan

# The sanitizer build, running only the tests labelled `asan` (parsers and
# everything that takes untrusted input); CI runs this after `make test`.
asan-quick:
	cmake -S . -B build-asan -DMINFER_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ctest --output-on-failure -j $(JOBS) -L asan
