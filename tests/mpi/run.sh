#!/bin/sh
# make test-mpi: the MPI tests on loopback. tests/mpi/test_collectives.py and
# test_fsdp.py on every rank of `mpirun -np 2` and `-np 3`, then
# test_failures.py and test_data_parallel_example.py (which start their own
# mpirun jobs).
# Usage: tests/mpi/run.sh PYTHON.
set -e
PY=${1:-python3}
if ! command -v mpirun >/dev/null 2>&1; then
  echo "test-mpi: skipped: mpirun not found (Open MPI: apt-get install openmpi-bin libopenmpi-dev)"
  exit 0
fi
# As root in a container: allowed explicitly; ranks may outnumber the
# cores; messages over shared memory (vader, without the single-copy
# mechanism that containers forbid: ptrace) and TCP on loopback only; the
# ob1 transfer layer (no UCX / InfiniBand probing).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_pml=ob1 OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
# Both paths of each transfer: the blocking MPI calls with 2 processes (no
# FLUXION_DIST_TIMEOUT; the shell's timeout bounds a desynchronised run),
# the nonblocking ones polled against a deadline with 3 (a desynchronised
# test raises after 30 s).
here=$(dirname "$0")
echo "test-mpi: mpirun -np 2 test_collectives.py test_fsdp.py (blocking MPI calls)"
env -u FLUXION_DIST_TIMEOUT timeout 300 mpirun -np 2 "$PY" -m pytest -q \
  --color=no -p no:cacheprovider "$here/test_collectives.py" "$here/test_fsdp.py"
echo "test-mpi: mpirun -np 3 test_collectives.py test_fsdp.py (FLUXION_DIST_TIMEOUT=30)"
FLUXION_DIST_TIMEOUT=30 timeout 300 mpirun -np 3 "$PY" -m pytest -q \
  --color=no -p no:cacheprovider "$here/test_collectives.py" "$here/test_fsdp.py"
echo "test-mpi: test_failures.py, test_data_parallel_example.py"
"$PY" -m pytest -q --color=no -p no:cacheprovider "$here/test_failures.py" \
  "$here/test_data_parallel_example.py"
