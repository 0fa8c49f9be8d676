# Set-up, build and test entry points (see README.md).
BUILD ?= build
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ ccache pkg-config libopenblas-dev \
	liblapacke-dev libsleef-dev libgtest-dev googletest \
	pybind11-dev python3-dev python3-numpy python3-pytest python3-sklearn \
	python3-pip python3-setuptools python3-wheel python3-venv \
	zlib1g-dev nlohmann-json3-dev \
	python3-matplotlib python3-tqdm python3-torch dataset-fashion-mnist fortunes \
	libopenmpi-dev openmpi-bin python3-mpi4py \
	python3-sphinx python3-myst-parser time
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# The interpreter CMake chose for the extension (cmake/FluxionPython.cmake:
# -DPython_EXECUTABLE, else the first python3 with NumPy); read when a
# recipe runs, after configuring.
PY = $$(cat $(BUILD)/python-executable)
CMAKE_ARGS ?=
# An OpenBLAS older than the CPU falls back to kernels that misbehave there
# (tools/openblas_core.sh says why); unless the caller chose a core, the
# tests and demos use the Haswell kernels then.
ifeq ($(origin OPENBLAS_CORETYPE),undefined)
  ifeq ($(shell sh tools/openblas_core.sh),fallback)
    export OPENBLAS_CORETYPE := Haswell
  endif
endif

.PHONY: deps build test test-mpi test-install install test-gpu test-gpu-sanitize test-asan test-tsan \
	fuzz soak demo fashion-mnist char-lm bench docs clean format

# Install only the Debian packages that are missing. Where they cannot be
# installed (no apt, no network: a machine set up another way, like the GPU
# machine with its own CMake and Python), say so and go on: the configure
# step then reports anything that is really missing.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  ( timeout 120 $(SUDO) apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing ) \
	  || echo "warning: could not install:$$missing (continuing)"; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_ARGS)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The suite runs as on CI, with no GPU visible (CUDA_VISIBLE_DEVICES
# empty), also on a machine with one, so that its results are the CPU's
# whatever machine runs it (docs/architecture.md, "The CUDA backend"). The
# GPU's tests are `make test-gpu`. Last come the installed packages, from the same build
# folder (tools/test_install.sh: the C++ example against the installed
# library, a smoke subset of tests/python against the installed package).
TEST_ENV = CUDA_VISIBLE_DEVICES= FLUXION_DEFAULT_DEVICE=cpu
test: build
	cd $(BUILD) && $(TEST_ENV) ctest --output-on-failure -j $(JOBS)
	$(TEST_ENV) PYTHONPATH=$(BUILD)/python $(PY) -m pytest -q tests/python
	$(TEST_ENV) sh tools/test_install.sh $(BUILD)
	$(MAKE) --no-print-directory test-mpi
	$(DOCS)

# mx.distributed over MPI: tests/mpi under `mpirun -np 2` and `-np 3` on
# loopback (tests/mpi/run.sh; skipped with a message where mpirun is
# absent).
test-mpi: build
	$(TEST_ENV) PYTHONPATH=$(BUILD)/python sh tests/mpi/run.sh $(PY)

test-install: build
	$(TEST_ENV) sh tools/test_install.sh $(BUILD)

# The C++ package into $(PREFIX) and the Python package into the
# interpreter the build is for (README.md, "Install"); DESTDIR stages both.
# PIP_BREAK_SYSTEM_PACKAGES: Debian's pip refuses to install into the
# system Python otherwise (PEP 668); it installs under /usr/local, beside
# apt's files, not over them. ldconfig: the loader finds a library in
# /usr/local/lib through its cache only.
PREFIX ?= /usr/local
install: build
	DESTDIR=$(DESTDIR) cmake --install $(BUILD) --prefix $(PREFIX)
	@[ -n "$(DESTDIR)" ] || ldconfig 2>/dev/null || true
	FLUXION_BUILD_DIR=$(BUILD) PIP_BREAK_SYSTEM_PACKAGES=1 $(PY) -m pip install \
	  --no-build-isolation --disable-pip-version-check $(if $(DESTDIR),--root $(DESTDIR)) .

# On a machine with an NVIDIA GPU: build with CUDA (build-gpu, all cores)
# and run the GPU tests, one summary at the end (tools/test_gpu.sh; FULL=1
# adds the whole suite with the CPU as default device).
# The C++ GPU tests: the op table's gpu cases and the GPU-only suites.
GPU_TESTS = *_gpu:*Gpu*:*Cuda*:Registry*:RulesCoverage.KernelsPerBackend:Allocator*
test-gpu:
	BUILD=build-gpu JOBS=$(JOBS) FILTER='$(GPU_TESTS)' sh tools/test_gpu.sh

# After test-gpu: the same C++ GPU tests under compute-sanitizer memcheck
# and racecheck (tools/test_gpu_sanitize.sh; TOOLS= picks one).
test-gpu-sanitize:
	BUILD=build-gpu JOBS=$(JOBS) FILTER='$(GPU_TESTS)' sh tools/test_gpu_sanitize.sh

# --- Sanitizers (docs/architecture.md, "Reliability") ---
# Each variant has its own build folder and builds only what it runs: no
# benchmarks or examples, -O1 -g1 (CMakeLists.txt, FLUXION_SANITIZE).
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
SAN_CMAKE = -DCMAKE_BUILD_TYPE=Release -DFLUXION_BUILD_BENCHMARKS=OFF -DFLUXION_CUDA=OFF \
	-DFLUXION_BUILD_EXAMPLES=OFF $(CMAKE_ARGS)
# The suites ThreadSanitizer runs: threads, streams, eval, compile.
TSAN_SUITES = test_threads;test_eval;test_robustness;test_compile;test_eager
# The Python subset run under AddressSanitizer (the bindings: conversions,
# indexing, errors, files, transformations, and a tenth of the fuzz budget).
ASAN_PYTESTS = tests/python/test_fuzz_regressions.py \
	tests/python/test_array.py tests/python/test_array_semantics.py \
	tests/python/test_indexing.py tests/python/test_errors.py \
	tests/python/test_io.py tests/python/test_transforms.py \
	tests/python/test_tx_robustness.py tests/python/test_exception_boundary.py \
	tests/python/test_fuzz_api.py tests/python/test_fuzz_loaders.py \
	tests/python/test_fuzz_transforms.py tests/python/test_threads.py
# The ASan runtime must come first in the process; libstdc++ is preloaded
# with it because Python does not link it, and ASan's __cxa_throw
# interceptor looks the real one up when it starts (without it the first
# C++ exception aborts with "CHECK failed: real___cxa_throw").
ASAN_PRELOAD = $$(g++ -print-file-name=libasan.so) $$(g++ -print-file-name=libstdc++.so.6)
# halt_on_error: the first report fails the run. Python itself leaks at
# exit (interned objects, its allocator's arenas), so LeakSanitizer runs
# for the C++ suite only; PYTHONMALLOC=malloc lets ASan see Python's
# objects too (a use after free of one by the bindings is reported).
# The fuzz children bound their allocations with RLIMIT_AS, which leaves
# ASan no room for its shadow memory: under ASan they rely on
# max_allocation_size_mb instead (a larger request returns null, which
# Fluxion raises as MemoryError, as with the limit).
ASAN_ENV = ASAN_OPTIONS=halt_on_error=1:detect_stack_use_after_return=0:$(ASAN_OPTIONS) \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:$(UBSAN_OPTIONS)
# OPENBLAS_NUM_THREADS=1: OpenBLAS's own thread server hands work to its
# threads through spin loops on plain memory, which ThreadSanitizer cannot
# see as synchronisation (every gemm would be reported as a race inside
# OpenBLAS); Fluxion's own pool and streams still run threaded.
TSAN_ENV = TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tools/tsan.supp:$(TSAN_OPTIONS) \
	OPENBLAS_NUM_THREADS=1

$(ASAN_BUILD)/build.ninja:
	cmake -S . -B $(ASAN_BUILD) -G Ninja $(SAN_CMAKE) -DFLUXION_SANITIZE=address

$(TSAN_BUILD)/build.ninja:
	cmake -S . -B $(TSAN_BUILD) -G Ninja $(SAN_CMAKE) -DFLUXION_SANITIZE=thread \
	  -DFLUXION_BUILD_PYTHON=OFF "-DFLUXION_TEST_SUITES=$(TSAN_SUITES)"

# AddressSanitizer + UndefinedBehaviorSanitizer: the whole C++ suite (one
# process), then the Python subset with the runtime preloaded.
test-asan: deps $(ASAN_BUILD)/build.ninja
	@start=$$(date +%s); cmake --build $(ASAN_BUILD) -j $(JOBS) && \
	echo "asan: build $$(( $$(date +%s) - start )) s"
	@start=$$(date +%s); $(ASAN_ENV) $(ASAN_BUILD)/fluxion_tests --gtest_brief=1 && \
	echo "asan: C++ suite passed in $$(( $$(date +%s) - start )) s"
	@start=$$(date +%s); $(ASAN_ENV) \
	  ASAN_OPTIONS=detect_leaks=0:halt_on_error=1:detect_stack_use_after_return=0:allocator_may_return_null=1:max_allocation_size_mb=8192 \
	  LD_PRELOAD="$(ASAN_PRELOAD)" PYTHONMALLOC=malloc FLUXION_FUZZ_SCALE=0.1 \
	  PYTHONPATH=$(ASAN_BUILD)/python $$(cat $(ASAN_BUILD)/python-executable) \
	  -m pytest -q -p no:cacheprovider $(ASAN_PYTESTS) && \
	echo "asan: Python subset passed in $$(( $$(date +%s) - start )) s"

# ThreadSanitizer: the library and the threading suites only.
test-tsan: deps $(TSAN_BUILD)/build.ninja
	@start=$$(date +%s); cmake --build $(TSAN_BUILD) -j $(JOBS) && \
	echo "tsan: build $$(( $$(date +%s) - start )) s"
	@start=$$(date +%s); $(TSAN_ENV) $(TSAN_BUILD)/fluxion_tests --gtest_brief=1 && \
	echo "tsan: $(TSAN_SUITES) passed in $$(( $$(date +%s) - start )) s"

# Longer runs for local use: 20x the fuzz budget from a random seed, and
# 5x the soak counts (docs/architecture.md, "Reliability").
fuzz: build
	FLUXION_FUZZ=long PYTHONPATH=$(BUILD)/python $(PY) -m pytest -q \
	  tests/python/test_fuzz_ops.py tests/python/test_fuzz_api.py \
	  tests/python/test_fuzz_loaders.py tests/python/test_fuzz_transforms.py

soak: build
	FLUXION_SOAK_SCALE=5 PYTHONPATH=$(BUILD)/python $(PY) -m pytest -q -s \
	  tests/python/test_soak.py tests/python/test_stress_threads.py

demo: build
	PYTHONPATH=$(BUILD)/python $(PY) examples/digits_mlp.py

# The fluxion.nn examples (README.md, "Neural networks").
fashion-mnist: build
	PYTHONPATH=$(BUILD)/python $(PY) examples/fashion_mnist_cnn.py

char-lm: build
	PYTHONPATH=$(BUILD)/python $(PY) examples/char_lm_transformer.py

bench: build
	$(BUILD)/fluxion_bench
	PYTHONPATH=$(BUILD)/python $(PY) benchmarks/python/bench.py
	PYTHONPATH=$(BUILD)/python $(PY) benchmarks/python/bench_compile.py
	PYTHONPATH=$(BUILD)/python $(PY) benchmarks/python/bench_vmath.py
	PYTHONPATH=$(BUILD)/python $(PY) benchmarks/python/bench_nn.py

# The API reference (docs/api, README.md "Documentation"): HTML into
# $(BUILD)/docs from the docstrings of the extension just built, about 20 s
# on 2 cores, so `make test` builds it too. -W: a warning (a broken
# reference, a malformed docstring) fails the build;
# tests/python/test_docstrings.py checks that every public name has a
# docstring and a place on a page. Where Sphinx could not be installed (no
# apt), it says so and skips.
DOCS = @if ! $(PY) -c "import sphinx" 2>/dev/null; then \
	  echo "docs: skipped (python3-sphinx is not installed)"; \
	else start=$$(date +%s); \
	  FLUXION_PYTHONPATH=$(abspath $(BUILD))/python $(PY) -m sphinx -q -W --keep-going \
	    -j $(JOBS) -b html -d $(BUILD)/docs/.doctrees docs/api $(BUILD)/docs && \
	  echo "docs: $(BUILD)/docs/index.html ($$(( $$(date +%s) - start )) s)"; fi

docs: build
	$(DOCS)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
