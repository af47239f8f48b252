# Two commands for a fresh Debian 12 machine:
#   make test   installs what is missing, builds, runs the whole test suite
#   make run    installs what is missing, builds, starts sandglassd on 127.0.0.1:8080 with
#               its default config (daemon/config/sandglassd.toml)
# Both are idempotent. The build lives in $(BUILD) (CMake + Ninja), with warnings as errors
# (SANDGLASS_WERROR, off in a plain CMake build) and ccache as the compiler launcher.
#   make package  builds $(BUILD)/sandglassd_<version>_amd64.deb (cmake/package.cmake)

BUILD ?= build
BUILD_TYPE ?= RelWithDebInfo
# Line tables only (-g1): enough for backtraces and sanitizer reports, and a Boost.Beast file
# compiles in about 70 % of the time full -g takes. `make DEBUG_INFO=-g` for a debugger session.
DEBUG_INFO ?= -g1
PACKAGES := g++ cmake ninja-build libboost1.81-dev libboost-json1.81-dev doctest-dev \
            libbenchmark-dev libfmt-dev libspdlog-dev prometheus-cpp-dev \
            libtomlplusplus-dev libcli11-dev prometheus libtbb-dev gnuplot-nox \
            libpq-dev postgresql ccache dpkg-dev lintian curl chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps configure build test run package bench clean

deps:
	@missing=""; \
	for p in $(PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed$$' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  $(SUDO) apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends $$missing; \
	fi

# ccache keys on paths relative to this folder, so clones elsewhere share the cache; with -g it
# would also hash the build folder's absolute path (hash_dir), which a fresh clone never hits.
export CCACHE_BASEDIR ?= $(CURDIR)
export CCACHE_NOHASHDIR ?= 1

# Every time (a few seconds): the flags here win over what an earlier configure cached.
configure: deps
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DSANDGLASS_WERROR=ON \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 $(DEBUG_INFO) -DNDEBUG" \
	  $$(command -v ccache >/dev/null && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

build: configure
	cmake --build $(BUILD)

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j2

run: build
	./$(BUILD)/daemon/sandglassd --config daemon/config/sandglassd.toml

# The Debian package needs only the daemon and the client built; install it with
# apt install ./$(BUILD)/sandglassd_*.deb
package: configure
	cmake --build $(BUILD) --target sandglassd sandglass_cli
	cd $(BUILD) && cpack -G DEB

# make bench: every benchmark whose result bench/results/ keeps (about 50 minutes; run it on a
# quiet machine): the hand-off micro benchmarks, the overload bench with its spike, the soak of
# one sandglassd, the cluster's steps and a chaos run of the cluster (both start their own
# PostgreSQL). Tables, JSON and plots go to bench/results/. Needs oneTBB and gnuplot besides
# the packages above.
BENCH_FLAGS ?= --duration 5s --spike
bench:
	@$(MAKE) --no-print-directory configure
	cmake --build $(BUILD) --target sandglass-handoff-bench sandglass-overload sandglassd
	mkdir -p bench/results
	bash -o pipefail -c './$(BUILD)/bench/sandglass-handoff-bench --benchmark_repetitions=3 \
	  --benchmark_report_aggregates_only=true | tee bench/results/handoff.txt'
	bash -o pipefail -c './$(BUILD)/bench/sandglass-overload $(BENCH_FLAGS) \
	  --json bench/results/overload.json --plot bench/results/overload.svg | tee bench/results/overload.txt'
	bench/admission_table.sh $(BUILD) bench/results/admission-table.txt
	bash -o pipefail -c './$(BUILD)/bench/sandglass-overload --soak 60s --sandglassd ./$(BUILD)/daemon/sandglassd \
	  --json bench/results/soak.json | tee bench/results/soak.txt'
	bash -o pipefail -c './$(BUILD)/bench/sandglass-overload --cluster 3 --workers 8 \
	  --sandglassd ./$(BUILD)/daemon/sandglassd | tee bench/results/cluster.txt'
	bash -o pipefail -c './$(BUILD)/bench/sandglass-overload --cluster 3 --cluster-chaos 30m \
	  --sandglassd ./$(BUILD)/daemon/sandglassd --json bench/results/cluster-chaos.json \
	  | tee bench/results/cluster-chaos.txt'

clean:
	rm -rf $(BUILD)
