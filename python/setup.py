"""`pip install ./python` copies a built libtrit.so into the package, so the installed package
needs nothing else: from $TRIT_LIBRARY (a path to libtrit.so), else from ../build (the README's
build directory). Without either the package finds the library at run time (see trit/_lib.py).
"""
import glob
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def built_library():
    env = os.environ.get("TRIT_LIBRARY")
    if env:
        return os.path.realpath(env)
    found = sorted(glob.glob(os.path.join(HERE, "..", "build", "libtrit.so.*.*.*")))
    return os.path.realpath(found[-1]) if found else None


class BuildPyWithLibrary(build_py):
    def run(self):
        super().run()
        lib = built_library()
        if lib and os.path.exists(lib):
            dst = os.path.join(self.build_lib, "trit", "libtrit.so")
            shutil.copyfile(lib, dst)
            print(f"trit: bundled {lib} as {dst}")
        else:
            print("trit: no built libtrit.so found (set TRIT_LIBRARY); the package will look for an installed one")


setup(cmdclass={"build_py": BuildPyWithLibrary})
