"""The CMake step of `pip install .`; pyproject.toml declares the rest.

The extension fluxion.core is built by CMake in a build folder:
$FLUXION_BUILD_DIR (relative to this file) when set, else build/, the
Makefile's, when it is configured, else build-pip/. A folder that `make`
already built is reused as it is, only its target `core` brought up to
date, so installing after `make` compiles nothing. A new folder is
configured for the interpreter running pip: Release, Ninja when there is
one, no tests, benchmarks or examples, and FLUXION_CUDA=OFF (which is why
it is not build/: `make test` would find no tests there).
$CMAKE_ARGS (for instance "-DFLUXION_CUDA=ON") is passed to the configure
step, of a new folder or an existing one. The compiler goes through ccache
when it is installed (CMakeLists.txt).
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
if "FLUXION_BUILD_DIR" in os.environ:
    BUILD = (ROOT / os.environ["FLUXION_BUILD_DIR"]).resolve()
elif (ROOT / "build" / "CMakeCache.txt").exists():
    BUILD = ROOT / "build"
else:
    BUILD = ROOT / "build-pip"
# setuptools' own staging (build/lib.*, bdist.*, the egg-info) lives in the
# CMake folder too, out of the source tree, and starts empty each time: a
# file left there from an earlier build would be packed into the wheel.
STAGING = BUILD / "setuptools"


def cached_python():
    """The interpreter an existing build folder was configured for."""
    cache = BUILD / "CMakeCache.txt"
    if not cache.exists():
        return None
    for line in cache.read_text().splitlines():
        if line.startswith("Python_EXECUTABLE:"):
            return line.split("=", 1)[1]
    return ""


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        env = dict(os.environ)
        # Relative paths in ccache's key: clones in other folders share hits.
        env.setdefault("CCACHE_BASEDIR", str(ROOT))
        user_args = shlex.split(os.environ.get("CMAKE_ARGS", ""))
        configured = cached_python()
        if configured is None:
            args = ["-DCMAKE_BUILD_TYPE=Release",
                    f"-DPython_EXECUTABLE={sys.executable}",
                    "-DFLUXION_BUILD_TESTS=OFF",
                    "-DFLUXION_BUILD_BENCHMARKS=OFF",
                    "-DFLUXION_BUILD_EXAMPLES=OFF", "-DFLUXION_CUDA=OFF"]
            if shutil.which("ninja"):
                args = ["-G", "Ninja"] + args
            self.cmake(["-S", ROOT, "-B", BUILD] + args + user_args, env)
        else:
            # A venv's python is a link to its base interpreter: the same
            # extension serves both.
            if os.path.realpath(configured) != os.path.realpath(sys.executable):
                sys.exit(f"{BUILD} was configured for {configured or 'no Python'}, "
                         f"not {sys.executable}: set FLUXION_BUILD_DIR to another "
                         "folder for this interpreter")
            if user_args:
                self.cmake(["-S", ROOT, "-B", BUILD] + user_args, env)
        jobs = ([] if "CMAKE_BUILD_PARALLEL_LEVEL" in env
                else ["-j", str(os.cpu_count() or 1)])
        self.cmake(["--build", BUILD, "--target", "core"] + jobs, env)

        built = BUILD / "python" / "fluxion" / ("core" + sysconfig.get_config_var("EXT_SUFFIX"))
        if not built.exists():
            sys.exit(f"CMake did not build {built} (is pybind11 installed? "
                     "see the configure output above)")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, target)

    @staticmethod
    def cmake(args, env):
        args = ["cmake"] + [str(a) for a in args]
        print(" ".join(shlex.quote(a) for a in args), flush=True)
        subprocess.run(args, check=True, env=env)


shutil.rmtree(STAGING, ignore_errors=True)
STAGING.mkdir(parents=True)
setup(
    ext_modules=[Extension("fluxion.core", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": str(STAGING)},
             "egg_info": {"egg_base": str(STAGING)}},
    zip_safe=False,
)
