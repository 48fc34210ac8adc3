"""Errors that point the way: a full disk under ``idv cat``, a file too large for convert's
output, a CSV saved as .idv, a directory given to idv.open, a server that ignores Range
requests: each says what happened and what to do, never "internal error".
"""
from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys

import pytest

import idv
from cli_run import run
from http_server import RangeServer
from reference import REPO_DIR, fixture

CSV_TEXT = "Name,Age\nann,31\nbob,40\n"


def _idv_cli(args, stdout, limit_bytes=None):
    """``python -m idv ARGS`` with stdout to `stdout`; `limit_bytes`: the largest file the
    child may write (RLIMIT_FSIZE: a write beyond fails with EFBIG, as on a full disk)."""
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))

    def limit():
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    return subprocess.run([sys.executable, "-m", "idv", *map(str, args)], stdout=stdout,
                          stderr=subprocess.PIPE, env=env, cwd=REPO_DIR, timeout=120,
                          preexec_fn=limit)


@pytest.mark.parametrize("command", [["cat", "--format", "csv"], ["head"]])
def test_a_full_disk_under_cat_is_named(command):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    with open("/dev/full", "wb") as full:
        p = _idv_cli([*command, fixture("multiblock_200k_none")], full)
    err = p.stderr.decode()
    assert p.returncode == 1
    assert "No space left on device" in err and "internal error" not in err, err
    assert err.count("\n") == 1, err         # one line, nothing more at exit


def test_convert_names_its_output_when_the_disk_refuses_a_write(tmp_path):
    out = tmp_path / "big.csv"
    p = _idv_cli(["convert", fixture("multiblock_200k_none"), out, "-q"],
                 subprocess.DEVNULL, limit_bytes=64 * 1024)
    err = p.stderr.decode()
    assert p.returncode == 1 and f"{out}: File too large" in err, err
    assert not out.exists()


@pytest.mark.parametrize("suffix", [".parquet", ".feather", ".csv", ".jsonl", ".idv"])
def test_convert_in_python_names_its_output_when_the_disk_refuses_a_write(tmp_path, suffix):
    """The OSError of a full disk names the output, whichever writer failed (pyarrow's and the
    text writer's named no file: filename None), as the command line and .idv outputs did."""
    if suffix in (".parquet", ".feather"):
        pytest.importorskip("pyarrow", reason="pyarrow writes Parquet and Feather")
    out = tmp_path / f"out{suffix}"
    code = (f"import idv\ntry:\n    idv.convert({str(fixture('multiblock_200k_none'))!r}, "
            f"{str(out)!r})\nexcept OSError as e:\n    print(e.errno, e.filename)")
    env = dict(os.environ, PYTHONPATH=str(REPO_DIR) + os.pathsep
               + os.environ.get("PYTHONPATH", ""))

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       timeout=120, preexec_fn=limit)
    assert p.stdout.split() == ["27", str(out)], (p.stdout, p.stderr)
    assert os.listdir(tmp_path) == []


def test_an_idv_output_refused_by_the_disk_is_named_and_the_old_file_kept(tmp_path):
    """The writer's blocks go many to a writev; one the disk takes only in part (the file size
    limit reached inside it) or refuses ends the conversion with the output's name, the file
    it would have replaced as it was and no temporary file left."""
    pa = pytest.importorskip("pyarrow", reason="pyarrow writes the Parquet source")
    import numpy as np
    import pyarrow.parquet as pq
    rng = np.random.default_rng(4)
    src, out = tmp_path / "src.parquet", tmp_path / "out.idv"
    pq.write_table(pa.table({"x": rng.random(200_000),
                             "t": [f"v{i % 977}" for i in range(200_000)]}), src)
    out.write_bytes(b"old")
    p = _idv_cli(["convert", src, out, "-q"], subprocess.DEVNULL, limit_bytes=300_000)
    err = p.stderr.decode()
    assert p.returncode == 1 and f"{out}: File too large" in err, err
    assert out.read_bytes() == b"old"
    assert sorted(os.listdir(tmp_path)) == ["out.idv", "src.parquet"]


def test_a_csv_saved_as_idv_says_it_looks_like_text(tmp_path):
    path = tmp_path / "people.idv"
    path.write_text(CSV_TEXT)
    with pytest.raises(idv.IdvFormatError, match=r"starts with text \('Name,Age'\).*CSV"):
        idv.open(path)
    rc, _, err = run("schema", path)
    assert rc == 1 and "idv convert" in err and "truncated" not in err, err


def test_an_html_page_says_it_is_one_and_points_to_idv_dataset(tmp_path):
    """A page saved or served where an .idv was expected (an HTTP directory listing) is
    named an HTML page, not a CSV file to convert."""
    path = tmp_path / "listing.idv"
    path.write_text("<!DOCTYPE HTML>\n<html><body><a href='a.txt'>a.txt</a></body></html>\n")
    with pytest.raises(idv.IdvFormatError, match=r"HTML page.*idv\.dataset\(URL\)") as e:
        idv.open(path)
    assert "CSV" not in str(e.value)


def test_binary_garbage_keeps_the_signature_error(tmp_path):
    path = tmp_path / "noise.idv"
    path.write_bytes(bytes(range(256)) * 2)
    with pytest.raises(idv.IdvFormatError, match="bad signature"):
        idv.open(path)


def test_a_directory_points_to_idv_dataset(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"idv\.dataset\("):
        idv.open(tmp_path)


def test_the_range_warning_names_the_url_once():
    data = fixture("mixed_default").read_bytes()
    with RangeServer({"/m.idv": data}) as server:
        server.mode = "no-range"
        url = server.url("/m.idv")
        rc, out, err = run("schema", url)
    assert rc == 0 and "ignores HTTP Range" in err and "fetched once" in err, err
    assert err.count(url) == 1, err


def test_an_installed_package_that_fails_to_load_is_not_called_missing(tmp_path, monkeypatch):
    from idv.errors import MissingDependencyError, require
    (tmp_path / "heavypkg").mkdir()
    init = tmp_path / "heavypkg" / "__init__.py"
    init.write_text("raise OSError('libheavy.so: failed to map segment: Cannot allocate "
                    "memory')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(MissingDependencyError, match="installed but failed to import: OSError: "
                                                     "libheavy.so.*Cannot allocate memory"):
        require("heavypkg", "reading", "idv[heavy]")
    with pytest.raises(MissingDependencyError, match="needs no_such_pkg_zz: pip install "
                                                     "'idv\\[x\\]'"):
        require("no_such_pkg_zz", "reading", "idv[x]")
