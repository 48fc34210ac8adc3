"""Every ```python block of README.md and docs/*.md runs as a new user would run it.

Each page runs in a fresh, empty temporary folder (its working directory) with an empty
namespace: nothing is imported for it and no file is made for it, so a page imports what it
uses and makes the data it reads (the bundled sample, ``idv.write``). The blocks of one page
run in order in that one namespace (a page builds on its earlier blocks). A block that cannot
run here (it needs the reader's own data or a service) is preceded by a line
``<!-- not run: why -->``, shown as a skip.

The pages that start an engine (``ENGINE_PAGES``) run on the test session's one (conftest.py):
their ``getOrCreate()`` / ``ray.init(...)`` get the running engine, and their closing
``stop()`` / ``ray.shutdown()`` leave it running for the tests after them.

The ``idv ...`` command lines of the pages run in a folder holding the files they name
(``data.idv``, ``big.idv``, ``scored.idv``, ``damaged.idv``, ``model.zip``...), made once.
"""
from __future__ import annotations

import os
import re
import shutil
import warnings
import zipfile
from pathlib import Path

import pytest

import idv

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"(?:<!-- not run: (?P<why>[^>]*) -->\n)?```python\n(?P<code>.*?)```", re.S)


def blocks(page: Path):
    """(line, code, why-not-run or None) of each python block of `page`; a block written as an
    interactive session (``>>>``) gives its input lines."""
    text = page.read_text(encoding="utf-8")
    for m in _BLOCK.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        code = m.group("code")
        if code.lstrip().startswith(">>>"):
            code = "".join(ln[4:] + "\n" for ln in code.splitlines()
                           if ln.startswith((">>> ", "... ")) or ln in (">>>", "..."))
        yield line, code, m.group("why")


# the names the command lines give the files of a scored ML.NET pipeline: one file stands for
# them all
SCORED = ("data.idv", "big.idv", "scored.idv", "pipeline_multiclass_scored.idv")


@pytest.fixture(scope="module")
def command_workspace(tmp_path_factory):
    """The files the command lines of the pages name, made once."""
    import numpy as np
    folder = tmp_path_factory.mktemp("docs")
    n = 200_000
    rng = np.random.default_rng(0)
    idv.write(folder / SCORED[0], {
        "Id": np.arange(n), "Label": rng.random(n) < 0.5,
        "Txt": np.array(["red", "green", "blue", "é"], object)[np.arange(n) % 4],
        "Features": rng.random((n, 4), np.float32),
        "PredictedLabel": (np.arange(n) % 4).astype(np.uint32),
        "Score": rng.random((n, 3), np.float32), "X": rng.random(n, np.float32),
        "Vec": rng.random((n, 4), np.float32)},
        types={"PredictedLabel": idv.Key(idv.UInt32, count=3)},
        metadata={"Features": {"SlotNames": ["Size", "Weight", "Age", "Price"]},
                  "PredictedLabel": {"KeyValues": ["cat", "dog", "bird"]}})
    for name in SCORED[1:]:
        shutil.copy(folder / SCORED[0], folder / name)
    with zipfile.ZipFile(folder / "model.zip", "w") as z:
        z.write(idv.sample_path(), "DataLoaderModel\\Loader\\Schema.idv")    # as ML.NET names it
    idv.write(folder / "damaged.idv", {"Id": np.arange(50), "Txt": [f"t{i}" for i in range(50)]},
              compression="none", rows_per_block=7)
    with idv.open(folder / "damaged.idv") as f:
        at = int(f["Txt"].lookup[3]["offset"])
    with open(folder / "damaged.idv", "r+b") as out:    # block 3 of Txt: lengths gone wrong
        out.seek(at)
        out.write(b"\xff" * 8)
    return folder


# pages that start an engine: each runs on the session's (a test of its own below)
SPARK_PAGE, RAY_PAGE = REPO / "docs" / "spark.md", REPO / "docs" / "ray.md"
ENGINE_PAGES = (SPARK_PAGE, RAY_PAGE)


def _page_id(page: Path) -> str:
    return page.relative_to(REPO).as_posix()


def run_blocks(page: Path, folder: Path, monkeypatch) -> dict:
    """The page's blocks, in order, in one empty namespace, in the empty `folder`; the
    namespace they leave."""
    pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    monkeypatch.chdir(folder)
    assert not any(folder.iterdir())
    namespace = {"__name__": "__docs__"}
    skipped = []
    for line, code, why in blocks(page):
        if why is not None:
            skipped.append(f"line {line}: {why}")
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", idv.IdvWarning)
                exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        except Exception as e:
            pytest.fail(f"{page.name}, the block at line {line} raised "
                        f"{type(e).__name__}: {e}\n{code}")
    if skipped:
        print(f"not run in {page.name}: " + "; ".join(skipped))
    return namespace


@pytest.mark.parametrize("page", [p for p in PAGES if p not in ENGINE_PAGES
                                  and any(True for _ in blocks(p))], ids=_page_id)
def test_code_blocks_run(page, tmp_path, monkeypatch):
    """The page's blocks, in order, in one empty namespace, in an empty folder."""
    run_blocks(page, tmp_path, monkeypatch)


@pytest.mark.parametrize("page", [SPARK_PAGE], ids=_page_id)
def test_spark_page_runs_on_the_sessions_spark(page, spark, tmp_path, monkeypatch):
    """The page as written; its ``getOrCreate()`` returns the session's SparkSession (the
    page's settings are the session's), and its ``spark.stop()`` is made a no-op for the page
    so that the session's Spark outlives it."""
    monkeypatch.setattr(spark, "stop", lambda: None)
    namespace = run_blocks(page, tmp_path, monkeypatch)
    assert namespace["spark"] is spark
    assert spark.range(3).count() == 3      # still running


@pytest.mark.parametrize("page", [RAY_PAGE], ids=_page_id)
def test_ray_page_runs_on_the_sessions_ray(page, ray_runtime, tmp_path, monkeypatch):
    """The page as written; its ``ray.init(...)`` is made to return the running Ray (as
    ``ignore_reinit_error=True`` does) and its ``ray.shutdown()`` a no-op, for the page, so
    that the session's Ray outlives it."""
    init = ray_runtime.init
    monkeypatch.setattr(ray_runtime, "init",
                        lambda *a, **kw: init(*a, **{**kw, "ignore_reinit_error": True}))
    monkeypatch.setattr(ray_runtime, "shutdown", lambda *a, **kw: None)
    namespace = run_blocks(page, tmp_path, monkeypatch)
    assert namespace["ray"] is ray_runtime and ray_runtime.is_initialized()


_COMMAND = re.compile(r"^(?:\$ )?(idv [a-z]+(?: \S+)*)(?:\s+#.*)?$")


def commands(page: Path):
    """(line, command) of each ``idv ...`` command line in the page's plain ``` blocks (an
    optional ``$`` prompt, an optional ``# comment``); synopses (``idv cat FILE [--rows A:B]``,
    ``idv sample    what it does``) are not commands."""
    fence = None
    for number, raw in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith("```"):
            fence = raw[3:].strip() if fence is None else None
            continue
        if fence != "":
            continue
        c = _COMMAND.match(raw)
        if c and not re.search(r"\b(FILE|INPUT|IN OUT)\b|\[", c.group(1)):
            yield number, c.group(1)


@pytest.mark.parametrize("page", [p for p in PAGES if any(True for _ in commands(p))],
                         ids=_page_id)
def test_command_lines_run(page, command_workspace, tmp_path, monkeypatch):
    """Each command runs where the page's own code ran (the files it writes), with the
    workspace's files for the names it does not make: exit 0, or 1 where the page shows a
    damaged file."""
    pytest.importorskip("pyarrow")      # idv convert
    import shlex
    from cli_run import run_main
    if page not in ENGINE_PAGES and any(True for _ in blocks(page)):
        run_blocks(page, tmp_path, monkeypatch)
    for p in command_workspace.iterdir():
        if not (tmp_path / p.name).exists():
            os.link(p, tmp_path / p.name)
    for line, command in commands(page):
        argv = shlex.split(command)
        rc, out, err = run_main(*argv[1:], cwd=tmp_path)     # as `python -m idv` runs it
        expected = 1 if "damaged" in command else 0
        assert rc == expected, (f"{page.name}:{line}: {command}", err[-2000:])
        assert "internal error" not in err and "Traceback" not in err, err
        if expected == 0:
            assert out or "->" in err, f"{page.name}:{line}: {command} printed nothing"


def test_blocks_are_found():
    """The block pattern sees the README's examples (a regex gone wrong would pass vacuously)."""
    found = list(blocks(REPO / "README.md"))
    assert len(found) >= 4
    assert any("idv.sample_path()" in code for _, code, _ in found)
    cli = [c for _, c in commands(REPO / "docs" / "cli.md")]
    assert "idv verify damaged.idv" in cli and not any("FILE" in c for c in cli)


def test_every_extra_is_in_the_extras_tables():
    """pyproject's extras, each a row of the README's and the getting-started page's tables."""
    try:
        import tomllib
    except ImportError:                      # Python < 3.11
        tomllib = pytest.importorskip("tomli")
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert {"fast", "arrow", "pandas", "test"} <= set(extras)
    for page in (REPO / "README.md", REPO / "docs" / "getting-started.md"):
        rows = set(re.findall(r"^\| `([a-z0-9-]+)` \|", page.read_text(), re.M))
        assert rows == set(extras), (page.name, set(extras) ^ rows)
