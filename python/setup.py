"""Builds sdnn._sdnn with the project's CMake (python/CMakeLists.txt) for the Python running pip.

    /usr/bin/python3 -m venv --system-site-packages .venv && .venv/bin/pip install --no-build-isolation ./python

Nothing is downloaded: CMake, a C++17 compiler, Python's headers, pybind11 and the DLPack header
come from the system (scripts/install_test_deps.sh installs them on Debian). The device layers are
compiled where a GPU is visible (SDNN_PYTHON_CUDA=ON/OFF in the environment overrides that);
SDNN_CMAKE_ARGS adds CMake arguments (e.g. -DCMAKE_CUDA_ARCHITECTURES=90).
"""
import os
import pathlib
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent.parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        target_dir = pathlib.Path(self.get_ext_fullpath(ext.name)).resolve().parent
        build = pathlib.Path(self.build_temp).resolve() / "cmake"
        args = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython_EXECUTABLE={sys.executable}", "-DSDNN_BUILD_PYTHON=ON", "-DSDNN_BUILD_TESTS=OFF",
                "-DSDNN_BUILD_EXAMPLES=OFF", "-DSDNN_HEADER_CHECK=OFF", "-DSDNN_BUILD_BENCHMARKS=OFF",
                "-DSDNN_BUILD_DEVICE_TESTS=OFF"]
        if os.environ.get("SDNN_PYTHON_CUDA"):
            args.append(f"-DSDNN_PYTHON_CUDA={os.environ['SDNN_PYTHON_CUDA']}")
        args += shlex.split(os.environ.get("SDNN_CMAKE_ARGS", ""))
        subprocess.check_call(args)
        subprocess.check_call(["cmake", "--build", str(build), "--target", "_sdnn", "-j", str(os.cpu_count() or 2)])
        built = list((build / "python" / "sdnn").glob("_sdnn*"))
        if len(built) != 1:
            raise RuntimeError(f"sdnn: expected one built module in {build / 'python' / 'sdnn'}, found {built}")
        target_dir.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target_dir / built[0].name)


setup(ext_modules=[CMakeExtension("sdnn._sdnn")], cmdclass={"build_ext": CMakeBuild})
