"""Exceptions raised for files that are not valid ML.NET dataviews."""


class IdvFormatError(ValueError):
    """The bytes are not a valid .idv file; the message names what is wrong and where."""


class UnsupportedCodecError(IdvFormatError):
    """The column's codec or compression is unknown to this reader (ML.NET skips such columns)."""
