"""``idv cat`` streams: every format prints rows as their blocks decode, so ``idv cat big.idv |
head -1`` decodes only the first blocks and ends at once, exit 0, no traceback.

Blocks are counted, not timed: the child process counts every block its columns decode
(``Column.blocks_decoded``) and reports the total when it exits.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import idv
from cli_run import COUNTING_CLI, run_into_head

ROWS, RPB = 200_000, 1000        # 200 blocks per column


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    path = tmp_path_factory.mktemp("stream") / "big.idv"
    rng = np.random.default_rng(0)
    idv.write(path, {"Id": np.arange(ROWS), "Score": rng.random(ROWS, np.float32),
                     "Name": [f"name {i}" for i in range(ROWS)]}, rows_per_block=RPB)
    return path


def _cat_into_head(path, fmt, tmp_path):
    count = tmp_path / "blocks"
    rc, err, first = run_into_head("-c", COUNTING_CLI, count, "cat", path, "--format", fmt)
    return rc, err, first, sum(json.loads(count.read_text()).values())


@pytest.mark.parametrize("fmt", ["table", "csv", "tsv", "json", "jsonl"])
def test_cat_into_head_decodes_only_the_first_blocks(big, fmt, tmp_path):
    rc, err, first, blocks = _cat_into_head(big, fmt, tmp_path)
    assert rc == 0 and err == "", err
    assert first.strip()
    total = 3 * ROWS // RPB
    # the first group of rows (8192 rows: 9 blocks a column) and at most the next, against 600
    assert 0 < blocks <= 2 * 3 * 9, (blocks, total)


def test_cat_table_is_aligned_on_the_first_rows(big):
    from cli_run import run
    rc, out, err = run("cat", big, "--rows", "9995:10005", check_rc=0)
    lines = out.splitlines()
    assert lines[0].split() == ["#", "Id", "Score", "Name"]
    assert len({ln.index("name ") for ln in lines[3:-1]}) == 1    # one alignment
    assert lines[-1] == f"(10 rows of {ROWS})"
    assert [ln.split()[0] for ln in lines[3:-1]] == [str(i) for i in range(9995, 10005)]
