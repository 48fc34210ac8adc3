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
        define_macros=[("NPY_NO_DEPRECATED_API", "NPY_1_7_API_VERSION")],
        extra_compile_args=["-O3"],
    )
    for name, libs in MODULES.items()
]

setup(
    ext_modules=cythonize(
        extensions,
        compiler_directives={"language_level": "3", "embedsignature": True},
    ),
)
