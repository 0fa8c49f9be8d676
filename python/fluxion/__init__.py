"""Fluxion: lazy arrays and composable transformations with MLX's API.

``import fluxion.core as mx`` gives the array type and the ops.
"""

__version__ = "0.1.0"


def _note_pip_cudnn():
    # cuDNN's wheel (nvidia-cudnn-cu13) puts libcudnn.so.9 outside the
    # loader's path; the CUDA backend dlopens it from the folders named
    # here when the loader's search fails (attention's fused kernels).
    import os
    import sys

    if "FLUXION_CUDNN_PIP_DIRS" in os.environ:
        return
    found = []
    for p in sys.path:
        d = os.path.join(p, "nvidia", "cudnn", "lib") if p else ""
        if d and os.path.isfile(os.path.join(d, "libcudnn.so.9")):
            found.append(d)
    if found:
        os.environ["FLUXION_CUDNN_PIP_DIRS"] = os.pathsep.join(found)


_note_pip_cudnn()
