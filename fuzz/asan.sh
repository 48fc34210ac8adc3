#!/bin/sh
# Build idv's Cython modules with clang's AddressSanitizer in a copy of the package, then run a
# harness there under ASan with atheris' libFuzzer:
#
#     fuzz/asan.sh DIR build                    # copy idv/ into DIR, build it there (slow)
#     fuzz/asan.sh DIR fuzz/fuzz_read.py ARGS   # run a harness against DIR's build
#
# The checkout's own modules are left as they are. "build" again after editing a .py or .pyx
# (only the modules whose sources changed are compiled again). See docs/development.md.
set -e
dir=$(realpath -m "$1"); shift
repo=$(cd "$(dirname "$0")/.." && pwd)
if [ "$1" = build ]; then
    mkdir -p "$dir"
    cp "$repo/setup.py" "$repo/pyproject.toml" "$dir/"
    # the sources: every file of the package except the compiled modules
    (cd "$repo" && find idv -type f ! -name '*.so' ! -name '*.c' ! -path '*__pycache__*' \
        -exec cp --parents -u {} "$dir/" \;)
    cd "$dir" && IDV_SANITIZE=address python setup.py build_ext --inplace -q
    exit 0
fi
# atheris' ASan runtime, with libFuzzer, must come first: the modules are built against it
LD_PRELOAD="$(python -c 'import atheris; print(atheris.path())')/asan_with_fuzzer.so" \
ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=1}" \
IDV_FUZZ_ADDRESS_SPACE=0 PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}" exec python "$@"
