"""Case restored to lowercased text: a truecasing table learned from cased text.

A model trained on lowercased text (``data.lowercase``) writes lowercase. ``Recaser`` gives
each word back the form it most often has in cased text of the same language (a model's
training targets), then capitalises the line's first letter, so that the output reads as
cased text and cased sacreBLEU compares it with the references:

    recaser = Recaser.learn(iter_lines("train.de.gz"))
    recaser.recase("ein mann fährt mit dem fahrrad.")   # 'Ein Mann fährt mit dem Fahrrad.'
    recaser.save("casing.de.json")                      # Recaser.load reads it back

A word is a run of Unicode word characters (``\\w+``): ``t-shirt`` is ``t`` and ``shirt``.
A line's first word is counted apart, since its position decides its case there; it decides
a word's form only for words never seen elsewhere. A word the table lacks is capitalised
when most words seen once in the text are (German nouns), and kept as written otherwise.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from seq2seq.common.atomic import write_atomically
from seq2seq.common.errors import DataError

WORD = re.compile(r"\w+")
FORMAT = 1  # version of the saved table


def _most_frequent(forms: Counter[str]) -> str:
    """The most frequent form; ties go to the form that sorts first, so a table is the same
    whatever the order of its text."""
    return min(forms, key=lambda form: (-forms[form], form))


def _capitalised(word: str) -> str:
    return word[:1].upper() + word[1:]


@dataclass(frozen=True)
class Recaser:
    """A lowercased word's cased form, and the case of words never seen.

    Attributes:
        forms: lowercased word -> the form to write
        capitalise_unknown: a word not in ``forms`` is capitalised (else kept as written)
    """

    forms: dict[str, str]
    capitalise_unknown: bool

    @classmethod
    def learn(cls, lines: Iterable[str]) -> Recaser:
        """The table of cased ``lines`` (a DataError if they hold no word)."""
        inside: defaultdict[str, Counter[str]] = defaultdict(Counter)  # words after the first
        first: defaultdict[str, Counter[str]] = defaultdict(Counter)  # a line's first word
        for line in lines:
            for position, match in enumerate(WORD.finditer(line)):
                word = match.group()
                (inside if position else first)[word.lower()][word] += 1
        if not inside and not first:
            raise DataError("cannot learn casing: the text holds no words")
        forms = {word: _most_frequent(inside.get(word) or first[word]) for word in first}
        forms.update((word, _most_frequent(counts)) for word, counts in inside.items())
        once = [next(iter(counts)) for counts in inside.values() if counts.total() == 1]
        capitalised_once = sum(word[:1].isupper() for word in once)
        return cls(forms, capitalise_unknown=2 * capitalised_once > len(once))

    def recase(self, line: str) -> str:
        """``line`` with each word in its table form and its first letter capitalised."""
        cased = WORD.sub(self._form, line)
        first = WORD.search(cased)
        if first is None:
            return cased
        start = first.start()
        return cased[:start] + _capitalised(cased[start:])

    def _form(self, match: re.Match[str]) -> str:
        word = match.group()
        form = self.forms.get(word.lower())
        if form is not None:
            return form
        return _capitalised(word) if self.capitalise_unknown else word

    def save(self, path: str | Path) -> Path:
        """Write the table as JSON (atomically: a failed write leaves any old file)."""
        table = {"format": FORMAT, "capitalise_unknown": self.capitalise_unknown,
                 "forms": self.forms}  # fmt: skip
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
            raise DataError(f"{path}: not a casing table of format {FORMAT}")
        forms, capitalise = table.get("forms"), table.get("capitalise_unknown")
        if not isinstance(forms, dict) or not isinstance(capitalise, bool):
            raise DataError(f"{path}: a damaged casing table")
        return cls(forms, capitalise)

    def __len__(self) -> int:
        return len(self.forms)
