"""A model ready to translate, from Python: ``load`` and what it returns.

    import seq2seq
    model = seq2seq.load("runs/demo/checkpoints/best.ckpt")    # or [a, b]: an ensemble;
    model.translate("forty-two")                               # or an export's folder
    model.translate(["one", "two"], beam=5, n_best=2)
    model.score(sources, references)     # sacreBLEU, chrF, the literature's BLEU
    model.attention("forty-two").plot()  # a matplotlib Figure
    model.translate("forty-two", alignment=True)  # Aligned(text, links)

``TranslationModel`` is the one name for a model opened to translate: checkpoints searched by
seq2seq (``CheckpointModel``: one, or several as an ensemble) or a CTranslate2 export
(``ExportModel``). The commands open theirs with ``load`` too, so a mistake is the same
one-line ``Seq2SeqError`` in Python as on the command line.

CTranslate2 is imported only when an export is opened, sacrebleu only by ``score``, and
matplotlib only by ``AttentionMaps.plot``.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from seq2seq.common.errors import DataError, Seq2SeqError
from seq2seq.common.precision import warn_once_if_bf16_emulated
from seq2seq.inference.checkpoint import Trained, check_checkpoint_path
from seq2seq.inference.ensemble import load_ensemble, normalized_weights
from seq2seq.inference.huggingface import is_huggingface_model, looks_like_hub_id
from seq2seq.inference.released import Released, looks_like_a_name, resolve
from seq2seq.inference.search import SearchSettings, check_search
from seq2seq.inference.translator import Translation, translate_lines, translate_stream
from seq2seq.inference.upgrade import upgraded_load_arguments
from seq2seq.inspection.collect import (
    head_axes,
    hypotheses_attention,
    reference_attention,
    translation_attention,
)
from seq2seq.inspection.extraction import (
    MEAN_ARGMAX,
    Extraction,
    extracted_links,
    extracted_links_each,
)
from seq2seq.inspection.maps import check_layer_choice
from seq2seq.inspection.sentence import AttentionMaps, attention_of
from seq2seq.inspection.word_alignments import Method
from seq2seq.text.casing import Recaser
from seq2seq.text.pharaoh import format_pharaoh

if TYPE_CHECKING:
    from seq2seq.inference.ct2_translate import Exported
    from seq2seq.text.metrics import MetricScore

SEARCH_OPTIONS = {  # the keyword of translate/score -> the SearchSettings field it sets
    "beam": "beam",
    "n_best": "n_best",
    "length_penalty": "length_penalty",
    "max_len_ratio": "max_len_ratio",
    "max_len_offset": "max_len_offset",
    "bf16": "bf16",
}

NO_ATTENTION = "a CTranslate2 export keeps no attention: load the checkpoint it came from"


class Aligned(NamedTuple):
    """A translation with its word alignment: ``links`` (source word, target word), 0-indexed
    over the whitespace-separated words of the source and of ``text``, sorted."""

    text: str
    links: list[tuple[int, int]]

    def pharaoh(self) -> str:
        """The links as Pharaoh writes them: ``0-0 1-2 2-1``."""
        return format_pharaoh(self.links)


@dataclass(frozen=True)
class Evaluation:
    """What ``score`` measured: ``scores`` as ``seq2seq evaluate --json`` prints them (each
    ``{"score", "signature", ...}`` under ``bleu``, ``chrf`` and, when the target language
    is known, ``bleu_literature``), the translations, and the seconds they took."""

    scores: dict[str, MetricScore]
    translations: list[str]
    seconds: float


@dataclass(frozen=True)
class TranslationModel:
    """A model opened to translate, and the search it uses unless told otherwise.

    Attributes:
        search: the model's own search (from its checkpoint or export), changed by what
            ``load`` was given; ``translate`` and ``score`` change a copy per call
        max_tokens: source pieces per batch, padding included
        max_source_len: longer sources are cut to this many pieces, with a warning
        recaser: restores case to the translations (of a model trained on lowercased
            text); None: they are the model's own text
        extraction: how ``alignment=True`` reads word links: the mean over layers and
            heads, or the choice a released model's manifest records (made on held-out
            gold alignments)
    """

    search: SearchSettings
    max_tokens: int = 4096
    max_source_len: int = 512
    recaser: Recaser | None = None
    extraction: Extraction = MEAN_ARGMAX

    @property
    def tgt_lang(self) -> str | None:
        """The target language the model was trained for (None: not recorded)."""
        raise NotImplementedError

    @property
    def src_lang(self) -> str | None:
        """The source language the model was trained for (None: not recorded)."""
        return None

    @property
    def heads(self) -> tuple[int, ...] | None:
        """The axes of its attention (``()`` one map, ``(H,)`` heads, ``(L, H)`` layers and
        heads); None: the model keeps no attention (an export)."""
        return None

    def source_pieces(self, text: str) -> int:
        """How many SentencePiece pieces ``text`` is as a source (EOS not counted)."""
        raise NotImplementedError

    def stream(
        self,
        lines: Iterable[str | None],
        progress: bool = False,
        search: SearchSettings | None = None,
        alignment: bool | Extraction = False,
    ) -> Iterator[Translation]:
        """The translations of ``lines`` as they come, in input order, translated in chunks
        (a ``None`` in ``lines``: the input paused, so the chunk ends early); with
        ``alignment``, each hypothesis's word links (``Translation.alignments``): True reads
        them from the mean attention, an ``Extraction`` as it says."""
        extraction = self._extraction(alignment)
        translations = self._stream(lines, progress, search or self.search, extraction)
        return map(self._recased, translations)

    def translate_all(
        self,
        lines: Sequence[str],
        progress: bool = False,
        search: SearchSettings | None = None,
        alignment: bool | Extraction = False,
    ) -> list[Translation]:
        """Every line's ``Translation`` (its n-best hypotheses and scores, and with
        ``alignment`` their word links, as ``stream`` reads them), in order."""
        extraction = self._extraction(alignment)
        translations = self._translate_all(lines, progress, search or self.search, extraction)
        return [self._recased(translation) for translation in translations]

    def _extraction(self, alignment: bool | Extraction) -> Extraction | None:
        """How word links are read (None: not at all), checked before any work."""
        if alignment is False:
            return None
        return self.check_extraction(self.extraction if alignment is True else alignment)

    def check_extraction(self, extraction: Extraction) -> Extraction:
        """``extraction``, if this model can give it: links come from attention, which an
        export does not keep, and a chosen layer must exist."""
        if self.heads is None:
            raise Seq2SeqError(NO_ATTENTION)
        check_layer_choice(extraction.layer, self.heads)
        return extraction

    def _batching(self, progress: bool) -> dict[str, Any]:
        """How the translators batch and cut sources, as their keywords."""
        return {"max_tokens": self.max_tokens, "max_source_len": self.max_source_len,
                "progress": progress}  # fmt: skip

    def _stream(
        self,
        lines: Iterable[str | None],
        progress: bool,
        search: SearchSettings,
        extraction: Extraction | None,
    ) -> Iterator[Translation]:
        """``stream`` before recasing: the model's own output."""
        raise NotImplementedError

    def _translate_all(
        self,
        lines: Sequence[str],
        progress: bool,
        search: SearchSettings,
        extraction: Extraction | None,
    ) -> list[Translation]:
        """``translate_all`` before recasing."""
        return list(self._stream(lines, progress, search, extraction))

    def _recased(self, translation: Translation) -> Translation:
        """``translation`` with every hypothesis's text recased (unchanged without a
        ``recaser``)."""
        if self.recaser is None:
            return translation
        texts = [self.recaser.recase(text) for text in translation.texts]
        return dataclasses.replace(translation, texts=texts)

    def searching(self, **options: Any) -> SearchSettings:
        """The model's search changed by ``options`` (``beam``, ``n_best``,
        ``length_penalty``, ``max_len_ratio``, ``max_len_offset``, ``bf16``; None: keep)."""
        unknown = set(options) - set(SEARCH_OPTIONS)
        if unknown:
            raise TypeError(f"unknown search option(s): {', '.join(sorted(unknown))}")
        changes = {SEARCH_OPTIONS[k]: v for k, v in options.items() if v is not None}
        search = dataclasses.replace(self.search, **changes)
        check_search(search)
        return search

    def translate(
        self,
        lines: str | Sequence[str],
        progress: bool = False,
        alignment: bool | Extraction = False,
        **search: Any,
    ) -> Any:
        """Translate a sentence (a string back) or a list of them (a list back, in order;
        with ``n_best`` > 1, a list of each line's n best). With ``alignment``, each
        translation comes as an ``Aligned`` (its text and word links: True reads them from the
        mean attention over layers and heads, an ``Extraction`` from the map, step and rule
        it names). Keywords change the
        search for this call: ``beam``, ``n_best``, ``length_penalty``, ``max_len_ratio``,
        ``max_len_offset``, ``bf16``."""
        settings = self.searching(**search)
        single = isinstance(lines, str)
        batch = [lines] if isinstance(lines, str) else list(lines)
        translations = self.translate_all(batch, progress, settings, alignment)

        def each(translation: Translation, k: int) -> str | Aligned:
            text = translation.texts[k]
            return Aligned(text, translation.alignments[k]) if translation.alignments else text

        results = [
            [each(t, k) for k in range(len(t.texts))] if settings.n_best > 1 else each(t, 0)
            for t in translations
        ]
        return results[0] if single else results

    def align(
        self,
        sources: Sequence[str],
        targets: Sequence[str],
        layer: int | None = None,
        head: int | None = None,
        shift: bool = False,
        method: Method = "argmax",
    ) -> list[list[tuple[int, int]]]:
        """The word links of each given pair (forced decoding of ``targets`` on
        ``sources``): (source word, target word), 0-indexed over their whitespace-separated
        words, sorted; a pair with a blank side has none. Read from the mean attention over
        layers and heads, or ``layer``'s mean over its heads, or its ``head``; ``shift``:
        from the step that has the target piece as its input (Shift-Att); ``method``:
        argmax, mutual-argmax or threshold (0.3). See ``inspection.extraction``."""
        extraction = Extraction(layer, head, shift, method)
        return self.align_each(sources, targets, [extraction])[0]

    def align_each(
        self, sources: Sequence[str], targets: Sequence[str], extractions: Sequence[Extraction]
    ) -> list[list[list[tuple[int, int]]]]:
        """``align``'s links of each pair read by each of ``extractions`` (one list of pairs
        per extraction), from one forced decoding of the pairs: comparing extractions costs
        one pass over the pairs, not one per extraction."""
        chosen = [self.check_extraction(extraction) for extraction in extractions]
        if len(sources) != len(targets):
            raise DataError(f"{len(sources)} sources but {len(targets)} targets")
        return self._forced_links(sources, targets, chosen)

    def _forced_links(
        self, sources: Sequence[str], targets: Sequence[str], extractions: Sequence[Extraction]
    ) -> list[list[list[tuple[int, int]]]]:
        """``align_each`` once its arguments are checked (a model that keeps attention)."""
        raise NotImplementedError

    def score(
        self,
        sources: Sequence[str],
        references: Sequence[str],
        lang: str | None = None,
        progress: bool = False,
        remove_bpe: bool = False,
        **search: Any,
    ) -> Evaluation:
        """Translate ``sources`` and score them against ``references``: sacreBLEU, chrF, and
        the Multi30k literature's lowercased, tokenized BLEU (for ``lang``, default the
        model's target language), as ``seq2seq evaluate`` does; ``remove_bpe`` as its
        ``--remove-bpe`` (subword-nmt pieces joined before scoring; the translations
        returned keep them)."""
        from seq2seq.text.metrics import score_translations

        if len(sources) != len(references):
            raise DataError(
                f"{len(sources)} sources but {len(references)} references: they must pair up "
                "line by line"
            )
        settings = self.searching(**search)
        start = time.perf_counter()
        hyps = [t.text for t in self.translate_all(list(sources), progress, settings)]
        seconds = time.perf_counter() - start
        scores = score_translations(hyps, list(references), lang or self.tgt_lang, remove_bpe)
        return Evaluation(scores, hyps, seconds)

    def attention(
        self,
        source: str,
        reference: str | None = None,
        layer: int | None = None,
        method: Method = "argmax",
        **search: Any,
    ) -> AttentionMaps:
        """The attention of the model's translation of ``source`` (or, with ``reference``,
        of forced decoding of it): the maps, pieces, words, word alignment, and ``plot()``.
        ``layer`` (Transformer): the layer whose mean over heads is aligned (None: the mean
        over every layer)."""
        raise Seq2SeqError(NO_ATTENTION)


@dataclass(frozen=True)
class CheckpointModel(TranslationModel):
    """Checkpoints (one model, or several as an ensemble) searched by seq2seq."""

    trained: Trained = dataclasses.field(kw_only=True)

    @property
    def tgt_lang(self) -> str | None:
        return self.trained.tgt_lang

    @property
    def src_lang(self) -> str | None:
        return self.trained.src_lang

    @cached_property
    def heads(self) -> tuple[int, ...]:  # a forward pass: once per model, not per check
        return head_axes(self.trained)

    def source_pieces(self, text: str) -> int:
        return len(self.trained.vocab.src.encode(text))

    def searching(self, **options: Any) -> SearchSettings:
        search = super().searching(**options)
        if search.bf16:  # one line per process where the device only emulates bf16
            warn_once_if_bf16_emulated(next(self.trained.model.parameters()).device.type)
        return search

    def _stream(
        self,
        lines: Iterable[str | None],
        progress: bool,
        search: SearchSettings,
        extraction: Extraction | None,
    ) -> Iterator[Translation]:
        finish = None if extraction is None else partial(self._aligned, extraction=extraction)
        return translate_stream(
            self.trained, lines, search, **self._batching(progress), finish=finish
        )

    def _translate_all(
        self,
        lines: Sequence[str],
        progress: bool,
        search: SearchSettings,
        extraction: Extraction | None,
    ) -> list[Translation]:
        """Batched by length over all of ``lines`` at once, not chunk by chunk."""
        translations = translate_lines(self.trained, lines, search, **self._batching(progress))
        return translations if extraction is None else self._aligned(translations, extraction)

    def _aligned(
        self, translations: list[Translation], extraction: Extraction
    ) -> list[Translation]:
        """``translations`` with every hypothesis's word links, read by ``extraction`` from
        its attention when teacher-forced (as ``attention`` and the server read it)."""
        found = hypotheses_attention(
            self.trained, translations, max_tokens=self.max_tokens,
            max_source_len=self.max_source_len,
        )  # fmt: skip
        return [
            dataclasses.replace(
                translation,
                alignments=[
                    extracted_links(found[i, k], extraction) if (i, k) in found else []
                    for k in range(len(translation.hypotheses))
                ],
            )  # fmt: skip
            for i, translation in enumerate(translations)
        ]

    def _forced_links(
        self, sources: Sequence[str], targets: Sequence[str], extractions: Sequence[Extraction]
    ) -> list[list[list[tuple[int, int]]]]:
        links: list[list[list[tuple[int, int]]]] = [[[] for _ in sources] for _ in extractions]
        pairs = [i for i, pair in enumerate(zip(sources, targets, strict=True)) if all(
            side.strip() for side in pair)]  # fmt: skip
        stream = reference_attention(
            self.trained, [sources[i] for i in pairs], [targets[i] for i in pairs],
            self.max_tokens,
        )  # fmt: skip
        for sentence in stream:
            each = extracted_links_each(sentence, extractions)
            for found, sentence_links in zip(links, each, strict=True):
                found[pairs[sentence.index]] = sentence_links
        return links

    def attention(
        self,
        source: str,
        reference: str | None = None,
        layer: int | None = None,
        method: Method = "argmax",
        **search: Any,
    ) -> AttentionMaps:
        check_layer_choice(layer, self.heads)
        if reference is not None:
            stream = reference_attention(self.trained, [source], [reference], self.max_tokens)
        else:
            settings = self.searching(**search)
            stream = translation_attention(
                self.trained, [source], settings, self.max_tokens,
                max_source_len=self.max_source_len,
            )  # fmt: skip
        return attention_of(next(iter(stream)), layer, method)


@dataclass(frozen=True)
class ExportModel(TranslationModel):
    """A CTranslate2 export, searched by CTranslate2 under seq2seq's search semantics."""

    exported: Exported = dataclasses.field(kw_only=True)

    @property
    def tgt_lang(self) -> str | None:
        return self.exported.tgt_lang

    def source_pieces(self, text: str) -> int:
        return len(self.exported.src.encode(text))

    def _stream(
        self,
        lines: Iterable[str | None],
        progress: bool,
        search: SearchSettings,
        extraction: Extraction | None,
    ) -> Iterator[Translation]:
        from seq2seq.inference.ct2_translate import translate_stream_ct2

        return translate_stream_ct2(self.exported, lines, search, **self._batching(progress))

    def searching(self, **options: Any) -> SearchSettings:
        from seq2seq.inference.ct2_translate import check_export_search

        search = super().searching(**options)
        check_export_search(search)
        return search


def is_export(path: str | Path) -> bool:
    """A folder written by ``seq2seq export`` (CTranslate2's ``model.bin`` inside)."""
    return Path(path).is_dir() and (Path(path) / "model.bin").is_file()


def is_huggingface(path: str | Path) -> bool:
    """A transformers model: a folder ``save_pretrained`` wrote, or a Hub id."""
    if is_export(path):
        return False
    return is_huggingface_model(path) or looks_like_hub_id(path)


def load(  # the public API's one door: its settings are its arguments
    model: str | Path | Sequence[str | Path],
    ensemble_weights: Sequence[float] | None = None,
    max_tokens: int = 4096,
    max_source_len: int = 512,
    ctranslate2_workers: int = 1,
    export: bool | None = None,
    ensemble_attention: int | None = None,
    recase: str | Path | Recaser | Literal[False] | None = None,
    hf: bool | None = None,
    **search: Any,
) -> TranslationModel:
    """Open a model to translate with.

    Args:
        model: the name of a released model (``seq2seq models`` lists them: its file is
            checked against its recorded sha256 first); a checkpoint written by ``seq2seq
            fit`` (or ``seq2seq average``); several (a list) decode as an ensemble, the mean
            of their log-probabilities at every step; a folder written by ``seq2seq
            export --to ctranslate2``; or a Hugging Face transformers MarianMT model (see
            ``hf``).
        ensemble_weights: with several checkpoints, each one's weight in that mean (scaled
            to sum to 1; default: equal), as ``--ensemble-weights``.
        max_tokens: source pieces per batch, padding included.
        max_source_len: longer sources are cut to this many pieces, with a warning.
        ctranslate2_workers: an export's batches translated side by side (CTranslate2's
            inter_threads), as ``--ctranslate2-workers``.
        export: True: ``model`` is an export's folder (a folder that is not one is an error
            saying so); None: a folder holding CTranslate2's ``model.bin`` is one.
        ensemble_attention: with several checkpoints, the member (0 is the first) whose own
            attention ``attention`` shows; None: the members' mean over heads and layers
            (``--ensemble-attention``).
        hf: True: ``model`` is a Hugging Face transformers MarianMT model, a folder
            ``save_pretrained`` wrote or a Hub id (a network needed); None: a folder with a
            ``config.json`` and no CTranslate2 ``model.bin``, or ``owner/name`` naming no
            file here, is one (docs/huggingface.md).
        recase: a casing table (``seq2seq recase --learn``'s file, or a ``Recaser``) that
            restores case to the translations of a model trained on lowercased text; None:
            a released model's own table, if it has one; False: none.
        search: the search to use unless a call says otherwise (``beam``, ``n_best``,
            ``length_penalty``, ``max_len_ratio``, ``max_len_offset``, ``bf16``); unset
            ones keep the model's own (its config's test search). The names of an earlier
            version (``weights``, ``attention_from``, ``workers``) still work, with a
            FutureWarning.
    """
    search = upgraded_load_arguments(search)
    settings = OpenSettings(
        search.pop("ensemble_weights", ensemble_weights),
        search.pop("ensemble_attention", ensemble_attention),
        search.pop("ctranslate2_workers", ctranslate2_workers),
    )
    paths = [model] if isinstance(model, str | Path) else list(model)
    if not paths:
        raise Seq2SeqError("no model given: a checkpoint, several, or an export's folder")
    released = [resolve(str(p)) if looks_like_a_name(p) else None for p in paths]
    paths = [r.checkpoint if r else p for r, p in zip(released, paths, strict=True)]
    if recase is None:  # a released model that writes lowercase comes with its casing table
        recase = next((r.casing for r in released if r and r.casing), None)
    # the table before any model is read: a wrong path fails at once
    recaser = Recaser.load(recase) if isinstance(recase, str | Path) else recase or None
    kind = _kind(paths, export, hf)
    settings.check(kind, len(paths))
    opened = _opened(kind, paths, settings, max_tokens, max_source_len)
    return dataclasses.replace(
        opened, search=opened.searching(**search), recaser=recaser,
        extraction=_recorded_extraction(released) if len(paths) == 1 else MEAN_ARGMAX,
    )  # fmt: skip


def _recorded_extraction(released: list[Released | None]) -> Extraction:
    """How a released model's manifest says its links are best read (the mean over layers
    and heads for a checkpoint, or a manifest that says nothing)."""
    chosen = released[0].alignment if released[0] else None
    if not chosen:
        return MEAN_ARGMAX
    return Extraction(
        chosen.get("layer"),
        chosen.get("head"),
        bool(chosen.get("shift")),
        chosen.get("method", "argmax"),
    )


@dataclass(frozen=True)
class OpenSettings:
    """How ``load`` reads several checkpoints (an ensemble) or an export."""

    ensemble_weights: Sequence[float] | None = None
    ensemble_attention: int | None = None
    ctranslate2_workers: int = 1

    def check(self, kind: ModelKind, count: int) -> None:
        """Settings that apply to ``count`` models of this ``kind``, or one line why not."""
        ensemble = self.ensemble_weights is not None or self.ensemble_attention is not None
        if kind != "checkpoints" and ensemble:
            raise Seq2SeqError(
                f"ensemble_weights and ensemble_attention apply to checkpoints, not {kind}"
            )
        if kind != "export" and self.ctranslate2_workers != 1:
            raise Seq2SeqError("ctranslate2_workers applies to a CTranslate2 export only")
        if kind != "checkpoints":
            return
        try:
            normalized_weights(self.ensemble_weights, count)  # one weight each, not all 0
        except ValueError as error:
            raise Seq2SeqError(f"ensemble_weights: {error}") from None
        if self.ensemble_attention is not None and not 0 <= self.ensemble_attention < count:
            raise Seq2SeqError(
                f"ensemble_attention {self.ensemble_attention} names no member of {count} "
                "checkpoints"
            )


ModelKind = Literal["a transformers model", "export", "checkpoints"]


def _kind(paths: list[str | Path], export: bool | None, hf: bool | None) -> ModelKind:
    """What ``paths`` hold, as ``load``'s ``export`` and ``hf`` say or the files show."""
    if (export or hf) and len(paths) != 1:
        raise Seq2SeqError(f"an export or a transformers model is one, got {len(paths)} paths")
    if hf or (hf is None and len(paths) == 1 and is_huggingface(paths[0])):
        return "a transformers model"
    if export or (export is None and len(paths) == 1 and is_export(paths[0])):
        return "export"
    for path in paths:
        check_checkpoint_path(path)
    return "checkpoints"


def _opened(
    kind: ModelKind,
    paths: list[str | Path],
    settings: OpenSettings,
    max_tokens: int,
    max_source_len: int,
) -> TranslationModel:
    """The model of ``paths``, read as ``kind``, searching as it was trained to."""
    if kind == "a transformers model":
        from seq2seq.inference.huggingface import load_huggingface

        trained = load_huggingface(paths[0])
        return CheckpointModel(trained.search, max_tokens, max_source_len, trained=trained)
    if kind == "export":
        from seq2seq.inference.ct2_translate import load_export

        exported = load_export(paths[0], workers=settings.ctranslate2_workers)
        return ExportModel(exported.search, max_tokens, max_source_len, exported=exported)
    trained = load_ensemble(
        [str(p) for p in paths], settings.ensemble_attention, settings.ensemble_weights
    )
    return CheckpointModel(trained.search, max_tokens, max_source_len, trained=trained)
