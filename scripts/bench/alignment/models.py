"""A model's links of the gold's pairs, by each extraction, and the one the trial set
chooses."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import seq2seq
from scripts.bench.alignment.aligners import aer_of
from scripts.bench.alignment.gold import GoldSet, Pair
from scripts.bench.alignment.names import choice_row
from seq2seq.inspection.word_alignments import GoldAlignment, Link, transpose
from seq2seq.text.pharaoh import format_pharaoh

GUIDED_HEAD: dict[str, Any] = {"layer": -2, "head": 0, "shift": True}  # model.guided_* defaults


def name_of(extraction: dict[str, Any]) -> str:
    """An extraction's name in the rows: ``seq2seq.Extraction``'s own."""
    return seq2seq.Extraction(**extraction).name


def model_links(
    model: Any, pairs: Sequence[Pair], left_to_right: bool, **extraction: Any
) -> list[set[Link]]:
    """The model's links of each gold pair, forced on the side it translates into, as
    (left, right)."""
    return model_links_each(model, pairs, left_to_right, [extraction])[0]


def model_links_each(
    model: Any, pairs: Sequence[Pair], left_to_right: bool, extractions: Sequence[dict[str, Any]]
) -> list[list[set[Link]]]:
    """``model_links`` by each of ``extractions``, from one forced decoding of the pairs."""
    left = [" ".join(a) for a, _ in pairs]
    right = [" ".join(b) for _, b in pairs]
    chosen = [seq2seq.Extraction(**extraction) for extraction in extractions]
    if left_to_right:
        return [[set(x) for x in found] for found in model.align_each(left, right, chosen)]
    return [[transpose(x) for x in found] for found in model.align_each(right, left, chosen)]


def extractions(heads: tuple[int, ...]) -> list[dict[str, Any]]:
    """Every extraction the trial set chooses among: the mean, and for a Transformer
    (``heads`` = (layers, heads per layer)) each layer and each head; each with and without
    Shift-Att, each read by argmax and by mutual argmax."""
    maps: list[dict[str, Any]] = [{}]
    if len(heads) == 2:
        layers, per_layer = heads
        maps += [{"layer": layer} for layer in range(layers)]
        maps += [{"layer": la, "head": h} for la in range(layers) for h in range(per_layer)]
    return [
        {**where, "shift": shift, "method": method}
        for where in maps
        for shift in (False, True)
        for method in ("argmax", "mutual-argmax")
    ]


def choose_on_trial(
    model: Any, gold_set: GoldSet, trial: Sequence[Pair], trial_gold: Sequence[GoldAlignment]
) -> tuple[dict[str, Any], list[set[Link]], list[dict[str, Any]]]:
    """The extraction with the lowest trial AER, its trial links, and every candidate's
    trial AER."""
    tried = extractions(model.heads)
    found = model_links_each(model, trial, gold_set.model_left_to_right, tried)
    candidates: list[dict[str, Any]] = [
        {"extraction": extraction, "name": name_of(extraction), "trial_aer": aer_of(trial_gold, x)}
        for extraction, x in zip(tried, found, strict=True)
    ]
    best = min(range(len(candidates)), key=lambda k: candidates[k]["trial_aer"])
    return candidates[best]["extraction"], found[best], candidates


def model_rows(
    model: Any,
    label: str,
    gold_set: GoldSet,
    test: Sequence[Pair],
    trial: tuple[Sequence[Pair], Sequence[GoldAlignment]],
    record: dict[str, Any],
) -> dict[str, list[set[Link]]]:
    """A model's rows: the mean over layers and heads, and the trial set's choice (without
    a trial set, the mean with Shift-Att); the seconds of the first, the choice and its
    trial links (Pharaoh lines) go into ``record["models"][label]``."""
    start = time.monotonic()
    rows = {f"{label}, mean": model_links(model, test, gold_set.model_left_to_right)}
    info: dict[str, Any] = {"seconds": round(time.monotonic() - start, 2)}
    if trial[0]:
        chosen, trial_links, candidates = choose_on_trial(model, gold_set, *trial)
        info.update(
            chosen=name_of(chosen),
            trial_candidates=candidates,
            trial_links=[format_pharaoh(links) for links in trial_links],
        )
        rows[choice_row(label, name_of(chosen))] = model_links(
            model, test, gold_set.model_left_to_right, **chosen
        )
    else:
        rows[f"{label}, {name_of({'shift': True})}"] = model_links(
            model, test, gold_set.model_left_to_right, shift=True
        )
    record.setdefault("models", {})[label] = info
    return rows


def guided_head(model: Any, pairs: Sequence[Pair]) -> list[set[Link]]:
    """The links of the head guided alignment trains (``model.guided_layer`` and
    ``model.guided_head`` at their defaults: the decoder's layer before last, head 0), read
    with Shift-Att, at the step it learned them; the En-Fr twins translate left to right."""
    return model_links(model, pairs, True, **GUIDED_HEAD)


def guided_head_row(label: str) -> str:
    """The row of model ``label``'s guided head (``guided_head``'s links)."""
    return f"{label}, the guided head ({name_of(GUIDED_HEAD)})"
