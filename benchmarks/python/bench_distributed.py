"""all_sum bandwidth over MPI on loopback: Fluxion's mx.distributed.all_sum
against mpi4py's Allreduce on NumPy buffers, in the same run and the same
MPI job, float32 from 1 KiB to 256 MiB. Prints on rank 0 the median time of
each, the bandwidth (bytes of the array / time) and Fluxion / mpi4py.

Run (2 ranks; tests/mpi/run.sh has the loopback settings):
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \\
  OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp \\
  OMPI_MCA_btl_vader_single_copy_mechanism=none \\
  PYTHONPATH=build/python mpirun -np 2 /usr/bin/python3 \\
    benchmarks/python/bench_distributed.py [MAX_MIB]
"""

import statistics
import sys
import time

import numpy as np

import fluxion.core as mx

try:
    from mpi4py import MPI
except ImportError:  # Debian: python3-mpi4py
    MPI = None

world = mx.distributed.init(strict=True, backend="mpi")
rank = world.rank()
max_mib = float(sys.argv[1]) if len(sys.argv) > 1 else 256


def median_time(fn, total_bytes):
    # Enough repeats for ~0.3 s per size, at least 3, after one warm-up.
    fn()
    reps = max(3, min(200, int(3e8 / max(total_bytes, 1))))
    times = []
    for _ in range(reps):
        if MPI is not None:
            MPI.COMM_WORLD.Barrier()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


if rank == 0:
    print(f"all_sum float32, {world.size()} ranks on loopback (MB/s: "
          "array bytes / median time)")
    print(f"{'size':>10} {'fluxion us':>11} {'mpi4py us':>10} "
          f"{'fluxion MB/s':>13} {'mpi4py MB/s':>12} {'ratio':>6}")
nbytes = 1024
while nbytes <= max_mib * 1024**2:
    n = nbytes // 4
    host = np.full(n, rank + 1, np.float32)
    x = mx.array(host)
    mx.eval(x)

    def fluxion_sum():
        mx.eval(mx.distributed.all_sum(x))

    tf = median_time(fluxion_sum, nbytes)
    tm = float("nan")
    if MPI is not None:
        out = np.empty_like(host)
        tm = median_time(lambda: MPI.COMM_WORLD.Allreduce(host, out), nbytes)
    if rank == 0:
        label = (f"{nbytes // 1024} KiB" if nbytes < 1024**2
                 else f"{nbytes // 1024**2} MiB")
        print(f"{label:>10} {tf * 1e6:11.1f} {tm * 1e6:10.1f} "
              f"{nbytes / tf / 1e6:13.1f} {nbytes / tm / 1e6:12.1f} "
              f"{tm / tf:6.2f}", flush=True)
    nbytes *= 4
