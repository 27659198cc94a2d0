# rmsg: the README's two commands, plus the pieces they are made of.
#   make demo   install what is missing, build, run rmsg-perf's default
#   make test   install what is missing, build, run every test tier (Soft-RoCE included)
BUILD   ?= build
JOBS    ?= $(shell nproc)
CTEST   := ctest --output-on-failure --no-tests=error
GEN     := -G Ninja

.PHONY: all deps deps-test configure build demo test test-host test-asan test-tsan \
        test-rdma test-rdma-asan install lint format clean

all: build

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) $(GEN) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/rmsg-info
	$(BUILD)/bin/rmsg-perf

# Host tiers (unit, tcp), then the sanitizer trees, then the Soft-RoCE guest tier.
test: deps-test build
	$(MAKE) --no-print-directory test-host test-asan test-tsan test-rdma test-rdma-asan

test-host:
	$(CTEST) --test-dir $(BUILD) -j $(JOBS) -L 'unit|tcp'

# ASan+UBSan: the test binaries (no tools) in their own tree; the RDMA ones run in the guest.
build-asan/build.ninja: Makefile
	cmake -S . -B build-asan $(GEN) -DCMAKE_BUILD_TYPE=Debug -DRMSG_SANITIZE=address,undefined \
	  -DRMSG_BUILD_TOOLS=OFF -DRMSG_TEST_DIRS='base;loop;cm;tcp;rdma'
test-asan: build-asan/build.ninja
	cmake --build build-asan -j $(JOBS)
	$(CTEST) --test-dir build-asan -j $(JOBS) -L 'unit|tcp'

# TSan: the loop's threaded tests.
build-tsan/build.ninja:
	cmake -S . -B build-tsan $(GEN) -DCMAKE_BUILD_TYPE=Debug -DRMSG_SANITIZE=thread \
	  -DRMSG_BUILD_TOOLS=OFF -DRMSG_WITH_RDMA=OFF -DRMSG_TEST_DIRS='loop'
test-tsan: build-tsan/build.ninja
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir build-tsan -j $(JOBS) -L unit

# Soft-RoCE: every rdma-labelled test inside one qemu guest boot (tests/softroce/).
test-rdma:
	$(CTEST) --test-dir $(BUILD) -L rdma

# The RDMA tests built with ASan+UBSan, in a second guest boot.
test-rdma-asan: build-asan/build.ninja
	cmake --build build-asan -j $(JOBS)
	$(CTEST) --test-dir build-asan -L rdma

install: build
	cmake --install $(BUILD)

lint:
	clang-format --dry-run --Werror $$(git ls-files '*.h' '*.cc')
	clang-tidy -p $(BUILD) --quiet $$(git ls-files 'src/*.cc')

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build build-asan build-tsan
