"""Which primitives lack a kernel on each backend (the primitive registry,
fluxion/primitive_list.h, as this build of fluxion.core sees it).

Run: PYTHONPATH=build/python /usr/bin/python3 tools/kernel_coverage.py [cpu|gpu]
Prints, per backend, how many primitives have a kernel and the names of
those that do not, grouped by family. Exits 0 whatever it finds.
"""

import sys
from collections import defaultdict

import fluxion.core as mx


def report(backend):
    registry = mx._primitive_registry()
    missing = set(mx._kernels_missing(getattr(mx, backend)))
    by_family = defaultdict(list)
    for p in registry:
        if p["name"] in missing:
            by_family[p["family"]].append(p["name"])
    have = len(registry) - len(missing)
    note = ""
    if backend == "gpu" and not mx.is_available(mx.gpu):
        note = " (built without a GPU backend)"
    print(f"{backend}: {have} of {len(registry)} primitives have a kernel"
          f"{note}")
    for family in sorted(by_family):
        print(f"  {family:<10} {' '.join(sorted(by_family[family]))}")


def main(argv):
    backends = argv[1:] or ["cpu", "gpu"]
    for b in backends:
        if b not in ("cpu", "gpu"):
            sys.exit(f"unknown backend {b!r}: expected cpu or gpu")
        report(b)


if __name__ == "__main__":
    main(sys.argv)
