"""Corpus scoring with sacrebleu: BLEU / chrF / TER with signatures, paired bootstrap, and the
Multi30k-literature BLEU (lowercased, Moses-normalized, Moses-tokenized text).

Every result is a plain dict of floats, ints and strings, so it can be printed with ``json.dumps``.
Scores are on sacrebleu's 0-100 scale.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cache
from typing import TypedDict, cast

from sacrebleu.metrics import BLEU, CHRF, TER
from sacrebleu.metrics.base import Metric
from sacrebleu.significance import PairedTest, Result
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from seq2seq.common.errors import DataError, Seq2SeqError

METRICS: dict[str, type[Metric]] = {"bleu": BLEU, "chrf": CHRF, "ter": TER}


class LengthMismatchError(DataError, ValueError):
    """Hypotheses and references do not pair up line by line.

    A ``DataError`` (the CLI reports it in one line) that is also the ``ValueError`` a library
    caller expects for arguments that do not fit together.
    """


class MetricScore(TypedDict):
    """One metric's corpus score and the sacrebleu signature that makes it reproducible."""

    score: float
    signature: str


class BleuScore(MetricScore):
    """BLEU with the parts it is made of: n-gram precisions (1..4, in %) and brevity penalty."""

    precisions: list[float]
    bp: float
    hyp_len: int
    ref_len: int


class SystemBootstrap(TypedDict):
    """A system's BLEU, its bootstrap mean and the half-width of the 95% interval around it."""

    score: float
    mean: float
    ci: float


class PairedBootstrap(TypedDict):
    """Both systems' BLEU with intervals, and the p-value of their difference."""

    a: SystemBootstrap
    b: SystemBootstrap
    p_value: float
    signature: str


def _check_pairs(hyps: Sequence[str], refs: Sequence[str], what: str = "hypotheses") -> None:
    """Raise unless there is one reference per hypothesis and at least one of each."""
    if len(hyps) != len(refs):
        raise LengthMismatchError(
            f"{len(hyps)} {what} but {len(refs)} references: they must pair up line by line"
        )
    if not hyps:
        raise DataError("nothing to score: 0 hypotheses and 0 references")


def _bleu_result(metric: BLEU, hyps: Sequence[str], refs: Sequence[str]) -> BleuScore:
    """Corpus BLEU of ``hyps`` against one reference each, with its details."""
    result = metric.corpus_score(list(hyps), [list(refs)])
    return BleuScore(
        score=float(result.score),
        signature=str(metric.get_signature()),
        precisions=[float(p) for p in result.precisions],
        bp=float(result.bp),
        hyp_len=int(result.sys_len),
        ref_len=int(result.ref_len),
    )


def score_corpus(
    hyps: Sequence[str], refs: Sequence[str], metrics: Sequence[str] = ("bleu", "chrf")
) -> dict[str, MetricScore]:
    """Score detokenized hypotheses against one detokenized reference each.

    ``metrics`` picks from ``METRICS`` (``bleu``, ``chrf``, ``ter``); each uses sacrebleu's
    defaults (BLEU: cased, 13a tokenization). Returns ``{name: {"score", "signature", ...}}``;
    the BLEU entry adds ``precisions``, ``bp``, ``hyp_len`` and ``ref_len``.
    """
    unknown = [name for name in metrics if name not in METRICS]
    if unknown:
        raise Seq2SeqError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    _check_pairs(hyps, refs)
    scores: dict[str, MetricScore] = {}
    for name in metrics:
        metric = METRICS[name]()
        if isinstance(metric, BLEU):
            scores[name] = _bleu_result(metric, hyps, refs)
        else:
            result = metric.corpus_score(list(hyps), [list(refs)])
            scores[name] = MetricScore(
                score=float(result.score), signature=str(metric.get_signature())
            )
    return scores


@cache
def _moses(lang: str) -> tuple[MosesPunctNormalizer, MosesTokenizer]:
    """The (slow to build) Moses normalizer and tokenizer for ``lang``, built once per language.

    ``perl_parity`` keeps normalize-punctuation.perl's quirks that the Multi30k references carry,
    e.g. a right single quote not between two ASCII letters becomes ``"`` (``d’œil``).
    """
    return MosesPunctNormalizer(lang=lang, perl_parity=True), MosesTokenizer(lang=lang)


def literature_tokenize(line: str, lang: str) -> str:
    """Lowercase, Moses-normalize punctuation, Moses-tokenize with XML escaping (``&apos;``).

    Reproduces the Multi30k ``*.lc.norm.tok.*`` references, i.e.
    ``lowercase | normalize-punctuation.perl -l L | tokenizer.perl -l L``, tokens joined by
    single spaces. The newline appended before normalizing stands in for the one Perl keeps
    on each line: some rules only fire before it, e.g. German/French ``tea."`` -> ``tea".``.
    """
    normalizer, tokenizer = _moses(lang)
    normalized = normalizer.normalize(line.rstrip("\n").lower() + "\n")
    return tokenizer.tokenize(normalized, return_str=True, escape=True)


def literature_metric() -> BLEU:
    """sacrebleu's BLEU for ``literature_tokenize``d lines: it does not tokenize again, and its
    signature says so (``case:lc|tok:none``)."""
    # force: the text is tokenized on purpose, so sacrebleu's "forgot to detokenize?"
    # warning (lines ending in " .") would be noise
    return BLEU(tokenize="none", lowercase=True, force=True)


def literature_bleu(hyps: Sequence[str], refs: Sequence[str], lang: str) -> BleuScore:
    """BLEU as the Multi30k literature reports it: on ``literature_tokenize``d text.

    Both ``hyps`` and ``refs`` are raw (detokenized, cased) lines.
    """
    _check_pairs(hyps, refs)
    return _bleu_result(
        literature_metric(),
        [literature_tokenize(line, lang) for line in hyps],
        [literature_tokenize(line, lang) for line in refs],
    )


def join_subword_nmt(line: str) -> str:
    """A line of subword-nmt pieces (``@@`` ending a piece its word goes on after) as the
    tokens they cut: ``baum@@ wo@@ lle .`` -> ``baumwolle .``."""
    return line.replace("@@ ", "").removesuffix("@@")


def score_translations(
    hyps: Sequence[str], refs: Sequence[str], lang: str | None, remove_bpe: bool = False
) -> dict[str, MetricScore]:
    """What ``seq2seq evaluate`` reports: sacreBLEU and chrF, and the literature's BLEU when
    the target language ``lang`` is known.

    ``remove_bpe``: both sides are subword-nmt pieces of text tokenized as the literature
    tokenizes it (a corpus cut as fairseq's Multi30k baseline cut its own): they are joined
    into tokens first, and the literature's BLEU takes those tokens as they are, which is
    how fairseq scores that baseline; sacreBLEU and chrF then score the tokens too.
    """
    if remove_bpe:
        hyps, refs = [join_subword_nmt(h) for h in hyps], [join_subword_nmt(r) for r in refs]
    scores = score_corpus(hyps, refs)
    if remove_bpe:
        scores["bleu_literature"] = _bleu_result(literature_metric(), hyps, refs)
    elif lang:
        scores["bleu_literature"] = literature_bleu(hyps, refs, lang)
    return scores


@contextmanager
def _sacrebleu_seed(seed: int) -> Iterator[None]:
    """Set the seed of sacrebleu's significance tests, which read it only from the environment."""
    previous = os.environ.get("SACREBLEU_SEED")
    os.environ["SACREBLEU_SEED"] = str(seed)
    try:
        yield
    finally:
        if previous is None:
            del os.environ["SACREBLEU_SEED"]
        else:
            os.environ["SACREBLEU_SEED"] = previous


def paired_bootstrap(
    hyps_a: Sequence[str],
    hyps_b: Sequence[str],
    refs: Sequence[str],
    n_samples: int = 1000,
    seed: int = 12345,
    literature_lang: str | None = None,
) -> PairedBootstrap:
    """Paired bootstrap resampling (Koehn 2004) of corpus BLEU, as ``sacrebleu --paired-bs``.

    Both systems are scored on the same ``n_samples`` resamples of the test set; ``ci`` is the
    half-width of each system's 95% interval and ``p_value`` that of the BLEU difference
    (system ``a`` is sacrebleu's baseline). ``seed`` must be positive: sacrebleu treats 0 as
    "unseeded". BLEU is sacreBLEU's default, or with ``literature_lang`` the literature's
    (``literature_bleu``), which a model trained on lowercased text needs.
    """
    if n_samples < 1 or seed < 1:
        raise Seq2SeqError(f"n_samples and seed must be positive, got {n_samples} and {seed}")
    _check_pairs(hyps_a, refs, "hypotheses from system a")
    _check_pairs(hyps_b, refs, "hypotheses from system b")
    metric = BLEU() if literature_lang is None else literature_metric()

    def lines(texts: Sequence[str]) -> list[str]:
        """``texts`` as ``metric`` reads them."""
        if literature_lang is None:
            return list(texts)
        return [literature_tokenize(text, literature_lang) for text in texts]

    with _sacrebleu_seed(seed):
        test = PairedTest(
            [("a", lines(hyps_a)), ("b", lines(hyps_b))],
            {"BLEU": metric},
            [lines(refs)],
            test_type="bs",
            n_samples=n_samples,
        )
        signatures, results = test()
    # a metric's column holds Results; only the "System" column holds names (str)
    result_a, result_b = cast("list[Result]", results["BLEU"])
    assert result_b.p_value is not None  # a system compared with the baseline has one
    # sacrebleu counts resampled differences strictly above the real one, so two identical
    # systems (every difference 0) would get the smallest p-value, 1 / (n_samples + 1).
    p_value = 1.0 if list(hyps_a) == list(hyps_b) else float(result_b.p_value)
    return PairedBootstrap(
        a=_system_bootstrap(result_a),
        b=_system_bootstrap(result_b),
        p_value=p_value,
        signature=str(signatures["BLEU"]),
    )


def _system_bootstrap(result: Result) -> SystemBootstrap:
    """A system's BLEU in a paired bootstrap test, which gives each its mean and interval."""
    assert result.mean is not None and result.ci is not None
    return SystemBootstrap(score=float(result.score), mean=float(result.mean), ci=float(result.ci))
