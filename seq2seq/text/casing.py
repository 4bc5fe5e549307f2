"""Case restored to lowercased text: a truecasing table learned from cased text.

A model trained on lowercased text (``data.lowercase``) writes lowercase. ``Recaser`` gives
each word back the form it has in cased text of the same language (a model's training
targets), then capitalises the line's first letter, so that the output reads as cased text
and cased sacreBLEU compares it with the references:

    recaser = Recaser.learn(TextLines("train.de.gz"))
    recaser.recase("ein mann fährt mit dem fahrrad.")   # 'Ein Mann fährt mit dem Fahrrad.'
    recaser.save("casing.de.json")                      # Recaser.load reads it back

A word is a run of Unicode word characters (``\\w+``): ``t-shirt`` is ``t`` and ``shirt``.
A line's first word is not counted, since its position decides its case there, unless the
word is seen nowhere else. Three rules, in order:

- A word seen in more than one form (German *junge*: "eine junge Frau", "ein Junge") takes
  the form its neighbors make most likely: the form's count times the probabilities of the
  word before and the word after given the form (naive Bayes, add-``SMOOTHING`` estimates
  over the words of the text).
- Any other word seen takes its one form.
- A word never seen is capitalised when most words seen once with the same ending (its
  last 3, else 2, else 1 characters, among endings shared by ``MIN_ENDING`` such words) are
  capitalised (German nouns, but not *-ende* adjectives), else when most words seen once
  are; it is kept as written otherwise.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from seq2seq.common.atomic import write_atomically
from seq2seq.common.errors import DataError

WORD = re.compile(r"\w+")
FORMAT = 2  # version of the saved table
START, END = "<s>", "</s>"  # the neighbors of a line's first and last word
SMOOTHING = 0.1  # added to every neighbor count (val chose it: docs/benchmarks/selection.md)
ENDINGS = (3, 2, 1)  # the lengths of the endings that guess an unseen word's case
MIN_ENDING = 5  # words seen once that an ending must have to guess


def _most_frequent(forms: Counter[str]) -> str:
    """The most frequent form; ties go to the form that sorts first, so a table is the same
    whatever the order of its text."""
    return min(forms, key=lambda form: (-forms[form], form))


def _capitalised(word: str) -> str:
    return word[:1].upper() + word[1:]


@dataclass(frozen=True)
class FormCounts:
    """How often one form of an ambiguous word was seen, and beside which words."""

    count: int
    before: dict[str, int] = field(default_factory=dict)  # lowercased word before -> count
    after: dict[str, int] = field(default_factory=dict)  # lowercased word after -> count


@dataclass(frozen=True)
class Recaser:
    """A lowercased word's cased form, chosen by its neighbors where it has several, and the
    case of words never seen.

    Attributes:
        forms: lowercased word -> its most frequent form
        ambiguous: lowercased word seen in several forms -> each form's ``FormCounts``
        endings: an ending -> whether an unseen word with it is capitalised
        capitalise_unknown: whether an unseen word whose ending says nothing is capitalised
    """

    forms: dict[str, str]
    ambiguous: dict[str, dict[str, FormCounts]]
    endings: dict[str, bool]
    capitalise_unknown: bool

    @classmethod
    def learn(cls, lines: Iterable[str]) -> Recaser:
        """The table of cased ``lines`` (a DataError if they hold no word). They are read
        twice, so they are a list or an iterable that starts again each time (such as
        ``TextLines(path)``): memory holds the words and the neighbors of the ambiguous
        ones, never the text."""
        if iter(lines) is lines:
            raise TypeError("Recaser.learn reads its lines twice: give a list, not an iterator")
        inside: defaultdict[str, Counter[str]] = defaultdict(Counter)  # words after the first
        first: defaultdict[str, Counter[str]] = defaultdict(Counter)  # a line's first word
        for line in lines:
            for position, word in enumerate(WORD.findall(line)):
                (inside if position else first)[word.lower()][word] += 1
        if not inside and not first:
            raise DataError("cannot learn casing: the text holds no words")
        forms = {word: _most_frequent(inside.get(word) or first[word]) for word in first}
        forms.update((word, _most_frequent(counts)) for word, counts in inside.items())
        ambiguous = {
            word: {form: FormCounts(count) for form, count in counts.items()}
            for word, counts in inside.items()
            if len(counts) > 1
        }
        for line in lines:  # again: the neighbors of the ambiguous words
            words = WORD.findall(line)
            lowered = [START, *(word.lower() for word in words), END]
            for position, word in enumerate(words[1:], 1):
                if (seen := ambiguous.get(lowered[position + 1])) is not None:
                    counts = seen[word]
                    before, after = lowered[position], lowered[position + 2]
                    counts.before[before] = counts.before.get(before, 0) + 1
                    counts.after[after] = counts.after.get(after, 0) + 1
        once = [next(iter(counts)) for counts in inside.values() if counts.total() == 1]
        return cls(
            forms, ambiguous, _ending_cases(once),
            capitalise_unknown=2 * sum(word[:1].isupper() for word in once) > len(once),
        )  # fmt: skip

    def recase(self, line: str) -> str:
        """``line`` with each word in its form and its first letter capitalised."""
        matches = list(WORD.finditer(line))
        lowered = [START, *(match.group().lower() for match in matches), END]
        pieces, end = [], 0
        for position, match in enumerate(matches):
            context = (lowered[position], lowered[position + 2])
            pieces += [line[end : match.start()], self._form(match.group(), *context)]
            end = match.end()
        cased = "".join(pieces) + line[end:]
        if not matches:
            return cased
        start = matches[0].start()  # the text before the first word is as it was
        return cased[:start] + _capitalised(cased[start:])

    def _form(self, word: str, before: str, after: str) -> str:
        lowered = word.lower()
        if (counts := self.ambiguous.get(lowered)) is not None:
            return max(sorted(counts), key=lambda form: self._score(counts[form], before, after))
        if (form := self.forms.get(lowered)) is not None:
            return form
        for length in ENDINGS:
            if (capitalise := self.endings.get(lowered[-length:])) is not None:
                return _capitalised(word) if capitalise else word
        return _capitalised(word) if self.capitalise_unknown else word

    @property
    def vocabulary(self) -> int:
        """How many different words (and line ends) the smoothing spreads its mass over."""
        return len(self.forms) + 2

    def _score(self, form: FormCounts, before: str, after: str) -> float:
        """log P(form) P(before | form) P(after | form), up to a constant."""
        total = form.count + SMOOTHING * self.vocabulary
        return (
            math.log(form.count)
            + math.log((form.before.get(before, 0) + SMOOTHING) / total)
            + math.log((form.after.get(after, 0) + SMOOTHING) / total)
        )

    def save(self, path: str | Path) -> Path:
        """Write the table as JSON (atomically: a failed write leaves any old file)."""
        table = {
            "format": FORMAT, "forms": self.forms,
            "ambiguous": {
                word: {form: [c.count, c.before, c.after] for form, c in counts.items()}
                for word, counts in self.ambiguous.items()
            },
            "endings": self.endings, "capitalise_unknown": self.capitalise_unknown,
        }  # fmt: skip
        text = json.dumps(table, ensure_ascii=False, sort_keys=True).encode("utf-8")
        return write_atomically(path, lambda file: file.write(text))

    @classmethod
    def load(cls, path: str | Path) -> Recaser:
        """The table ``save`` wrote; a DataError naming ``path`` for anything else."""
        try:
            table = json.loads(Path(path).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DataError(f"{path}: no such file") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
            raise DataError(f"{path}: not a casing table ({error})") from None
        if not isinstance(table, dict) or table.get("format") != FORMAT:
            raise DataError(
                f"{path}: not a casing table of format {FORMAT} (learn it again with "
                "`seq2seq recase --learn`)"
            )
        try:
            ambiguous = {
                word: {form: FormCounts(*counts) for form, counts in forms.items()}
                for word, forms in table["ambiguous"].items()
            }
            recaser = cls(table["forms"], ambiguous, table["endings"],
                          table["capitalise_unknown"])  # fmt: skip
        except (KeyError, TypeError, AttributeError):
            raise DataError(f"{path}: a damaged casing table") from None
        if not isinstance(recaser.forms, dict) or not isinstance(recaser.capitalise_unknown, bool):
            raise DataError(f"{path}: a damaged casing table")
        return recaser

    def __len__(self) -> int:
        return len(self.forms)


def _ending_cases(once: list[str]) -> dict[str, bool]:
    """Whether most of the words seen once (in their one form) that share an ending are
    capitalised, for the endings at least ``MIN_ENDING`` of them share."""
    capitalised: Counter[str] = Counter()
    shared: Counter[str] = Counter()
    for word in once:
        lowered = word.lower()
        for length in ENDINGS:
            if len(lowered) > length:
                shared[lowered[-length:]] += 1
                capitalised[lowered[-length:]] += word[:1].isupper()
    return {
        ending: 2 * capitalised[ending] > count
        for ending, count in shared.items()
        if count >= MIN_ENDING
    }
