"""Errors caused by the user's input, reported by the CLI as one line without a traceback."""


class Seq2SeqError(Exception):
    """A mistake in the user's input (files, configs, checkpoints), not a bug."""


class DataError(Seq2SeqError):
    """A corpus file is missing, empty, misaligned or not valid UTF-8."""


class CheckpointError(Seq2SeqError):
    """A checkpoint is missing, truncated, unsafe or does not match the data."""


class OutputError(Seq2SeqError):
    """An output file could not be written (disk full, I/O error, no permission)."""


class UsageError(Seq2SeqError):
    """Options that do not go together (found before any work): on the command line, like a
    parse error, one line and status 2."""
