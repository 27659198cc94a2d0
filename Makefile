# rmsg: the README's two commands, plus the pieces they are made of.
#   make demo   install what is missing, build, run rmsg-perf's default
#   make test   install what is missing, build, run every test tier (Soft-RoCE included)
BUILD   ?= build
JOBS    ?= $(shell nproc)
CTEST   := ctest --output-on-failure --no-tests=error
GEN     := -G Ninja
# Every tree configured here treats warnings as errors (CMake's default is off, for users).
CONFIG  := $(GEN) -DRMSG_WERROR=ON
# ccache when installed (scripts/deps.sh test installs it): a second clone on this machine,
# CI's included, rebuilds its four trees from the cache. Paths under the clone are hashed
# relative to it, so clones at different places share entries (an object from the cache
# keeps the first clone's absolute path in __FILE__ and its debug info).
ifneq ($(shell command -v ccache 2>/dev/null),)
CONFIG  += -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
endif
# `make test`'s steps in order; scripts/tiers.sh prints each one's wall time at the end.
TIERS   := build host asan tsan clang rdma rdma-asan

.PHONY: all deps deps-test configure build demo test test-host test-asan test-tsan \
        test-clang test-rdma test-rdma-asan soak fuzz install deb deb-check lint format clean

all: build

deps:
	@scripts/deps.sh build

deps-test:
	@scripts/deps.sh test

# Release (-O3), as a user builds: GCC's optimizer-driven warnings (-Wrestrict, bounds,
# maybe-uninitialized) differ by level, and this tree is the one GCC builds whole.
$(BUILD)/build.ninja: Makefile
	cmake -S . -B $(BUILD) $(CONFIG) -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/bin/rmsg-info
	$(BUILD)/bin/rmsg-perf

# The main tree's build and host tiers (unit, tcp, shim), the sanitizer trees, the clang tree,
# then the Soft-RoCE guest tiers; stops at the first failure, then prints each step's time.
test: deps-test
	@MAKE='$(MAKE)' scripts/tiers.sh $(TIERS)

test-host: build
	$(CTEST) --test-dir $(BUILD) -j $(JOBS) -L 'unit|tcp|shim'

# ASan+UBSan: the test binaries (no tools) in their own tree; the RDMA ones run in the guest.
build-asan/build.ninja: Makefile
	cmake -S . -B build-asan $(CONFIG) -DCMAKE_BUILD_TYPE=Debug -DRMSG_SANITIZE=address,undefined \
	  -DRMSG_BUILD_TOOLS=OFF -DRMSG_TEST_DIRS='base;loop;stream;cm;tcp;wire;auth;session;msg;rpc;posix;rdma'
test-asan: build-asan/build.ninja
	cmake --build build-asan -j $(JOBS)
	$(CTEST) --test-dir build-asan -j $(JOBS) -L 'unit|tcp'

# TSan: the loop's unit tests and the messenger's and RPC's threaded ones (tests/msg and
# tests/rpc build only msg_threads_tests and msg_rpc_threads_tests in this tree, labelled
# threads: many loops over TCP and loopback), and,
# as this tree is built without RDMA, the install test: a TCP-only install is consistent;
# and the key-value example (examples/kv: a handler on two loop threads) as a user runs it.
build-tsan/build.ninja: Makefile
	cmake -S . -B build-tsan $(CONFIG) -DCMAKE_BUILD_TYPE=Debug -DRMSG_SANITIZE=thread \
	  -DRMSG_BUILD_TOOLS=OFF -DRMSG_WITH_RDMA=OFF -DRMSG_TEST_DIRS='loop;msg;rpc;install;examples'
test-tsan: build-tsan/build.ninja
	cmake --build build-tsan -j $(JOBS)
	TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir build-tsan -j $(JOBS) -L 'unit|threads'

# clang-14 with its warnings as errors: everything but the tools, host tiers run (the RDMA
# tests are built, not run). The one clang tree: the messenger's libFuzzer fuzzers will
# build here too, adding -fsanitize=fuzzer(-no-link) themselves, so it stays unsanitized.
build-clang/build.ninja: Makefile
	cmake -S . -B build-clang $(CONFIG) -DCMAKE_C_COMPILER=clang-14 \
	  -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRMSG_BUILD_TOOLS=OFF
test-clang: build-clang/build.ninja
	cmake --build build-clang -j $(JOBS)
	$(CTEST) --test-dir build-clang -j $(JOBS) -L 'unit|tcp'

# The messenger's libFuzzer targets (tests/fuzz/msg_fuzzers.cmake), built in the clang tree
# and run a minute each: scratch corpus, then the committed one; fixed seed; artifacts in
# build-clang/fuzz/NAME/. Not a `make test` step (the clang step runs them briefly).
FUZZ_SECONDS ?= 60
fuzz: build-clang/build.ninja
	cmake --build build-clang -j $(JOBS) --target msg_fuzzers
	tests/fuzz/fuzz_all.sh build-clang $(FUZZ_SECONDS)

# Soft-RoCE: every rdma-labelled test inside one qemu guest boot (tests/softroce/).
test-rdma: build
	$(CTEST) --test-dir $(BUILD) -L rdma

# Long and load-sensitive runs, not `make test` steps: real programs across two guests
# (iperf3, a Python asyncio pair under rmsg-run), each its own pair of boots.
soak: build
	$(CTEST) --test-dir $(BUILD) -L soak

# The RDMA tests built with ASan+UBSan, in a second guest boot.
test-rdma-asan: build-asan/build.ninja
	cmake --build build-asan -j $(JOBS)
	$(CTEST) --test-dir build-asan -L rdma

install: build
	cmake --install $(BUILD)

# Debian packages (debian/), never part of `make test`: a copy of the tracked and new files
# is built in $(DEB_DIR)/src with dpkg-buildpackage (shared libraries, no tests), niced, so
# the .debs land in $(DEB_DIR); then tests/install/deb_test.sh unpacks them (dpkg -x) and
# builds C and C++ consumers against them with pkg-config, and runs each tool's --help.
# deb-check installs them with apt into a throwaway overlay of / (tests/install/deb_check.sh).
DEB_DIR ?= build/deb
deb:
	@scripts/deps.sh deb
	rm -rf $(DEB_DIR) && mkdir -p $(DEB_DIR)/src
	git ls-files -z --cached --others --exclude-standard | \
	  tar --null -T - -c | tar -x -C $(DEB_DIR)/src
	cd $(DEB_DIR)/src && RMSG_DEB_CMAKE_FLAGS='$(filter -DCMAKE_%_LAUNCHER=ccache,$(CONFIG))' \
	  nice -n 10 dpkg-buildpackage -us -uc -b -j$(JOBS)
	lintian --fail-on error,warning $(DEB_DIR)/*.changes
	tests/install/deb_test.sh $(DEB_DIR) .

deb-check:
	tests/install/deb_check.sh $(DEB_DIR) .

lint:
	clang-format --dry-run --Werror $$(git ls-files '*.h' '*.cc')
	clang-tidy -p $(BUILD) --quiet $$(git ls-files 'src/*.cc')

format:
	clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build build-asan build-tsan build-clang
