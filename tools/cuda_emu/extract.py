"""Turns a kernel file of fluxion/backend/cuda into a header the host
emulation (shim.h) compiles: the file up to `stop` (its kernels and launch
helpers, before the code that needs the runtime), `K<<<cfg>>>(args);`
launches as emu_launch(cfg, [&] { K(args); }), dynamic shared memory as
emu_dyn_smem. Usage: extract.py SRC STOP OUT (STOP with \\n escapes)."""
import re
import sys

src, stop, out = sys.argv[1], sys.argv[2], sys.argv[3]
s = open(src).read()
s = s[:s.index(stop.encode().decode("unicode_escape"))]
s += "\n}  // namespace\n}  // namespace fluxion...\n"
s = s.replace("extern __shared__ __align__(16) unsigned char smem[];",
              "unsigned char* smem = emu_dyn_smem;")
s = s.replace('#include "fluxion/backend/cuda/kernels.cuh"',
              '#include "fluxion/backend/cuda/kernels.cuh"\n#include "emu_post.h"')
launch = re.compile(r"([A-Za-z_][\w:]*(?:<[^<>;]*>)?)\s*<<<(.*?)>>>\s*\((.*?)\);", re.S)
s = launch.sub(lambda m: "emu_launch(%s, [&] { %s(%s); });"
               % (m.group(2), m.group(1), m.group(3)), s)
open(out, "w").write('#include "shim.h"\n' + s)
