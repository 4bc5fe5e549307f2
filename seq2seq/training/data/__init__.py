"""The training data: corpora read into Arrow, tokenized, and the DataModule.

- ``sources``: a corpus (files, TSV, JSON lines, Hub) read into Arrow, one split at a time;
- ``split_text``: one split in Arrow, and passes over it that do not grow with it;
- ``encode_pool``: SentencePiece encoding on worker processes;
- ``tokenized``: tokenized splits on disk, read row by row;
- ``sampled_segmentation``: each epoch's subword segmentations drawn from (seed, epoch, row);
- ``datamodule``: the LightningDataModule over all of the above, batched by
  ``seq2seq.inference.batching`` (padded, length-bucketed batches under a token budget, which
  translation uses too).
"""
