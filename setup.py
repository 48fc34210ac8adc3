"""Build the Cython format layer; everything else is declared in pyproject.toml.

The build needs only a C compiler. idv._compression calls zlib's C API when zlib's headers and
library are found (a tiny program is compiled and linked against them); without them, or with
``IDV_NO_ZLIB=1``, it has Python's own zlib module do that work instead, with the same bytes
(docs/development.md, "Build and test"). Optimization flags follow the compiler setuptools
uses: ``-O3`` for GCC and clang, ``/O2`` for MSVC; ``IDV_OPTIMIZE="-O0"`` (space-separated
flags) replaces them, for a build that is tested rather than timed (about a fifth of the
compile time: tests/test_portable.py's build).

``IDV_MODULES=idv._compression,idv._parts`` builds only the modules named (after editing them;
tests/test_portable.py's build). ``IDV_SANITIZE=address`` builds the modules with clang's
AddressSanitizer and libFuzzer's coverage hooks, for fuzzing under ASan (fuzz/asan.sh,
docs/development.md "Fuzzing").
"""
import os
import shutil
import tempfile

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

MODULES = ["idv._cursor", "idv._header", "idv._toc", "idv._lookup", "idv._parts",
           "idv._compression", "idv._codecs", "idv._encode", "idv._arrow_c",
           "idv._compare"]
# the modules that call zlib's C API where it is found (IDV_HAVE_ZLIB)
ZLIB_MODULES = {"idv._compression"}
OPTIMIZE = {"msvc": ["/O2"]}        # by setuptools' compiler_type; any other: GCC's flags
GCC_OPTIMIZE = ["-O3"]
if os.environ.get("IDV_OPTIMIZE"):
    OPTIMIZE = {}
    GCC_OPTIMIZE = os.environ["IDV_OPTIMIZE"].split()

SANITIZE = os.environ.get("IDV_SANITIZE")
LINK = []
if SANITIZE:
    # atheris' runtime (asan_with_fuzzer.so, preloaded) brings ASan and libFuzzer: the modules
    # only carry the instrumentation, and clang must build them to match that runtime
    os.environ.setdefault("CC", "clang")
    os.environ.setdefault("LDSHARED", "clang -shared")
    GCC_OPTIMIZE = [f"-fsanitize={SANITIZE},fuzzer-no-link", "-fno-omit-frame-pointer", "-O1",
                    "-g"]
    LINK = [f"-fsanitize={SANITIZE}"]


def has_zlib(compiler):
    """Whether a program including zlib.h compiles and links against zlib with `compiler`
    (False, without trying, when IDV_NO_ZLIB=1)."""
    if os.environ.get("IDV_NO_ZLIB") == "1":
        return False
    tmp = tempfile.mkdtemp(prefix="idv-zlib-")
    try:
        src = os.path.join(tmp, "probe.c")
        with open(src, "w") as f:
            f.write("#include <zlib.h>\n"
                    "int main(void) { return (int)crc32_z(0, (const unsigned char *)0, 0); }\n")
        objects = compiler.compile([src], output_dir=tmp)
        compiler.link_executable(objects, "probe", output_dir=tmp, libraries=["z"])
        return True
    except Exception:       # CompileError, LinkError: no headers, or no library
        return False
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class BuildExt(build_ext):
    """build_ext choosing, for the compiler it uses, the optimization flags and zlib."""

    def build_extensions(self):
        zlib = has_zlib(self.compiler)
        how = "zlib's C API" if zlib else "Python's zlib module (no zlib headers found)"
        self.announce(f"idv._compression inflates with {how}", 2)
        for ext in self.extensions:
            ext.extra_compile_args = OPTIMIZE.get(self.compiler.compiler_type, GCC_OPTIMIZE)
            ext.extra_link_args = LINK
            if ext.name in ZLIB_MODULES:
                ext.define_macros.append(("IDV_HAVE_ZLIB", "1" if zlib else "0"))
                if zlib:
                    ext.libraries.append("z")
        super().build_extensions()


extensions = [
    Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[numpy.get_include()],
        # NPY_TARGET_VERSION: the oldest numpy the modules run with (pyproject's numpy>=1.23),
        # the same whichever numpy builds them (numpy 2.0, the newest for Python 3.9, would
        # target 1.19 and so compile out the NEP 49 allocator of _compression).
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("NPY_TARGET_VERSION", "NPY_1_23_API_VERSION")],
    )
    for name in MODULES
]

# numpy 2's StringDType from text blocks (idv.read(text="StringDType")): its C API (NpyString)
# exists only in numpy 2, so this module targets numpy 2 and is built only against it.
if int(numpy.__version__.split(".")[0]) >= 2:
    extensions.append(Extension(
        "idv._strings", ["idv/_strings.pyx"], include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("NPY_TARGET_VERSION", "NPY_2_0_API_VERSION")]))

ONLY = os.environ.get("IDV_MODULES")
if ONLY:
    extensions = [e for e in extensions if e.name in ONLY.split(",")]

setup(
    cmdclass={"build_ext": BuildExt},
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
    ),
)
