"""A rank that fails, for test_failures.py (started by mpirun there).

  timeout: rank 0's all_sum waits for peers that come 3 s late; with
           FLUXION_DIST_TIMEOUT=1 it raises, then the late peers complete
           it and the group works on (another all_sum, everyone waiting up
           to 30 s now).
  raises:  rank 1 raises before the all_sum that the others wait in.
"""

import os
import sys
import time

import fluxion.core as mx

mode = sys.argv[1]
g = mx.distributed.init(strict=True)
x = mx.ones(4) * (g.rank() + 1)

if mode == "timeout":
    if g.rank() == 0:
        try:
            mx.eval(mx.distributed.all_sum(x))
            print("rank 0: no timeout", flush=True)
        except RuntimeError as e:
            print(f"rank 0 raised: {e}", flush=True)
        # Waits longer from now on (read at each collective).
        os.environ["FLUXION_DIST_TIMEOUT"] = "30"
    else:
        os.environ["FLUXION_DIST_TIMEOUT"] = "30"
        time.sleep(3)
        mx.eval(mx.distributed.all_sum(x))
    y = mx.distributed.all_sum(x)
    mx.eval(y)
    print(f"rank {g.rank()}: after {y.tolist()}", flush=True)
elif mode == "raises":
    if g.rank() == 1:
        raise ValueError("rank 1 fails before the collective")
    mx.eval(mx.distributed.all_sum(x))
    print(f"rank {g.rank()}: all_sum returned", flush=True)
