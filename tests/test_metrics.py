"""Tests for seq2seq.text.metrics: sacrebleu scores, literature tokenization, paired bootstrap."""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
from pathlib import Path

import pytest
import sacrebleu

from seq2seq.common.errors import DataError, Seq2SeqError
from seq2seq.text.metrics import (
    join_subword_nmt,
    literature_bleu,
    literature_tokenize,
    paired_bootstrap,
    score_corpus,
    score_translations,
)

REFS = [
    "A man in a blue shirt is standing on a ladder.",
    "Two dogs are playing with a red ball in the grass.",
    "The children's choir sings on stage.",
]


def test_identical_hypotheses_score_perfectly() -> None:
    scores = score_corpus(REFS, REFS, ("bleu", "chrf", "ter"))
    assert scores["bleu"]["score"] == pytest.approx(100.0)
    assert scores["bleu"]["precisions"] == pytest.approx([100.0] * 4)
    assert scores["bleu"]["bp"] == pytest.approx(1.0)
    assert scores["bleu"]["hyp_len"] == scores["bleu"]["ref_len"]
    assert scores["chrf"]["score"] == pytest.approx(100.0)
    assert scores["ter"]["score"] == pytest.approx(0.0)


def test_bleu_from_hand_counted_ngrams() -> None:
    hyps = ["the cat sat on the mat", "the cat sat on the"]
    refs = ["the cat sat on a mat", "the cat sat on a mat"]
    # Clipped n-gram matches / hypothesis n-grams, summed over both sentences (corpus level):
    # 1-grams: (the, cat, sat, on, mat) 5/6 + (the, cat, sat, on) 4/5; "the" is clipped to 1.
    # 2-grams: (the cat, cat sat, sat on) 3/5 + 3/4.  3-grams: 2/4 + 2/3.  4-grams: 1/3 + 1/2.
    matches, totals = [9, 6, 4, 2], [11, 9, 7, 5]
    hyp_len, ref_len = 11, 12
    brevity = math.exp(1 - ref_len / hyp_len)
    expected = (
        100
        * brevity
        * math.exp(sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / 4)
    )

    bleu = score_corpus(hyps, refs, ("bleu",))["bleu"]

    assert bleu["score"] == pytest.approx(expected)
    assert bleu["precisions"] == pytest.approx(
        [100 * m / t for m, t in zip(matches, totals, strict=True)]
    )
    assert bleu["bp"] == pytest.approx(brevity)
    assert (bleu["hyp_len"], bleu["ref_len"]) == (hyp_len, ref_len)


def test_scores_match_sacrebleu_and_carry_signatures() -> None:
    hyps = ["A man in a shirt stands on a ladder.", "Two dogs play in the grass.", "Kids sing."]
    scores = score_corpus(hyps, REFS, ("bleu", "chrf", "ter"))

    assert scores["bleu"]["score"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [REFS]).score)
    assert scores["chrf"]["score"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [REFS]).score)
    assert scores["ter"]["score"] == pytest.approx(sacrebleu.corpus_ter(hyps, [REFS]).score)
    assert "tok:13a" in scores["bleu"]["signature"]
    assert "case:mixed" in scores["bleu"]["signature"]
    assert "nc:6" in scores["chrf"]["signature"]
    assert "tok:tercom" in scores["ter"]["signature"]
    assert json.loads(json.dumps(scores)) == scores


def test_default_metrics_are_bleu_and_chrf() -> None:
    assert set(score_corpus(REFS, REFS)) == {"bleu", "chrf"}


def test_mismatched_counts_name_both() -> None:
    with pytest.raises(ValueError, match="3 hypotheses but 2 references"):
        score_corpus(REFS, REFS[:2])
    with pytest.raises(DataError, match="3 hypotheses but 2 references"):
        literature_bleu(REFS, REFS[:2], "en")


def test_empty_corpus_and_unknown_metric_are_user_errors() -> None:
    with pytest.raises(DataError, match="nothing to score"):
        score_corpus([], [])
    with pytest.raises(Seq2SeqError, match="unknown metric 'meteor'"):
        score_corpus(REFS, REFS, ("bleu", "meteor"))


@pytest.mark.parametrize(
    ("line", "lang", "expected"),
    [
        ("Don't panic!", "en", "don &apos;t panic !"),
        ("He wasn’t there.", "en", "he wasn &apos;t there ."),
        ("Fish & chips <3", "en", "fish &amp; chips &lt; 3"),
        (
            'A "T-shirt" costs 5,000 dollars...',
            "en",
            "a &quot; t-shirt &quot; costs 5,000 dollars ...",
        ),
        ("L'homme regarde l'océan.", "fr", "l&apos; homme regarde l&apos; océan ."),
        ("Il dit « bonjour ».", "fr", "il dit &quot; bonjour &quot; ."),
        # normalize-punctuation.perl turns a right single quote that is not between two ASCII
        # letters into a double quote; the Multi30k references keep that quirk.
        ("Un coup d’œil.", "fr", "un coup d &quot; œil ."),
        ("Er sagt: „Hallo“.", "de", "er sagt : &quot; hallo &quot; ."),
        # Perl sees the line's newline, so a final ." becomes ". as in the references.
        ("Ein Schild: „Tee.“", "de", "ein schild : &quot; tee &quot; ."),
        ("Muž, který (asi) spí.", "cs", "muž , který ( asi ) spí ."),
    ],
)
def test_literature_tokenize(line: str, lang: str, expected: str) -> None:
    assert literature_tokenize(line, lang) == expected


def test_literature_bleu_scores_the_tokens_without_retokenizing() -> None:
    hyps = ["A man's hat is RED.", "Two dogs play."]
    refs = ["a man's hat is red.", "Two dogs are playing."]
    tokens_h = [literature_tokenize(line, "en") for line in hyps]
    tokens_r = [literature_tokenize(line, "en") for line in refs]
    expected = sacrebleu.corpus_bleu(tokens_h, [tokens_r], tokenize="none").score

    bleu = literature_bleu(hyps, refs, "en")

    assert bleu["score"] == pytest.approx(expected)
    assert "tok:none" in bleu["signature"]
    assert literature_bleu(hyps[:1], refs[:1], "en")["score"] == pytest.approx(100.0)


def test_literature_bleu_does_not_warn_that_its_tokens_look_tokenized(caplog) -> None:
    lines = [f"Dog number {i} runs." for i in range(150)]  # tokenized: "... runs ."
    with caplog.at_level(logging.WARNING, logger="sacrebleu"):
        literature_bleu(lines, lines, "en")
    assert not [r for r in caplog.records if r.name.startswith("sacrebleu")]


def test_subword_nmt_pieces_join_into_their_tokens() -> None:
    assert join_subword_nmt("baum@@ wo@@ lle auf &quot; x@@") == "baumwolle auf &quot; x"
    assert join_subword_nmt("ein mann .") == "ein mann ."


def test_translations_in_subword_nmt_pieces_score_as_their_joined_tokens() -> None:
    """--remove-bpe: pieces joined on both sides, then the literature's BLEU of those tokens,
    not tokenized again (which would cut the escapes: ``&quot;`` -> ``&amp; quot ;``), so a
    translation cut otherwise than its reference still scores 100; without it the pieces
    themselves are scored."""
    raw = ['Ein Mann sagt: "Baumwolle!"', "Zwei Hunde."]
    refs = ["ein mann sagt : &quot; baum@@ wo@@ lle ! &quot;", "zwei hun@@ de ."]
    assert [join_subword_nmt(r) for r in refs] == [literature_tokenize(r, "de") for r in raw]
    hyps = ["ein mann sagt : &quot; baumwo@@ lle ! &quot;", "zwei hunde ."]
    joined = score_translations(hyps, refs, "de", remove_bpe=True)
    assert joined["bleu_literature"]["score"] == pytest.approx(100.0)
    assert set(joined) == {"bleu", "chrf", "bleu_literature"}
    wrong = ["ein hund sagt : &quot; baumwolle &quot;", "zwei hunde ."]
    expected = sacrebleu.corpus_bleu(
        [join_subword_nmt(h) for h in wrong], [[join_subword_nmt(r) for r in refs]],
        tokenize="none", lowercase=True,
    )  # fmt: skip
    assert "&amp; quot ;" in literature_tokenize(wrong[0], "de")  # what it must not score
    scored = score_translations(wrong, refs, "de", remove_bpe=True)["bleu_literature"]
    assert scored["score"] == pytest.approx(expected.score)
    assert score_translations(hyps, refs, "de")["bleu_literature"]["score"] < 100.0
    assert score_translations(hyps, refs, None) == score_corpus(hyps, refs)


def _read_lines(path: Path) -> list[str]:
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


@pytest.mark.parametrize("lang", ["en", "de", "fr", "cs"])
@pytest.mark.parametrize("split", ["val", "test_2016_flickr"])
def test_literature_tokenize_reproduces_multi30k_references(
    multi30k_dir: Path, split: str, lang: str
) -> None:
    raw = _read_lines(multi30k_dir / f"{split}.{lang}.gz")
    refs = _read_lines(multi30k_dir / "tok" / f"{split}.lc.norm.tok.{lang}.gz")
    assert len(raw) == len(refs) > 0

    diffs = [
        (i, ours, ref)
        for i, (line, ref) in enumerate(zip(raw, refs, strict=True))
        if (ours := literature_tokenize(line, lang)) != ref
    ]

    rate = len(diffs) / len(raw)
    shown = "\n".join(f"line {i + 1}:\n  ours: {ours}\n  ref:  {ref}" for i, ours, ref in diffs[:2])
    assert rate <= 0.001, (
        f"{split}.{lang}: {len(diffs)}/{len(raw)} lines differ ({rate:.2%})\n{shown}"
    )


def _synthetic_refs(n: int = 300) -> list[str]:
    """Distinct six-word sentences, so any n-gram of a reference occurs in no other."""
    return [f"s{i} a{i % 7} b{i % 11} c{i % 13} d{i % 17} e{i}" for i in range(n)]


GARBLED = "q q q q q q"  # as long as a reference, sharing no word with any


def test_paired_bootstrap_finds_a_clearly_better_system() -> None:
    refs = _synthetic_refs()
    half_garbled = [ref if i % 2 else GARBLED for i, ref in enumerate(refs)]

    result = paired_bootstrap(refs, half_garbled, refs, n_samples=200)

    assert result["p_value"] < 0.05
    assert result["a"]["score"] == pytest.approx(100.0)
    assert result["a"]["ci"] == pytest.approx(0.0)
    assert 0 < result["b"]["score"] < result["a"]["score"]
    assert result["b"]["ci"] > 0
    assert "bs:200" in result["signature"]
    assert json.loads(json.dumps(result)) == result


def test_paired_bootstrap_sees_no_difference_between_equal_systems() -> None:
    refs = _synthetic_refs()
    odd_right = [ref if i % 2 else GARBLED for i, ref in enumerate(refs)]
    even_right = [GARBLED if i % 2 else ref for i, ref in enumerate(refs)]

    identical = paired_bootstrap(odd_right, odd_right, refs, n_samples=200)
    # Same corpus BLEU from different sentences: resampling does tell them apart, but only by
    # chance, so the real difference (0) is no evidence either way.
    mirrored = paired_bootstrap(odd_right, even_right, refs, n_samples=200)

    assert identical["p_value"] == 1.0
    assert identical["a"] == identical["b"]
    assert mirrored["a"]["score"] == pytest.approx(mirrored["b"]["score"])
    assert mirrored["p_value"] > 0.05


def test_paired_bootstrap_with_literature_lang_scores_literature_bleu() -> None:
    """A system trained on lowercased text is compared on the literature's BLEU: case and
    Moses tokens do not count against it, and its score is ``literature_bleu``'s."""
    refs = [f"The cat{i}, a dog{i % 5} and Bird{i % 7}." for i in range(60)]
    lowercased = [ref.lower() for ref in refs]
    half_garbled = [ref if i % 2 else GARBLED for i, ref in enumerate(refs)]

    literature = paired_bootstrap(lowercased, half_garbled, refs, 100, literature_lang="en")
    cased = paired_bootstrap(lowercased, half_garbled, refs, 100)

    assert literature["a"]["score"] == pytest.approx(100.0)
    assert literature["b"]["score"] == pytest.approx(
        literature_bleu(half_garbled, refs, "en")["score"]
    )
    assert literature["p_value"] < 0.05
    assert "case:lc" in literature["signature"] and "tok:none" in literature["signature"]
    assert cased["a"]["score"] < 100.0  # cased sacreBLEU holds the lowercase against it


def test_paired_bootstrap_is_reproducible_and_checks_its_inputs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refs = _synthetic_refs(50)
    hyps = [ref if i % 3 else GARBLED for i, ref in enumerate(refs)]
    monkeypatch.setenv("SACREBLEU_SEED", "99")

    first = paired_bootstrap(hyps, refs, refs, n_samples=50, seed=7)

    assert first == paired_bootstrap(hyps, refs, refs, n_samples=50, seed=7)
    assert "seed:7" in first["signature"]
    assert os.environ["SACREBLEU_SEED"] == "99"  # the seed is set only for the call
    with pytest.raises(ValueError, match="49 hypotheses from system b but 50 references"):
        paired_bootstrap(hyps, hyps[:-1], refs)
    with pytest.raises(Seq2SeqError, match="must be positive"):
        paired_bootstrap(hyps, hyps, refs, seed=0)
