"""The LightningDataModule: a source, a SentencePiece vocabulary, cached tokenized splits, and
length-bucketed batches under a token budget.

    source --load_split--> Arrow text --load_or_tokenize--> ids + lengths --> Batches

Everything that grows with the corpus lives in files under ``cache_dir``: the text
(``text/``, memory-mapped Arrow, see ``sources``) and the tokenized splits (``tokens/``,
read row by row, see ``tokenized``; keyed on the text's key and the vocabulary). Each is
found again from file identities and settings, without reading the corpus, so a second run,
or every process of a multi-device run after ``prepare_data``, reads the same files. The
vocabulary is trained on a sample of the training split (or loaded from ``cache_dir/spm``)
on first access of ``vocab``, which may come before ``setup``. A process keeps only NumPy
arrays of a few bytes per pair (lengths; the epoch's order in the batch sampler).

Training pairs with an empty side or more than ``max_len`` pieces on a side are
filtered out on their lengths, and the counts are reported on the ``seq2seq`` logger.
Validation and test keep every pair, in file order: ``Batch.ids`` index ``references(split)``.
With ``subword_nbest``, training reads each pair in a segmentation drawn anew every epoch
(``seq2seq.training.data.sampled_segmentation``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Annotated, Any, get_args

import numpy as np
import pytorch_lightning as pl
from pytorch_lightning.utilities import rank_zero_only

from seq2seq.batch import Batch
from seq2seq.common.errors import DataError, UsageError
from seq2seq.common.ranges import Range, check_arguments
from seq2seq.inference.batching import (
    ResumableLoader,
    TokenBucketBatchSampler,
    collate,
    cut_batches,
)
from seq2seq.inference.opening import open_trained
from seq2seq.text.tokenizer import (
    AnyVocabulary,
    ModelType,
    VocabSettings,
    Vocabulary,
    load_or_train_vocabulary,
)
from seq2seq.training.data.sampled_segmentation import SampledSegmentations
from seq2seq.training.data.sources import load_split
from seq2seq.training.data.split_text import SplitText
from seq2seq.training.data.tokenized import TokenizedRows, load_or_tokenize
from seq2seq.training.guided_alignment import GuidedCollate, read_training_links

TOKENS_FORMAT = 4  # part of the tokenized cache's key: bump when its files change
PARALLEL_MIN_PAIRS = 100_000  # below this, tokenizing in one process is faster than forking

log = logging.getLogger("seq2seq")


@rank_zero_only
def _report(message: str, level: int = logging.INFO) -> None:
    log.log(level, message)


class TranslationDataModule(pl.LightningDataModule):
    """Parallel data from ``source`` for ``src_lang`` -> ``tgt_lang``.

    ``src_lang`` equal to ``tgt_lang`` reads both sides from the same text, so it is refused
    unless ``allow_same_language`` asks for it (e.g. to train a copy or denoising model).
    A ``max_tokens`` below ``max_len + 1`` (the positions of the longest pair allowed)
    puts every longer pair in a batch of its own: training warns once with the batch size.
    With several devices, set the Trainer's ``use_distributed_sampler=False``: the
    batch sampler shards the batches across processes itself.

    Args:
        source: Where the sentence pairs are: a folder of ``{split}.{lang}[.gz]`` files, a
            ``path/{split}.tsv`` or ``path/{split}.jsonl`` pattern, or a Hub dataset id
            (see ``seq2seq.training.data.sources``).
        src_lang: The source language code, as in the file names or the dataset's columns.
        tgt_lang: The target language code.
        train_split: Name of the training split (``train`` reads ``train.{lang}``).
        val_split: Name of the validation split, scored at each validation.
        test_split: Name of the test split, scored by ``seq2seq test``.
        vocab_size: SentencePiece vocabulary size (at least 1), per side unless
            ``joint_vocab``; a soft limit, since a tiny corpus yields fewer pieces.
        spm_model_type: SentencePiece's segmentation algorithm, ``unigram`` or ``bpe``; or
            ``word`` for a corpus segmented already (e.g. by subword-nmt, ``@@`` markers
            and all): each whitespace-separated token of the training text is one piece,
            and translations come out segmented, as the corpus is.
        joint_vocab: One SentencePiece model (the same ids) for both sides; otherwise one
            per side.
        character_coverage: Share of the training text's characters the vocabulary must
            cover, in (0, 1]; the rarest characters beyond it become unknown.
        max_piece_length: Most characters in one piece (at least 1): a small cap splits long
            compounds.
        lowercase: Train a SentencePiece model that folds case (see ``Tokenizer.train``), as
            the Multi30k literature's lowercased preprocessing does; references stay as
            they are.
        max_tokens: Bound on ``sentences * longest side`` (in pieces, at least 1) per
            training batch.
        eval_max_tokens: The same bound per validation/test batch (default: ``max_tokens``).
        max_len: Training pairs with more pieces than this (at least 1) on a side are
            filtered out, as are pairs with an empty side; the counts are reported.
        cache_dir: Folder for the text, the vocabulary and the tokenized splits, found
            again by later runs without reading the corpus.
        seed: Seed of SentencePiece's training sample and of the batch order.
        num_workers: DataLoader worker processes (0: load batches in the main process).
        hub_config: The Hub dataset's configuration name, e.g. ``de-en`` (Hub sources only).
        spm_sample: SentencePiece trains on this many training pairs drawn with ``seed``
            (0: all); part of the vocabulary's cache key, since the pieces depend on it.
        spm_threads: Threads for SentencePiece training (default: every core); part of the
            vocabulary's cache key, since the pieces depend on it.
        num_proc: Processes tokenizing a split of ``PARALLEL_MIN_PAIRS`` (100,000) pairs or
            more (default: every core).
        allow_same_language: Allow ``src_lang`` equal to ``tgt_lang`` (both sides then read
            the same text, e.g. for a copy or denoising model); an error otherwise.
        subword_nbest: Subword regularization (0: off, the default): each epoch trains on a
            segmentation of every pair drawn from its ``subword_nbest`` most likely ones
            (64 is usual; unigram vocabularies only); see
            ``seq2seq.training.data.sampled_segmentation``. Validation and test read the best one.
        subword_alpha: The draw's smoothing: each segmentation's likelihood to this power
            (at least 0; 0 draws uniformly, larger favors the best; 0.1 is usual).
        vocab_from: Encode the data with this trained model's vocabulary (a checkpoint, a
            released model's name, a transformers MarianMT model) instead of training a
            SentencePiece model; ``fit --init_from`` sets it to the model it starts from.
        train_alignments: Word links of the training pairs, for guided alignment
            (``model.guided_alignment``): a Pharaoh file (``0-0 1-2``, 0-indexed over the
            whitespace-separated words), one line per pair of the training split, as eflomal
            or fast_align write them.
    """

    def __init__(  # its parameters are the config's data.* keys (jsonargparse reads them)
        self,
        source: str,
        src_lang: str,
        tgt_lang: str,
        train_split: str = "train",
        val_split: str = "val",
        test_split: str = "test",
        vocab_size: Annotated[int, Range(1)] = 8000,
        spm_model_type: ModelType = "unigram",
        joint_vocab: bool = True,
        character_coverage: Annotated[float, Range(0, 1, above=True)] = 1.0,
        max_piece_length: Annotated[int, Range(1)] = 16,
        lowercase: bool = False,
        max_tokens: Annotated[int, Range(1)] = 4096,
        eval_max_tokens: Annotated[int, Range(1)] | None = None,
        max_len: Annotated[int, Range(1)] = 100,
        cache_dir: str = "data/cache",
        seed: int = 1,
        num_workers: Annotated[int, Range(0)] = 0,
        hub_config: str | None = None,
        spm_sample: Annotated[int, Range(0)] = 100_000,
        spm_threads: Annotated[int, Range(1)] | None = None,
        num_proc: Annotated[int, Range(1)] | None = None,
        allow_same_language: bool = False,
        subword_nbest: Annotated[int, Range(0)] = 0,
        subword_alpha: Annotated[float, Range(0)] = 0.1,
        vocab_from: str | None = None,
        train_alignments: str | None = None,
    ) -> None:
        super().__init__()
        check_arguments(TranslationDataModule.__init__, locals(), "data.", DataError)
        eval_max_tokens = eval_max_tokens or max_tokens
        if src_lang == tgt_lang and not allow_same_language:
            raise DataError(
                f"data.src_lang and data.tgt_lang are both {src_lang!r}: both sides would be "
                "the same text; set data.allow_same_language true to train on that anyway"
            )
        if spm_model_type not in get_args(ModelType):
            raise DataError(
                f"data.spm_model_type must be unigram, bpe or word, got {spm_model_type!r}"
            )
        if subword_nbest and spm_model_type != "unigram":
            raise DataError(
                "data.subword_nbest draws segmentations by their likelihood, which only a "
                f"unigram vocabulary gives: set data.spm_model_type unigram (not {spm_model_type})"
            )
        cores = os.cpu_count() or 1
        self.vocab_settings = VocabSettings(
            vocab_size=vocab_size,
            model_type=spm_model_type,
            joint=joint_vocab,
            character_coverage=character_coverage,
            max_piece_length=max_piece_length,
            lowercase=lowercase,
            sample=spm_sample,
            seed=seed,
            threads=spm_threads or cores,
        )
        self.num_proc = num_proc or cores
        self.source, self.hub_config = source, hub_config
        self.src_lang, self.tgt_lang = src_lang, tgt_lang
        self.train_split, self.val_split, self.test_split = train_split, val_split, test_split
        self.max_tokens, self.eval_max_tokens = max_tokens, eval_max_tokens
        self.max_len, self.seed, self.num_workers = max_len, seed, num_workers
        self.subword_nbest, self.subword_alpha = subword_nbest, subword_alpha
        self.cache_dir = Path(cache_dir)
        self.vocab_from = vocab_from
        self.train_alignments = train_alignments
        self._vocab: AnyVocabulary | None = None
        self._texts: dict[str, SplitText] = {}
        self._tokenized: dict[str, tuple[TokenizedRows, np.ndarray]] = {}
        self._budget_checked = False

    # -- vocabulary ------------------------------------------------------------------
    @property
    def vocab(self) -> AnyVocabulary:
        """The vocabulary: ``vocab_from``'s, else loaded from the cache, else trained on
        the training split."""
        if self._vocab is None and self.vocab_from:
            self._vocab = open_trained(self.vocab_from).trained.vocab
        if self._vocab is None:
            train = self.text(self.train_split)
            self._vocab = load_or_train_vocabulary(
                self.cache_dir, self.vocab_settings, train.key, train.sample
            )
        return self._vocab

    # -- raw text --------------------------------------------------------------------
    def text(self, split: str) -> SplitText:
        """The raw sentence pairs of ``split`` in file order, memory-mapped (read once)."""
        if split not in self._texts:
            text = load_split(
                self.source, split, self.src_lang, self.tgt_lang, self.cache_dir, self.hub_config
            )
            if not len(text):
                raise DataError(f"the {split} split is empty: {text.origin} holds no pairs")
            self._texts[split] = text
        return self._texts[split]

    def sources(self, split: str) -> list[str]:
        """Raw source sentences of a validation or test split, in file order."""
        return self.text(split).src

    def references(self, split: str) -> list[str]:
        """Raw target sentences of a validation or test split in file order (``Batch.ids``
        index them)."""
        return self.text(split).tgt

    # -- tokenized splits ------------------------------------------------------------
    def prepare_data(self) -> None:
        """Train the vocabulary and tokenize the training and validation splits into the
        cache once, before the processes of a multi-device run each ``setup`` from it."""
        for split in (self.train_split, self.val_split):
            self.tokenized(split)

    def setup(self, stage: str) -> None:
        splits = {
            "fit": [self.train_split, self.val_split],
            "validate": [self.val_split],
            "test": [self.test_split],
        }.get(stage, [])
        for split in splits:
            self.tokenized(split)

    def tokenized(self, split: str) -> tuple[TokenizedRows, np.ndarray]:
        """Rows ``{"id", "src_ids", "tgt_ids"}`` of ``split`` (the training split filtered)
        and each row's cost in positions, ``max(src, tgt) + 1`` (for the batch sampler)."""
        if split not in self._tokenized:
            self._tokenized[split] = self._tokenize(split)
        return self._tokenized[split]

    def _tokenize(self, split: str) -> tuple[TokenizedRows, np.ndarray]:
        text, vocab = self.text(split), self.vocab
        key = [TOKENS_FORMAT, text.key, vocab.fingerprint]
        fingerprint = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:32]
        cache = self.cache_dir / "tokens"
        num_proc = self.num_proc if len(text) >= PARALLEL_MIN_PAIRS else 1
        rows = load_or_tokenize(text, vocab, cache, fingerprint, num_proc, f"tokenizing {split}")
        src_len, tgt_len = rows.lengths[:, 0], rows.lengths[:, 1]
        lengths = np.maximum(src_len, tgt_len) + 1  # int32: 4 bytes a pair
        if split != self.train_split:
            _report(f"{split}: {len(rows)} pairs")
            return rows, lengths
        keep = self._filter(text.origin, src_len, tgt_len)
        if len(keep) == len(rows):
            return rows, lengths
        return rows.select(keep), lengths[keep]

    def _filter(self, origin: str, src_len: np.ndarray, tgt_len: np.ndarray) -> np.ndarray:
        """Indices of the training pairs to keep: no empty side, at most max_len pieces."""
        empty = (src_len == 0) | (tgt_len == 0)
        too_long = ~empty & ((src_len > self.max_len) | (tgt_len > self.max_len))
        keep = np.flatnonzero(~empty & ~too_long)
        counts = f"{int(empty.sum())} empty, {int(too_long.sum())} over max_len={self.max_len}"
        if not keep.size:
            raise DataError(f"no training pairs left in {origin} ({counts})")
        _report(f"{self.train_split}: kept {keep.size} of {len(src_len)} pairs ({counts})")
        return keep

    # -- loaders ---------------------------------------------------------------------
    def _loader(self, split: str, max_tokens: int, shuffle: bool) -> ResumableLoader:
        """Length-bucketed batches; the training loader can resume in the middle of an epoch."""
        rows: TokenizedRows | SampledSegmentations
        rows, lengths = self.tokenized(split)
        split_pairs = len(rows.lengths)  # the whole split's, before any filter
        spec = self.vocab.spec
        batches = TokenBucketBatchSampler(lengths, max_tokens, shuffle, self.seed)
        sampled = split == self.train_split and self.subword_nbest > 0
        if sampled:
            if not isinstance(self.vocab, Vocabulary):  # fit --init_from refuses it first
                raise UsageError("data.subword_nbest samples seq2seq's own vocabularies only")
            draws = (self.subword_nbest, self.subword_alpha, self.max_len)
            rows = SampledSegmentations(rows, self.vocab, *draws, batches.sampler, self.seed)
        collate_fn: Callable[[Sequence[Mapping[str, Any]]], Batch] = partial(
            collate, pad_id=spec.pad_id, bos_id=spec.bos_id, eos_id=spec.eos_id
        )
        if split == self.train_split and self.train_alignments:
            links = read_training_links(self.train_alignments, split_pairs)
            collate_fn = GuidedCollate(links, self.vocab)
        return ResumableLoader(
            rows,
            batches,
            collate_fn=collate_fn,
            num_workers=self.num_workers,
            fresh_workers=sampled,  # the draws depend on the epoch
            pin_memory=self._to_gpu(),
        )

    def _to_gpu(self) -> bool:
        """Whether batches go to a CUDA device: Lightning copies them there without blocking,
        which runs asynchronously only from page-locked (pinned) memory."""
        return self.trainer is not None and self.trainer.strategy.root_device.type == "cuda"

    def train_dataloader(self) -> ResumableLoader:
        if not self._budget_checked:
            self._budget_checked = True
            self._check_budget()
        return self._loader(self.train_split, self.max_tokens, shuffle=True)

    def _check_budget(self) -> None:
        """Warn (once) when ``max_tokens`` cannot hold the longest pair ``max_len`` allows."""
        longest = self.max_len + 1  # positions: pieces + EOS (or BOS)
        if self.max_tokens >= longest:
            return
        _, lengths = self.tokenized(self.train_split)
        batches = len(cut_batches(np.sort(lengths), self.max_tokens)) - 1
        _report(
            f"data.max_tokens={self.max_tokens} is below the {longest} positions of the "
            f"longest training pair data.max_len={self.max_len} allows: every pair over "
            f"{self.max_tokens} positions is a batch of its own; the {len(lengths)} training "
            f"pairs make {batches} batches of {len(lengths) / batches:.1f} pairs on average",
            logging.WARNING,
        )

    def val_dataloader(self) -> ResumableLoader:
        return self._loader(self.val_split, self.eval_max_tokens, shuffle=False)

    def test_dataloader(self) -> ResumableLoader:
        return self._loader(self.test_split, self.eval_max_tokens, shuffle=False)
