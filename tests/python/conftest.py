"""Makes `import isomer` find the module built by CMake, without pip install.

The build puts isomer/_core*.so next to links to python/isomer/*.py in
<build>/python/. The build directory is $ISOMER_BUILD_DIR, else the directory of
$ISOMER_BIN (the Makefile sets it to build/isomer), else <repo>/build. Without such
a build, an installed isomer package (pip install .) is used.
"""
import glob
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _build_dir():
    if os.environ.get("ISOMER_BUILD_DIR"):
        return os.environ["ISOMER_BUILD_DIR"]
    if os.environ.get("ISOMER_BIN"):
        return os.path.dirname(os.path.abspath(os.environ["ISOMER_BIN"]))
    return os.path.join(REPO, "build")


_package_parent = os.path.join(_build_dir(), "python")
if glob.glob(os.path.join(_package_parent, "isomer", "_core*.so")):
    sys.path.insert(0, _package_parent)
# The CLI of the same build, for tests that compare the module with it.
os.environ.setdefault("ISOMER_BIN", os.path.join(_build_dir(), "isomer"))


def _sanitizer_build(build):
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            return any(line.startswith("ISOMER_SANITIZE:BOOL=ON") for line in f)
    except OSError:
        return False


# `make test SANITIZE=1` builds no Python module (an ASan library cannot load into
# python): that run leaves out the tests of the module and keeps those of the CLI.
# Any other build without the module still fails loudly on `import isomer`.
def _module_tests():
    out = []
    for path in sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "test_*.py"))):
        with open(path) as f:
            if "\nimport isomer\n" in f.read():
                out.append(os.path.basename(path))
    return out


collect_ignore = []
if _sanitizer_build(_build_dir()) and not glob.glob(os.path.join(_package_parent, "isomer", "_core*.so")):
    collect_ignore = _module_tests()


@pytest.fixture(scope="module")
def isomer_bin():
    """The isomer CLI under test ($ISOMER_BIN); the test is skipped without one."""
    path = os.environ["ISOMER_BIN"]
    if not os.path.exists(path):
        pytest.skip(f"no isomer binary at {path}")
    return path
