"""The embedded demo corpus: numbers and dates written out in English, German and French.

Every sentence states one number or date, rendered into each language by the libraries
made for that: `num2words` spells numbers ("forty-two" / "zweiundvierzig" /
"quarante-deux") and Babel formats dates with each locale's own CLDR patterns and month
and weekday names ("Sunday, March 21, 2021" / "Sonntag, 21. März 2021"). The corpus
needs no download, is deterministic for a seed, and is small enough to learn in minutes.

It is built to make attention worth looking at, because the languages disagree on order:
German says the units before the tens ("two-and-forty"), so inside each compound the
alignment runs backwards; German and French put the day before the month where English
puts it after; and the ordinal "twenty-first" of an English date becomes a dative
"einundzwanzigsten" in German and a cardinal "vingt et un" in French.

Sentence kinds: cardinals, ordinals, "in the year ...", full dates, long dates, "on
<weekday>, <date>", and spoken days of the month ("on the first of March").

Gold word alignments come with it (``{split}.align``, one line per pair): the generator
knows what each word says (the weekday, the day, the month, the year, a number, or a
function word), so a source word links to each target word saying the same thing. A link
is sure when one side says it in one word ("forty-two" / "zweiundvierzig"), possible
when both use several ("cent vingt-trois" / "one hundred and twenty-three"), and function
words ("on" / "am", "dem") link to each other as possible. ``seq2seq align-score`` reads
the file as it is, to score a model's alignments by AER.
"""

from __future__ import annotations

import datetime
import functools
import random
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple

from babel.dates import format_date
from num2words import num2words

from seq2seq.common.errors import Seq2SeqError


# A pair spells its number or date once to say it and again to give each of its words a
# role, in each language: the spellings of the last few meanings are kept.
@functools.lru_cache(maxsize=4096)
def spelled_number(number: int, lang: str, to: str = "cardinal") -> str:
    """``num2words``'s spelling of ``number`` (``to``: cardinal, ordinal, year), kept."""
    return num2words(number, lang=lang, to=to)


@functools.lru_cache(maxsize=4096)
def formatted_date(day: datetime.date, pattern: str, lang: str) -> str:
    """Babel's ``format_date`` of ``day`` in ``lang`` (``pattern``: full, long, a CLDR
    pattern), kept."""
    return format_date(day, pattern, locale=lang)


LANGUAGES = ("en", "de", "fr")
DEFAULT_SIZES: Mapping[str, int] = MappingProxyType({"train": 20000, "val": 500, "test": 500})

FIRST_DATE = datetime.date(1900, 1, 1)
LAST_DATE = datetime.date(2099, 12, 31)
LEAP_YEAR = 2000  # days of the month are drawn from a leap year so that 29 February occurs


class CorpusSettingError(Seq2SeqError, ValueError):
    """An impossible setting for the embedded corpus (language, split name or size)."""


class Phrasing(NamedTuple):
    """The words of one language around a number or date, which the libraries do not give.

    in_year: template for a year written out; on_date: a Babel pattern for "on <weekday>,
    <date>"; day_of_month: template for a spoken day and month; day: the spoken day (1-31).
    """

    in_year: str
    on_date: str
    day_of_month: str
    day: Callable[[int], str]


PHRASINGS: Mapping[str, Phrasing] = MappingProxyType(
    {
        "en": Phrasing(
            in_year="in the year {}",
            on_date="'on' EEEE, MMMM d, y",
            day_of_month="on the {day} of {month}",
            day=lambda d: spelled_number(d, lang="en", to="ordinal"),
        ),
        # "am" takes the dative: "am Sonntag, dem 21. März", "am einundzwanzigsten März".
        "de": Phrasing(
            in_year="im Jahr {}",
            on_date="'am' EEEE, 'dem' d. MMMM y",
            day_of_month="am {day} {month}",
            day=lambda d: spelled_number(d, lang="de", to="ordinal") + "n",
        ),
        # French names days by cardinals except the first: "le premier mars", "le deux mars".
        "fr": Phrasing(
            in_year="en l'an {}",
            on_date="'le' EEEE d MMMM y",
            day_of_month="le {day} {month}",
            day=lambda d: spelled_number(d, lang="fr", to="ordinal" if d == 1 else "cardinal"),
        ),
    }
)


def _ordinal(n: int, lang: str) -> str:
    """num2words' ordinal; its French keeps the plural s of "quatre-vingts" and "deux
    cents" before -ième ("quatre-vingtsième"), which French drops ("quatre-vingtième")."""
    word = spelled_number(n, lang=lang, to="ordinal")
    return word.replace("tsième", "tième") if lang == "fr" else word


def _sample_number(rng: random.Random, low: int) -> int:
    """A number of 1 to 6 digits (at least ``low``), mostly 2 to 4 digits long."""
    digits = rng.choices((1, 2, 3, 4, 5, 6), weights=(1, 3, 3, 3, 1, 1))[0]
    return rng.randrange(max(low, 10 ** (digits - 1) if digits > 1 else 0), 10**digits)


def _sample_date(rng: random.Random) -> datetime.date:
    """A day between 1900 and 2099."""
    return FIRST_DATE + datetime.timedelta(days=rng.randrange((LAST_DATE - FIRST_DATE).days + 1))


def _sample_day(rng: random.Random) -> datetime.date:
    """A day of a leap year (only its day and month are spoken)."""
    return datetime.date(LEAP_YEAR, 1, 1) + datetime.timedelta(days=rng.randrange(366))


class Kind(NamedTuple):
    """One kind of sentence: how often it is drawn, how its meaning (a number or a date) is
    drawn, how a meaning is said in a language, and what each of its words says
    (``roles``: one role per whitespace-separated word of what ``say`` gives)."""

    weight: int
    sample: Callable[[random.Random], Any]
    say: Callable[[Any, str], str]
    roles: Callable[[Any, str], list[str]]


FUNCTION_WORD = "function"
YEAR_NOUNS = frozenset({"year", "Jahr", "l'an"})  # "in the year", "im Jahr", "en l'an"


def _number_roles(n: int, lang: str) -> list[str]:
    return ["number"] * len(spelled_number(n, lang=lang).split())


def _ordinal_roles(n: int, lang: str) -> list[str]:
    return ["number"] * len(_ordinal(n, lang).split())


def _year_roles(year: int, lang: str) -> list[str]:
    spelled = len(spelled_number(year, lang=lang, to="year").split())
    words = _say_year(year, lang).split()
    frame = ["noun" if word in YEAR_NOUNS else FUNCTION_WORD for word in words[:-spelled]]
    return frame + ["year"] * spelled


def _date_roles(
    day: datetime.date, text: str, lang: str, spoken_day: str | None = None
) -> list[str]:
    """Each word of a date's ``text``: its weekday, day (digits, or the ``spoken_day``'s
    words), month or year, else a function word."""
    names = {
        formatted_date(day, "EEEE", lang): "weekday",
        formatted_date(day, "MMMM", lang): "month",
        str(day.day): "day",
        str(day.year): "year",
    }
    day_words = set(spoken_day.split()) if spoken_day else set()
    return [
        "day" if word in day_words else names.get(word.strip(",."), FUNCTION_WORD)
        for word in text.split()
    ]


def _say_year(year: int, lang: str) -> str:
    return PHRASINGS[lang].in_year.format(spelled_number(year, lang=lang, to="year"))


def _say_on_date(day: datetime.date, lang: str) -> str:
    return formatted_date(day, PHRASINGS[lang].on_date, lang)


def _say_day_of_month(day: datetime.date, lang: str) -> str:
    phrasing = PHRASINGS[lang]
    month = formatted_date(day, "MMMM", lang)
    return phrasing.day_of_month.format(day=phrasing.day(day.day), month=month)


def _full_date(day: datetime.date, lang: str) -> str:
    return formatted_date(day, "full", lang)


def _long_date(day: datetime.date, lang: str) -> str:
    return formatted_date(day, "long", lang)


KINDS: tuple[Kind, ...] = (
    Kind(
        3,
        lambda rng: _sample_number(rng, 0),
        lambda n, lang: spelled_number(n, lang=lang),
        _number_roles,
    ),
    Kind(2, lambda rng: _sample_number(rng, 1), _ordinal, _ordinal_roles),
    Kind(1, lambda rng: rng.randint(1100, 2099), _say_year, _year_roles),
    Kind(2, _sample_date, _full_date, lambda d, lang: _date_roles(d, _full_date(d, lang), lang)),
    Kind(1, _sample_date, _long_date, lambda d, lang: _date_roles(d, _long_date(d, lang), lang)),
    Kind(
        2, _sample_date, _say_on_date, lambda d, lang: _date_roles(d, _say_on_date(d, lang), lang)
    ),
    Kind(
        1,
        _sample_day,
        _say_day_of_month,
        lambda d, lang: _date_roles(
            d, _say_day_of_month(d, lang), lang, spoken_day=PHRASINGS[lang].day(d.day)
        ),
    ),
)


def gold_alignment(src_roles: list[str], tgt_roles: list[str]) -> str:
    """The gold links of a pair whose words say ``src_roles`` and ``tgt_roles``, as a line
    ``align-score`` reads: ``i-j`` sure, ``ipj`` possible (0-based, source first)."""
    links = []
    for role in dict.fromkeys(src_roles):
        sources = [i for i, r in enumerate(src_roles) if r == role]
        targets = [j for j, r in enumerate(tgt_roles) if r == role]
        sure = role != FUNCTION_WORD and (len(sources) == 1 or len(targets) == 1)
        links += [f"{i}{'-' if sure else 'p'}{j}" for i in sources for j in targets]
    return " ".join(
        sorted(links, key=lambda link: tuple(map(int, link.replace("p", "-").split("-"))))
    )


def check_languages(src_lang: str, tgt_lang: str) -> None:
    """Raise CorpusSettingError unless both languages are supported and differ."""
    for lang in (src_lang, tgt_lang):
        if lang not in LANGUAGES:
            raise CorpusSettingError(
                f"the embedded corpus has no language {lang!r}; choose from {', '.join(LANGUAGES)}"
            )
    if src_lang == tgt_lang:
        raise CorpusSettingError(f"source and target language are both {src_lang!r}")


def generate_pairs(
    n: int, seed: int, src_lang: str = "en", tgt_lang: str = "de"
) -> list[tuple[str, str]]:
    """``n`` (source, target) sentence pairs with distinct sources, the same for the same seed.

    Raises CorpusSettingError for an unsupported language or a negative ``n``, or when
    ``n`` exceeds the distinct sentences the kinds can produce.
    """
    return [(source, target) for source, target, _ in generate_aligned(n, seed, src_lang, tgt_lang)]


def generate_aligned(
    n: int, seed: int, src_lang: str = "en", tgt_lang: str = "de"
) -> list[tuple[str, str, str]]:
    """``generate_pairs``'s pairs, each with its gold alignment (``gold_alignment``)."""
    check_languages(src_lang, tgt_lang)
    if n < 0:
        raise CorpusSettingError(f"cannot generate a negative number of pairs ({n})")
    rng = random.Random(seed)
    weights = [kind.weight for kind in KINDS]
    pairs: dict[str, tuple[str, str]] = {}  # source -> (target, gold), in order of drawing
    misses = 0
    while len(pairs) < n:
        kind = rng.choices(KINDS, weights)[0]
        meaning = kind.sample(rng)
        source = kind.say(meaning, src_lang)
        if source in pairs:
            misses += 1
            if misses > 10 * n + 10_000:
                raise CorpusSettingError(f"cannot find {n} distinct sentences for the corpus")
            continue
        gold = gold_alignment(kind.roles(meaning, src_lang), kind.roles(meaning, tgt_lang))
        pairs[source] = (kind.say(meaning, tgt_lang), gold)
    return [(source, target, gold) for source, (target, gold) in pairs.items()]


def _check_sizes(sizes: Mapping[str, int]) -> None:
    """Split names must be plain file name stems and sizes positive."""
    if not sizes:
        raise CorpusSettingError("the corpus needs at least one split")
    for split, size in sizes.items():
        if not split or split.startswith(".") or "/" in split or "\\" in split:
            raise CorpusSettingError(f"split name {split!r} is not a plain file name")
        if size < 1:
            raise CorpusSettingError(f"split {split!r} must have at least one pair, got {size}")


def _write_lines(path: Path, lines: list[str]) -> None:
    """One sentence per line, UTF-8, '\\n' line ends on every platform."""
    with open(path, "w", encoding="utf-8", newline="\n") as file:
        file.writelines(line + "\n" for line in lines)


def write_corpus(
    out_dir: Path,
    seed: int = 1,
    sizes: Mapping[str, int] = DEFAULT_SIZES,
    src_lang: str = "en",
    tgt_lang: str = "de",
    overwrite: bool = False,
) -> dict[str, Path]:
    """Write ``{split}.{lang}`` files (the Multi30k layout) into ``out_dir``, and each
    split's gold word alignments as ``{split}.align``.

    The splits are consecutive slices of one draw of distinct pairs, so no source sentence
    occurs in two splits. The files are written into a hidden folder beside ``out_dir``
    that is renamed into place at the end, so an interrupted run never leaves a corpus that
    looks complete. An existing non-empty ``out_dir`` is an error unless ``overwrite``.
    Returns the written paths keyed by file name ("train.en", "train.de", "train.align", ...).
    """
    out_dir = Path(out_dir)
    check_languages(src_lang, tgt_lang)
    _check_sizes(sizes)
    if out_dir.exists() and not out_dir.is_dir():
        raise CorpusSettingError(f"{out_dir} exists and is not a folder")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not overwrite:
        raise CorpusSettingError(f"{out_dir} exists and is not empty (remove it or overwrite)")
    pairs = generate_aligned(sum(sizes.values()), seed, src_lang, tgt_lang)

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    part = out_dir.parent / f".{out_dir.name}.part-{uuid.uuid4().hex[:8]}"
    part.mkdir()
    names: list[str] = []
    try:
        start = 0
        for split, size in sizes.items():
            chunk = pairs[start : start + size]
            start += size
            for suffix, side in ((src_lang, 0), (tgt_lang, 1), ("align", 2)):
                names.append(f"{split}.{suffix}")
                _write_lines(part / names[-1], [pair[side] for pair in chunk])
        _move_into_place(part, out_dir)
    except BaseException:
        shutil.rmtree(part, ignore_errors=True)
        raise
    return {name: out_dir / name for name in names}


def _move_into_place(part: Path, out_dir: Path) -> None:
    """Rename the finished folder ``part`` to ``out_dir``, replacing what was there."""
    if not out_dir.exists():
        part.rename(out_dir)
        return
    old = out_dir.parent / f".{out_dir.name}.old-{uuid.uuid4().hex[:8]}"
    out_dir.rename(old)
    part.rename(out_dir)
    shutil.rmtree(old)
