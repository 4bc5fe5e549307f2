"""One group of sentences translated with the loaded model, as the batcher's worker runs it.

The model is a ``TranslationModel`` (``seq2seq.load``: checkpoints, an ensemble or a
CTranslate2 export), and the translations are its ``translate_all``, the very code
``seq2seq translate`` runs; word
alignments and attention maps are those ``seq2seq attention`` computes: the model's own
hypothesis teacher-forced on its source (``alignment.collect.forced_attention``), the
summary map over layers and heads (or the map ``serve --alignment-*`` chose), merged into
words, one argmax link per target word.

Shapes: S source pieces and T target pieces, both with EOS; L layers, H heads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from seq2seq.common.errors import Seq2SeqError
from seq2seq.inference.translator import Translation
from seq2seq.inspection.collect import SentenceAttention, hypotheses_attention
from seq2seq.inspection.extraction import Extraction, extracted_links
from seq2seq.inspection.maps import as_layers_heads, summary_map
from seq2seq.text.pharaoh import format_pharaoh
from seq2seq.translation_model import CheckpointModel, TranslationModel

DECIMALS = 4  # attention weights in answers are rounded to this many decimals


@dataclass(frozen=True)
class SearchKey:
    """What sentences must share to be searched together."""

    beam: int
    n_best: int


@dataclass(frozen=True)
class Sentence:
    """One sentence of a request, with what its request asked for besides the text."""

    text: str
    alignment: bool = False
    attention: bool = False


class Engine:
    """The loaded model and how it searches; ``run`` is called on one thread only.

    Args:
        model: the model opened by ``seq2seq.load``: its search (a request sets the beam
            and n-best of a copy), its batches' size (``max_tokens`` source pieces, padding
            included) and its longest source (``max_source_len`` pieces: longer ones are
            cut, as ``translate`` does).
        extraction: which map, step and rule give a request's word links (checked against
            the model by the caller); None: the model's own (``TranslationModel.extraction``).
    """

    def __init__(self, model: TranslationModel, extraction: Extraction | None = None):
        self.model, self.extraction = model, extraction or model.extraction

    @property
    def has_attention(self) -> bool:
        """Alignments and attention maps can be asked for (an export keeps none)."""
        return self.model.heads is not None

    def size(self, text: str) -> int:
        """A sentence's cost in a batch: its source pieces and EOS."""
        pieces = self.model.source_pieces(text) if text.strip() else 0
        return min(pieces, self.model.max_source_len) + 1

    def run(self, key: SearchKey, sentences: Sequence[Sentence]) -> list[dict[str, Any]]:
        """Translate ``sentences`` with ``key``'s search: one answer each (see
        ``schema.SentenceTranslation``), in their order."""
        search = dataclasses.replace(self.model.search, beam=key.beam, n_best=key.n_best)
        translations = self.model.translate_all([s.text for s in sentences], search=search)
        inspected = self._inspect(sentences, translations)
        answers = []
        for i, (sentence, translation) in enumerate(zip(sentences, translations, strict=True)):
            hypotheses = []
            for k, (text, hyp) in enumerate(
                zip(translation.texts, translation.hypotheses, strict=True)
            ):
                answer: dict[str, Any] = {"text": text, "score": hyp.score}
                attention = inspected.get((i, k))
                if sentence.alignment:
                    links = extracted_links(attention, self.extraction) if attention else []
                    answer["alignment"] = format_pharaoh(links)
                if sentence.attention and attention is not None:
                    answer["attention"] = _attention_map(attention)
                hypotheses.append(answer)
            answers.append({"source": sentence.text, "translations": hypotheses})
        return answers

    def _inspect(
        self, sentences: Sequence[Sentence], translations: Sequence[Translation]
    ) -> dict[tuple[int, int], SentenceAttention]:
        """The attention of every hypothesis whose request asked for alignments or maps,
        by (sentence, hypothesis); a blank sentence has none."""
        wanted = [
            (i, k)
            for i, (sentence, translation) in enumerate(zip(sentences, translations, strict=True))
            if sentence.alignment or sentence.attention
            for k in range(len(translation.hypotheses))
        ]
        if not wanted:
            return {}
        if not isinstance(self.model, CheckpointModel):  # the app refuses such requests
            raise Seq2SeqError("a CTranslate2 export keeps no attention")
        return hypotheses_attention(
            self.model.trained, translations, wanted, self.model.max_tokens,
            self.model.max_source_len,
        )  # fmt: skip


def _attention_map(sentence: SentenceAttention) -> dict[str, Any]:
    """The pieces and weights of one hypothesis (see ``schema.HypothesisAttention``)."""
    grid = as_layers_heads(sentence.weights).permute(1, 2, 0, 3)  # [L, H, T, S]
    return {
        "source": sentence.src_pieces,
        "target": sentence.tgt_pieces,
        "weights": torch.round(summary_map(sentence.weights).double(), decimals=DECIMALS).tolist(),
        "heads": torch.round(grid.double(), decimals=DECIMALS).tolist(),
    }
