#!/bin/sh
# make test-mpi: the MPI tests on loopback. tests/mpi/test_collectives.py on
# every rank of `mpirun -np 2` and `-np 3`, then test_failures.py (which
# starts its own mpirun jobs). Usage: tests/mpi/run.sh PYTHON.
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
# A desynchronised test raises after 30 s instead of hanging.
export FLUXION_DIST_TIMEOUT=${FLUXION_DIST_TIMEOUT:-30}
here=$(dirname "$0")
for n in 2 3; do
  echo "test-mpi: mpirun -np $n test_collectives.py"
  timeout 300 mpirun -np $n "$PY" -m pytest -q --color=no -p no:cacheprovider \
    "$here/test_collectives.py"
done
echo "test-mpi: test_failures.py"
"$PY" -m pytest -q --color=no -p no:cacheprovider "$here/test_failures.py"
