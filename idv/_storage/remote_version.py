"""Which version of a remote object a RemoteSource (idv._storage.remote) opened, and what keeps
its reads to it.

Over HTTP the object is pinned by its strong ETag, sent as ``If-Match`` with every request,
else by its Last-Modified, sent as ``If-Unmodified-Since``; through a version-aware
filesystem (s3fs's ``version_aware=True``) by its VersionId. Every answer's validators are also
compared with those seen at open: the ETag (weakly: a weak ETag, ``W/"..."``, cannot be sent as
``If-Match``, but an answer of another version carries another one) and the Last-Modified,
where it is pinned or the answer carries no ETag. A file whose server sends neither cannot be
told from another put in its place: opening it says so (an IdvWarning).

``identity`` is the source's, by the rule a local file's is (idv._storage.source.MemorySource):
what tells the object opened from another put at its URL since (a dataset opening the file
again, a Dask task, a training loader's worker); it exists only where a strong validator pins
the version: (the validator's name, its value, the size).
"""
from __future__ import annotations

from idv.errors import RemoteChangedError, warn


class Version:
    """The version of the object at `url` that `info` (its fsspec info at open) describes;
    `http`: the filesystem is fsspec's HTTP one; `version_aware`: it reads by VersionId."""

    def __init__(self, url, info, size, http, version_aware):
        self.url = url
        self.etag = info.get("ETag") if http else None
        self.modified = info.get("Last-Modified") if http else None
        self.headers = {}               # what each request sends to read this version only
        self.version_id = None
        if self.etag and not self.etag.startswith("W/"):
            self.headers = {"If-Match": self.etag}
        elif self.modified:
            self.headers = {"If-Unmodified-Since": self.modified}
        elif version_aware and info.get("VersionId"):
            self.version_id = info["VersionId"]
        pin = next(iter(self.headers.values()), None) or self.version_id
        kind = {"If-Match": "ETag", "If-Unmodified-Since": "Last-Modified"}.get(
            next(iter(self.headers), None), "VersionId")
        self.identity = None if pin is None else (kind, pin, size)

    def warn_unpinned(self):
        """An IdvWarning for an HTTP file whose server sends no validator at all."""
        if self.etag is None and self.modified is None:
            warn(f"{self.url}: the server sends neither an ETag nor a Last-Modified, so idv "
                 f"cannot tell this file from another put in its place: a file replaced "
                 f"while it is read may give blocks of both versions")

    def check(self, status, headers):
        """RemoteChangedError "changed while reading" for an answer (its HTTP `status` and
        `headers`) that is not of the version opened."""
        sent = headers.get("ETag")
        # the Last-Modified pinned, or compared where the answer carries no ETag (a server
        # that ignores If-Match and leaves the ETag out tells another version by it alone)
        dated = "If-Unmodified-Since" in self.headers or (self.modified and not sent)
        if status == 412 or (self.etag and sent and _opaque(sent) != _opaque(self.etag)) or (
                dated and headers.get("Last-Modified", self.modified) != self.modified):
            raise RemoteChangedError(self.changed(), url=self.url)

    def changed(self):
        """The message of an answer of another version than the one opened."""
        seen = ", ".join(f"{k} {v}" for k, v in (("ETag", self.etag),
                                                 ("Last-Modified", self.modified)) if v)
        return (f"{self.url}: the file changed while reading (opened as {seen}); open it "
                f"again")


def _opaque(etag):
    """The opaque tag of an ETag, for the weak comparison (RFC 9110 8.8.3.2)."""
    return etag[2:] if etag.startswith("W/") else etag
