"""Build the Cython format layer; everything else is declared in pyproject.toml."""
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup

MODULES = {
    "idv._cursor": [],
    "idv._header": [],
    "idv._toc": [],
    "idv._lookup": [],
    "idv._compression": ["z"],
    "idv._codecs": [],
    "idv._encode": [],
}

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
        extra_compile_args=["-O3"],
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
        extra_compile_args=["-O3"]))

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
    ),
)
