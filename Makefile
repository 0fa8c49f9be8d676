# Set-up, build and test entry points (see README.md).
BUILD ?= build
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ ccache pkg-config libopenblas-dev \
	liblapacke-dev libsleef-dev libgtest-dev googletest \
	pybind11-dev python3-dev python3-numpy python3-pytest python3-sklearn \
	zlib1g-dev nlohmann-json3-dev \
	python3-matplotlib python3-tqdm python3-torch dataset-fashion-mnist fortunes
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

.PHONY: deps build test test-gpu demo fashion-mnist char-lm bench clean format

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

# The suite runs with the CPU as default device, also where a GPU is
# visible (the GPU is MLX's default there, but the CUDA backend does not
# cover every primitive yet); the GPU's own tests are `make test-gpu`, and
# the op table's gpu cases run here too.
test: build
	cd $(BUILD) && FLUXION_DEFAULT_DEVICE=cpu ctest --output-on-failure -j $(JOBS)
	FLUXION_DEFAULT_DEVICE=cpu PYTHONPATH=$(BUILD)/python $(PY) -m pytest -q tests/python

# On a machine with an NVIDIA GPU: build with CUDA (build-gpu, all cores)
# and run the GPU tests, one summary at the end (tools/test_gpu.sh; FULL=1
# adds the whole suite with the CPU as default device).
test-gpu:
	BUILD=build-gpu JOBS=$(JOBS) sh tools/test_gpu.sh

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

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
