# Set-up, build and test entry points (see README.md).
BUILD ?= build
JOBS ?= $(shell nproc)
DEB_PACKAGES := cmake ninja-build g++ ccache pkg-config libopenblas-dev \
	liblapacke-dev libsleef-dev libgtest-dev googletest \
	pybind11-dev python3-dev python3-numpy python3-pytest python3-sklearn \
	zlib1g-dev nlohmann-json3-dev \
	python3-matplotlib python3-tqdm python3-torch dataset-fashion-mnist fortunes
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: deps build test demo bench clean format

# Install only the Debian packages that are missing.
deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "Installing:$$missing"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 -m pytest -q tests/python

demo: build
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 examples/digits_mlp.py

bench: build
	$(BUILD)/fluxion_bench
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 benchmarks/python/bench.py
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 benchmarks/python/bench_compile.py
	PYTHONPATH=$(BUILD)/python /usr/bin/python3 benchmarks/python/bench_nn.py

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
