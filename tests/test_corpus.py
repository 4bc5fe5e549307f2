"""The embedded corpus: determinism, disjoint aligned splits, real reordering, languages."""

from __future__ import annotations

from pathlib import Path

import pytest
from babel.dates import get_month_names
from num2words import num2words

from seq2seq.common.errors import Seq2SeqError
from seq2seq.inspection.word_alignments import parse_gold_line, read_gold, score_alignments
from seq2seq.text import demo_corpus
from seq2seq.text.demo_corpus import (
    DEFAULT_SIZES,
    CorpusSettingError,
    Kind,
    generate_pairs,
    write_corpus,
)

SMALL = {"train": 300, "val": 40, "test": 40}


def read_lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split("\n")[:-1]  # every line ends with "\n"


def month_names(lang: str) -> dict[int, str]:
    return dict(get_month_names("wide", locale=lang).items())


@pytest.fixture(scope="module")
def default_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("corpus") / "numbers-en-de"
    write_corpus(out)
    return out


def test_default_corpus_has_aligned_splits_of_the_default_sizes(default_corpus: Path) -> None:
    assert sorted(p.name for p in default_corpus.iterdir()) == sorted(
        f"{split}.{suffix}" for split in DEFAULT_SIZES for suffix in ("en", "de", "align")
    )
    for split, size in DEFAULT_SIZES.items():
        for lang in ("en", "de", "align"):
            lines = read_lines(default_corpus / f"{split}.{lang}")
            assert len(lines) == size
            assert all(line.strip() and line == line.strip() for line in lines)


def test_default_corpus_splits_are_disjoint(default_corpus: Path) -> None:
    sources = {split: set(read_lines(default_corpus / f"{split}.en")) for split in DEFAULT_SIZES}
    for split, size in DEFAULT_SIZES.items():
        assert len(sources[split]) == size  # no repeats inside a split either
    assert not sources["train"] & sources["val"]
    assert not sources["train"] & sources["test"]
    assert not sources["val"] & sources["test"]


def test_english_sentences_are_short(default_corpus: Path) -> None:
    lengths = [len(line.split()) for line in read_lines(default_corpus / "train.en")]
    assert min(lengths) >= 1 and max(lengths) <= 15


def test_same_seed_same_files_other_seed_other_files(tmp_path: Path) -> None:
    first = write_corpus(tmp_path / "a", seed=7, sizes=SMALL)
    again = write_corpus(tmp_path / "b", seed=7, sizes=SMALL)
    other = write_corpus(tmp_path / "c", seed=8, sizes=SMALL)
    assert list(first) == list(again) == list(other)
    assert all(first[name].read_bytes() == again[name].read_bytes() for name in first)
    assert first["train.en"].read_bytes() != other["train.en"].read_bytes()


def test_generate_pairs_gives_n_distinct_sources_deterministically() -> None:
    pairs = generate_pairs(500, seed=3)
    assert len(pairs) == 500
    assert len({src for src, _ in pairs}) == 500
    assert generate_pairs(500, seed=3) == pairs
    assert generate_pairs(0, seed=3) == []


def test_german_says_units_before_tens() -> None:
    """For n = 10a + b (a >= 2, b >= 1) English says a's word first, German b's word first."""
    two_digit = {num2words(n, lang="en"): n for n in range(21, 100) if n % 10}
    found = [(src, tgt) for src, tgt in generate_pairs(3000, seed=5) if src in two_digit]
    assert len(found) >= 5
    for src, tgt in found:
        tens, units = divmod(two_digit[src], 10)
        en_tens, en_units = num2words(10 * tens, lang="en"), num2words(units, lang="en")
        de_tens, de_units = num2words(10 * tens, lang="de"), num2words(units, lang="de")
        de_units = "ein" if units == 1 else de_units  # "eins" is "ein" inside a compound
        assert src.split("-") == [en_tens, en_units]
        assert tgt.startswith(de_units) and tgt.endswith(de_tens), (src, tgt)
        assert len(tgt) > len(de_units) + len(de_tens)  # "und" between them


@pytest.mark.parametrize("tgt_lang", ["de", "fr"])
def test_dates_carry_the_month_names_of_the_target_language(tgt_lang: str) -> None:
    en_months, tgt_months = month_names("en"), month_names(tgt_lang)
    dated = 0
    for src, tgt in generate_pairs(1000, seed=11, tgt_lang=tgt_lang):
        months = [m for m, name in en_months.items() if name in src.split(" ")]
        if not months:
            continue
        dated += 1
        (month,) = months
        assert tgt_months[month] in tgt.split(" "), (src, tgt)
        assert en_months[month] not in tgt.split(" ") or en_months[month] == tgt_months[month]
    assert dated >= 100


def test_german_puts_the_day_before_the_month() -> None:
    en_months, de_months = month_names("en"), month_names("de")
    checked = 0
    for src, tgt in generate_pairs(500, seed=2):
        words = src.replace(",", "").split(" ")
        for month, name in en_months.items():
            if name in words and words.index(name) + 1 < len(words):
                day = words[words.index(name) + 1]  # "March 21, 2021"
                if day.isdigit():
                    assert f"{day}. {de_months[month]}" in tgt, (src, tgt)
                    checked += 1
    assert checked >= 50


def test_french_corpus(tmp_path: Path) -> None:
    paths = write_corpus(tmp_path / "fr", sizes={"train": 50, "test": 20}, tgt_lang="fr")
    assert sorted(paths) == [
        "test.align",
        "test.en",
        "test.fr",
        "train.align",
        "train.en",
        "train.fr",
    ]
    assert len(read_lines(paths["train.fr"])) == len(read_lines(paths["train.en"])) == 50
    fr_pairs = generate_pairs(300, seed=1, tgt_lang="fr")
    de_pairs = generate_pairs(300, seed=1, tgt_lang="de")
    assert [src for src, _ in fr_pairs] == [src for src, _ in de_pairs]  # same meanings
    assert all(fr != de for (_, fr), (_, de) in zip(fr_pairs, de_pairs, strict=True))


def test_french_ordinals_drop_the_plural_s(monkeypatch: pytest.MonkeyPatch) -> None:
    ordinal = demo_corpus.KINDS[1]
    numbers = Kind(1, lambda rng: rng.choice([80, 200, 280]), ordinal.say, ordinal.roles)
    monkeypatch.setattr(demo_corpus, "KINDS", (numbers,))
    assert sorted(tgt for _, tgt in generate_pairs(3, seed=1, tgt_lang="fr")) == [
        "deux cent quatre-vingtième",
        "deux centième",
        "quatre-vingtième",
    ]


@pytest.mark.parametrize(("src", "tgt"), [("en", "xx"), ("klingon", "de"), ("en", "en")])
def test_unsupported_languages_raise_value_error(src: str, tgt: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="language"):
        generate_pairs(10, seed=1, src_lang=src, tgt_lang=tgt)
    with pytest.raises(Seq2SeqError):  # the CLI prints it as one line
        write_corpus(tmp_path / "out", sizes=SMALL, src_lang=src, tgt_lang=tgt)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("sizes", "message"),
    [({}, "at least one split"), ({"train": 0}, "at least one pair"), ({"../x": 5}, "plain")],
)
def test_bad_sizes_raise(sizes: dict[str, int], message: str, tmp_path: Path) -> None:
    with pytest.raises(CorpusSettingError, match=message):
        write_corpus(tmp_path / "out", sizes=sizes)


def test_impossible_number_of_distinct_pairs_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    tiny = Kind(
        1,
        lambda rng: rng.randrange(3),
        lambda n, lang: num2words(n, lang=lang),
        demo_corpus.KINDS[0].roles,
    )
    monkeypatch.setattr(demo_corpus, "KINDS", (tiny,))
    assert len(generate_pairs(3, seed=1)) == 3
    with pytest.raises(CorpusSettingError, match="distinct"):
        generate_pairs(4, seed=1)


def test_existing_corpus_is_kept_unless_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "corpus"
    write_corpus(out, seed=1, sizes=SMALL)
    before = (out / "train.de").read_bytes()
    with pytest.raises(CorpusSettingError, match="not empty"):
        write_corpus(out, seed=2, sizes=SMALL)
    assert (out / "train.de").read_bytes() == before
    write_corpus(out, seed=2, sizes={"train": 10}, overwrite=True)
    assert sorted(p.name for p in out.iterdir()) == ["train.align", "train.de", "train.en"]
    assert [p.name for p in tmp_path.iterdir()] == ["corpus"]  # no leftovers beside it


def test_an_interrupted_write_leaves_nothing_that_looks_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written: list[Path] = []

    def write_then_fail(path: Path, lines: list[str]) -> None:
        if written:
            raise KeyboardInterrupt
        written.append(path)
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    monkeypatch.setattr(demo_corpus, "_write_lines", write_then_fail)
    with pytest.raises(KeyboardInterrupt):
        write_corpus(tmp_path / "corpus", sizes=SMALL)
    assert written  # the first file was written before the interruption
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("tgt_lang", ["de", "fr"])
def test_gold_links_join_the_words_that_say_the_same_thing(tgt_lang: str) -> None:
    pairs = demo_corpus.generate_aligned(400, seed=2, tgt_lang=tgt_lang)
    for src, tgt, gold in pairs:
        alignment = parse_gold_line(gold)
        src_words, tgt_words = src.split(), tgt.split()
        assert alignment.possible, (src, tgt, gold)  # every pair says a number or date
        for i, j in alignment.possible:
            assert i < len(src_words) and j < len(tgt_words), (src, tgt, gold)
        for i, j in alignment.sure:  # digits of a date only ever link to the same digits
            if src_words[i].strip(",.").isdigit() or tgt_words[j].strip(",.").isdigit():
                assert src_words[i].strip(",.") == tgt_words[j].strip(",."), (src, tgt, gold)
    long_dates = [(s, t, g) for s, t, g in pairs if s[0].isupper() and s.count(",") == 2]
    assert long_dates
    for src, tgt, gold in long_dates:  # "Sunday, March 21, 2021": weekday, month, day, year
        weekday, month, day, year = src.split()
        links = parse_gold_line(gold).sure
        tgt_words = [w.strip(",.") for w in tgt.split()]
        assert (2, tgt_words.index(day.strip(","))) in links
        assert (3, tgt_words.index(year)) in links
        assert {i for i, _ in links} == {0, 1, 2, 3}


def test_gold_links_score_an_aer_of_0_against_themselves(tmp_path: Path) -> None:
    paths = write_corpus(tmp_path / "corpus", seed=4, sizes={"test": 200})
    gold = read_gold(paths["test.align"])
    assert len(gold) == 200
    perfect = score_alignments(gold, [set(g.sure) for g in gold])
    assert perfect.aer == 0.0
    everything = [set(g.possible) for g in gold]  # possible links cost precision nothing
    assert score_alignments(gold, everything).precision == 1.0
