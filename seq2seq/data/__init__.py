"""The training data: corpora read into Arrow, tokenised, batched, and the DataModule.

- ``sources``: a corpus (files, TSV, JSON lines, Hub) read into Arrow, one split at a time;
- ``split_text``: one split in Arrow, and passes over it that do not grow with it;
- ``encode_pool``: SentencePiece encoding on worker processes;
- ``tokenised``: tokenised splits on disk, read row by row;
- ``batching``: padded batches, length-bucketed token-budget batches, resumable loader;
- ``datamodule``: the LightningDataModule over all of the above;
- ``demo_corpus``: the embedded demo corpus (numbers and dates written out).

This file imports nothing: ``seq2seq.data.batching`` (which translation uses) must not pull
in the DataModule and with it Lightning and ``datasets``.
"""
