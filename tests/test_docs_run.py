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

The ``idv ...`` command lines of the pages run where the page's own code ran, beside the files
docs/cli.md tells its reader to make (``data.idv``, ``scored.idv``, ``damaged.idv``,
``model.zip``...: its block, run once); the output a page shows after a ``$`` command is the
one it prints.
"""
from __future__ import annotations

import os
import re
import warnings
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


CLI_PAGE = REPO / "docs" / "cli.md"


@pytest.fixture(scope="module")
def command_workspace(tmp_path_factory):
    """The files the command lines of the pages name, made once by the command line page's
    own block that makes them (what a reader runs to follow along)."""
    code = next(code for _, code, _ in blocks(CLI_PAGE) if 'idv.write("data.idv"' in code)
    folder = tmp_path_factory.mktemp("docs")
    here = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, "cli.md", "exec"), {"__name__": "__main__"})
    finally:
        os.chdir(here)
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
    namespace = {"__name__": "__main__"}     # as a script's: its main guard runs
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
    """(line, command, the output shown) of each ``idv ...`` command line in the page's plain
    ``` blocks (an optional ``$`` prompt, an optional ``# comment``); synopses (``idv cat FILE
    [--rows A:B]``, ``idv sample    what it does``) are not commands. The output shown is the
    lines after a ``$`` command to the block's end (None without a prompt)."""
    fence, shown, found = None, None, []
    for number, raw in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith("```"):
            fence, shown = raw[3:].strip() if fence is None else None, None
            continue
        if fence != "":
            continue
        c = _COMMAND.match(raw)
        if c and not re.search(r"\b(FILE|INPUT|IN OUT)\b|\[", c.group(1)):
            shown = [] if raw.startswith("$ ") else None
            found.append((number, c.group(1), shown))   # shown: filled in by the lines below
        elif shown is not None:
            shown.append(raw)
    return found


def _shown_in(shown, printed):
    """Whether the output a page shows is the one printed: its parts between ``...`` lines
    appear in order, line for line, with runs of spaces as any and numbers of 4 digits or
    more and hexadecimal checksums as any number (file sizes, offsets and CRC-32s depend on
    the DEFLATE backend)."""
    def pattern(line):
        out = []
        for piece in re.split(r"(0x[0-9a-f]+|\d{4,}|\s+)", line.rstrip()):
            if re.fullmatch(r"0x[0-9a-f]+", piece):
                out.append(r"0x[0-9a-f]+")
            elif re.fullmatch(r"\d{4,}", piece):
                out.append(r"\d+")
            elif piece.isspace():
                out.append(r"\s+")
            else:
                out.append(re.escape(piece))
        return re.compile("".join(out) + "$")
    lines, at = printed.splitlines(), 0
    parts = [[]]
    for line in shown:
        if line.strip() == "...":
            parts.append([])
        else:
            parts[-1].append(pattern(line))
    for part in filter(None, parts):
        while at + len(part) <= len(lines) and not all(
                p.match(ln) for p, ln in zip(part, lines[at:at + len(part)])):
            at += 1
        if at + len(part) > len(lines):
            return False
        at += len(part)
    return True


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
    for line, command, shown in commands(page):
        argv = shlex.split(command)
        rc, out, err = run_main(*argv[1:], cwd=tmp_path)     # as `python -m idv` runs it
        expected = 1 if "damaged" in command else 0
        assert rc == expected, (f"{page.name}:{line}: {command}", err[-2000:])
        assert "internal error" not in err and "Traceback" not in err, err
        if expected == 0:
            assert out or "->" in err, f"{page.name}:{line}: {command} printed nothing"
        if shown:
            assert _shown_in(shown, out + err), (f"{page.name}:{line}: {command}", out + err)


def test_blocks_are_found():
    """The block pattern sees the README's examples (a regex gone wrong would pass vacuously)."""
    found = list(blocks(REPO / "README.md"))
    assert len(found) >= 4
    assert any("idv.sample_path()" in code for _, code, _ in found)
    cli = {c: shown for _, c, shown in commands(CLI_PAGE)}
    assert "idv verify damaged.idv" in cli and not any("FILE" in c for c in cli)
    assert cli["idv verify damaged.idv"][0] == "damaged.idv: 2 problems"


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
