"""Build the Cython format layer; everything else is declared in pyproject.toml.

``IDV_SANITIZE=address`` builds the modules with clang's AddressSanitizer and libFuzzer's
coverage hooks, for fuzzing under ASan (fuzz/asan.sh, docs/development.md "Fuzzing").
"""
import os

import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = {
    "idv._cursor": [],
    "idv._header": [],
    "idv._toc": [],
    "idv._lookup": [],
    "idv._parts": ["z"],
    "idv._compression": ["z"],
    "idv._codecs": [],
    "idv._encode": [],
    "idv._arrow_c": [],
}

SANITIZE = os.environ.get("IDV_SANITIZE")
if SANITIZE:
    # atheris' runtime (asan_with_fuzzer.so, preloaded) brings ASan and libFuzzer: the modules
    # only carry the instrumentation, and clang must build them to match that runtime
    os.environ.setdefault("CC", "clang")
    os.environ.setdefault("LDSHARED", "clang -shared")
    OPTIMIZE = [f"-fsanitize={SANITIZE},fuzzer-no-link", "-fno-omit-frame-pointer", "-O1", "-g"]
    LINK = [f"-fsanitize={SANITIZE}"]
else:
    OPTIMIZE, LINK = ["-O3"], []

extensions = [
    Extension(
        name,
        [name.replace(".", "/") + ".pyx"],
        include_dirs=[numpy.get_include()],
        libraries=libs,
        # NPY_TARGET_VERSION: the oldest numpy the modules run with (pyproject's numpy>=1.23),
        # the same whichever numpy builds them (numpy 2.0, the newest for Python 3.9, would
        # target 1.19 and so compile out the NEP 49 allocator of _compression).
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("NPY_TARGET_VERSION", "NPY_1_23_API_VERSION")],
        extra_compile_args=OPTIMIZE,
        extra_link_args=LINK,
    )
    for name, libs in MODULES.items()
]

# numpy 2's StringDType from text blocks (idv.read(text="StringDType")): its C API (NpyString)
# exists only in numpy 2, so this module targets numpy 2 and is built only against it.
if int(numpy.__version__.split(".")[0]) >= 2:
    extensions.append(Extension(
        "idv._strings", ["idv/_strings.pyx"], include_dirs=[numpy.get_include()],
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION"),
                       ("NPY_TARGET_VERSION", "NPY_2_0_API_VERSION")],
        extra_compile_args=OPTIMIZE, extra_link_args=LINK))

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
    ),
)
