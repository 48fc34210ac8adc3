"""A job's output files that appear together or not at all: the engines' writers (Ray's
IdvDatasink, Spark's ``format("idv")``) stage every task's file in a hidden folder of the
output directory and move them in once every task has succeeded.

Staged files end in ``.idv-staged`` inside ``.idv-staging-<job>``: what a killed job leaves is
neither a ``*.idv`` nor picked up by idv.dataset (remove the folder to reclaim its space).
Each staged file is itself written atomically (idv.sink), so a task that fails half-way
leaves no partial file even in the staging folder.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import uuid

from idv.sink import fsync_dir

STAGED_SUFFIX = ".idv-staged"
LIVE = "live"          # in the staging folder while the job may still commit
STAGING_PREFIX = ".idv-staging-"


def check_name_pattern(pattern):
    """ValueError unless `pattern` gives each task its own file name: a str.format pattern of
    ``{task}`` (a number) and optionally ``{job}`` (the job's id), without a folder."""
    try:
        first, second = (pattern.format(task=i, job="j") for i in (0, 1))
    except (KeyError, IndexError, ValueError, AttributeError) as e:
        raise ValueError(f"the name pattern must use {{task}} (and may use {{job}}), as "
                         f"'part-{{task:05d}}.idv', not {pattern!r}: {e}") from None
    if first == second or "/" in first or os.sep in first:
        raise ValueError(f"the name pattern must give one file name per task ({{task}}), "
                         f"without a folder, not {pattern!r}")


class Staging:
    """The staging folder of one job writing into the directory ``path``: ``staged(name)`` is
    where a task writes the file that ``commit`` moves to ``path/name``; ``abort`` removes
    everything staged. Picklable (tasks receive it)."""

    def __init__(self, path, job=None):
        self.path = os.path.abspath(os.fspath(path))
        self.job = job or uuid.uuid4().hex[:12]
        self.dir = os.path.join(self.path, STAGING_PREFIX + self.job)

    def start(self):
        """Create the output directory (if missing) and the staging folder, with the mark
        that the job is live."""
        os.makedirs(self.dir, exist_ok=True)
        open(os.path.join(self.dir, LIVE), "wb").close()

    def name(self, pattern, task):
        """A task's file name from the pattern."""
        return pattern.format(task=task, job=self.job)

    def staged(self, name):
        """Where the task's file `name` (a path relative to the output directory) is written
        before commit."""
        flat = os.path.normpath(name).replace(os.sep, "%2F")
        return os.path.join(self.dir, flat + STAGED_SUFFIX)

    def commit(self, names):
        """Move the staged files `names` into the output directory (replacing files of the same
        name, making the folders they name), then remove the staging folder; returns their
        paths."""
        out = []
        for name in names:
            final = os.path.join(self.path, os.path.normpath(name))
            os.makedirs(os.path.dirname(final), exist_ok=True)
            os.replace(self.staged(name), final)
            out.append(final)
        fsync_dir(self.path)
        self.abort()
        return out

    def settle(self, staged):
        """After a task wrote `staged`: when the job was aborted meanwhile (a task still
        running when another failed), remove it and the staging folder, which the abort may
        have left behind while the file was being written."""
        if not os.path.exists(os.path.join(self.dir, LIVE)):
            with contextlib.suppress(OSError):
                os.remove(staged)
            with contextlib.suppress(OSError):
                os.rmdir(self.dir)

    def abort(self):
        """Remove the staging folder and all it holds (the output directory is left as was):
        first the live mark, so that tasks finishing later remove what they wrote (settle)."""
        with contextlib.suppress(OSError):
            os.remove(os.path.join(self.dir, LIVE))
        shutil.rmtree(self.dir, ignore_errors=True)
