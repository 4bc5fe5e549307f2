"""seq2seq: neural machine translation with pluggable, inspectable attention."""

__version__ = "0.1.0"
