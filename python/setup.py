"""The build step of `pip install ./python` (the metadata is in pyproject.toml).

From a checkout, the package takes its libsift.so with it: `bash scripts/run` builds
build/libsift.so beside this folder, and this step copies it into the installed package
(sift/libsift.so), so `import sift` works with no SIFT_LIBRARY and no install prefix, and
keeps working when the checkout is rebuilt or removed. The struct layouts in sift/_lib.py
are the checkout's, so the library copied is the one they describe.

The library copied is SIFT_LIBRARY when set (a full path), else ../build/libsift.so. When
there is none, the package installs without a copy and finds libsift at import time
(sift/_lib.py: SIFT_LIBRARY, the checkout's build/libsift.so named in sift/_checkout.py,
the system loader), and its error says what to run. Nothing is compiled here.
"""
import os
import shutil

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)


def built_library():
    path = os.environ.get("SIFT_LIBRARY") or os.path.join(CHECKOUT, "build", "libsift.so")
    return os.path.realpath(path) if os.path.isfile(path) else None


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "sift")
        lib, dst = built_library(), os.path.join(pkg, "libsift.so")
        if lib:
            shutil.copyfile(lib, dst)
        elif os.path.exists(dst):  # an earlier build's copy (pip builds in python/build/)
            os.remove(dst)
        # where the checkout is, for the import error's advice and the fallback path
        is_checkout = os.path.isfile(os.path.join(CHECKOUT, "scripts", "run"))
        with open(os.path.join(pkg, "_checkout.py"), "w") as f:
            f.write('"""Written by setup.py: the checkout this copy was installed from (None: not a checkout)."""\n')
            f.write(f"CHECKOUT = {CHECKOUT!r}\n" if is_checkout else "CHECKOUT = None\n")


class BinaryDistribution(Distribution):
    """A wheel with libsift.so in it is for this platform only (not py3-none-any)."""

    def has_ext_modules(self):
        return built_library() is not None


setup(cmdclass={"build_py": BuildWithLibrary}, distclass=BinaryDistribution)
