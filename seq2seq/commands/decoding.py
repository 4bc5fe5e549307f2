"""What every command that translates shares: its search options (``DecodeSettings``), the
search keywords they give ``seq2seq.load`` (``search_options``), and the model
(``ModelSettings``: checkpoints or a CTranslate2 export) with the checks that need no loading
(``check_model_options``); ``open_model`` opens it with ``seq2seq.load``, so that
``translate``, ``evaluate``, ``distill`` and ``serve`` translate by one path, as a script
does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from seq2seq.common.errors import UsageError
from seq2seq.common.ranges import Range
from seq2seq.inference.checkpoint import check_checkpoint_path
from seq2seq.inference.ensemble import normalized_weights
from seq2seq.inference.released import released_names, resolve
from seq2seq.inference.search import DEFAULT_SEARCH
from seq2seq.inspection.extraction import Extraction
from seq2seq.inspection.word_alignments import Method
from seq2seq.translation_model import TranslationModel, load


@dataclass(frozen=True)
class DecodeSettings:
    """The options of every command that translates: the search and its batches.

    Attributes:
        beam: beam size; 1 is greedy search
        length_penalty: GNMT alpha, 0 for none; unset: the model's config
            (model.length_penalty) or 1.0
        max_len_ratio: longest output = ratio * source pieces + offset
        max_len_offset: added to the longest output, see --max-len-ratio
        max_tokens: source pieces per batch, padding included; a longer sentence is a batch
            alone
        max_source_len: cut longer sources to this many pieces, with a warning
        bf16: search under bfloat16 autocast (faster on CPUs with AVX512-BF16/AMX; scores
            may differ in the last digits)
    """

    beam: Annotated[int, Range(1)] = DEFAULT_SEARCH.beam
    length_penalty: Annotated[float, Range(0)] | None = None
    max_len_ratio: Annotated[float, Range(0)] = DEFAULT_SEARCH.max_len_ratio
    max_len_offset: Annotated[int, Range(0)] = DEFAULT_SEARCH.max_len_offset
    max_tokens: Annotated[int, Range(1)] = 4096
    max_source_len: Annotated[int, Range(1)] = 512
    bf16: bool = False


BEAM_SEARCH = DecodeSettings()  # the defaults of translate, evaluate and serve


@dataclass(frozen=True)
class ModelSettings:
    """What a command translates with: checkpoints (several: an ensemble) or an export.

    Attributes:
        ckpt: checkpoint written by `seq2seq fit`; repeat it to decode with an ensemble (the
            mean of the models' log-probabilities at every step)
        ensemble_weights: with several --ckpt, the members' weights in that mean, one per
            --ckpt in the same order (scaled to sum to 1; default: equal)
        ctranslate2: a CTranslate2 export (`seq2seq export`, a folder) instead of a
            checkpoint; search options as with --ckpt (see the README), --bf16 excepted
        ctranslate2_workers: with --ctranslate2, batches translated side by side by this
            many workers, which share the threads (CTranslate2's inter_threads): more
            sentences/s over many batches, no gain on one batch
        recase: a casing table written by `seq2seq recase --learn`: restores case to the
            translations of a model trained on lowercased text (data.lowercase); a released
            model that writes lowercase brings its own (--recase none: lowercase output)
        model: a released model, by name (`seq2seq models` lists them), instead of --ckpt
        hf: a Hugging Face transformers MarianMT model (OPUS-MT, say): a folder written by
            save_pretrained, or a Hub id (with a network), instead of --ckpt
    """

    ckpt: list[str] | None = None
    ensemble_weights: list[float] | None = None
    ctranslate2: str | None = None
    ctranslate2_workers: Annotated[int, Range(1)] = 1
    recase: str | None = None
    model: str | None = None
    hf: str | None = None

    @property
    def paths(self) -> list[str]:
        """What the model is read from: the --model name, the --ckpt files, or the
        --ctranslate2 folder."""
        if self.model is not None or self.hf is not None:
            return [self.model or self.hf or ""]
        return [self.ctranslate2] if self.ctranslate2 is not None else self.ckpt or []

    @property
    def recase_table(self) -> str | Literal[False] | None:
        """``--recase`` as ``seq2seq.load`` takes it: ``none`` is False (no recasing, not
        even a released model's own)."""
        return False if self.recase == "none" else self.recase


NO_MODEL = ModelSettings()  # the default, before the options: a model option is required


@dataclass(frozen=True)
class AlignmentSettings:
    """How word links are read from attention (translate --alignment, and the server's
    links when a request asks for "alignment"): by default from the mean attention over
    layers and heads, one argmax link per target word, as `attention` reads them.

    Attributes:
        alignment_layer: read the links from this decoder layer's mean over its heads
            (negative counts from the last; a Transformer's)
        alignment_head: from this head of --alignment-layer alone
        alignment_shift: from the step that has each target piece as its input (Shift-Att,
            Chen et al. 2020), not the step that writes it
        alignment_method: one link per target word (argmax), only the pairs that are each
            other's best match both ways (mutual-argmax: fewer links, more precise), or
            every weight above 0.3 (threshold)
    """

    alignment_layer: int | None = None
    alignment_head: Annotated[int, Range(0)] | None = None
    alignment_shift: bool = False
    alignment_method: Method = "argmax"

    @property
    def chosen(self) -> bool:
        """Whether an option chose other than the mean over layers and heads."""
        return self != MEAN_ALIGNMENT

    def extraction(self) -> Extraction | None:
        """The extraction the options choose (None: they choose none, and the model's own
        is read); a head needs its layer."""
        if not self.chosen:
            return None
        if self.alignment_head is not None and self.alignment_layer is None:
            raise UsageError("--alignment-head chooses a head of --alignment-layer: give the layer")
        return Extraction(
            self.alignment_layer, self.alignment_head, self.alignment_shift, self.alignment_method
        )


MEAN_ALIGNMENT = AlignmentSettings()  # the default: the mean over layers and heads


def search_options(options: DecodeSettings, n_best: int = 1) -> dict[str, Any]:
    """The search keywords of ``seq2seq.load`` that the options give. --length-penalty alone
    has no default of its own (None): unset, it keeps the model's, so that a model is scored
    as its config says; the other options always set theirs."""
    return {
        "beam": options.beam,
        "n_best": n_best,
        "length_penalty": options.length_penalty,
        "max_len_ratio": options.max_len_ratio,
        "max_len_offset": options.max_len_offset,
        "bf16": options.bf16,
    }


def check_ensemble_weights(ckpt: list[str] | None, ensemble_weights: list[float] | None) -> None:
    """``--ensemble-weights``, if given, is one weight >= 0 per ``--ckpt``, not all 0."""
    if ensemble_weights is None:
        return
    if not ckpt:
        raise UsageError("--ensemble-weights weighs the members of --ckpt; no --ckpt given")
    try:
        normalized_weights(ensemble_weights, len(ckpt))
    except ValueError as error:
        raise UsageError(f"--ensemble-weights: {error}") from None


def released_list() -> str:
    """``released models: a, b`` (or that there are none), for a message."""
    names = released_names()
    return f"released models: {', '.join(names)}" if names else "no released models found"


def check_model_options(command: str, chosen: ModelSettings) -> None:
    """The checks of a decoding ``command``'s ``chosen`` model that need no loading: ``--model`` (a
    released model's name), ``--ckpt`` (each path a checkpoint file, weighted by
    ``--ensemble-weights`` if several) or ``--ctranslate2``, one of the three."""
    given = [o for o, v in (("--model", chosen.model), ("--ckpt", chosen.ckpt), ("--hf", chosen.hf),
                            ("--ctranslate2", chosen.ctranslate2)) if v is not None]  # fmt: skip
    if not given:
        raise UsageError(
            f"{command} needs --model, --ckpt, --hf or --ctranslate2 ({released_list()})"
        )
    if len(given) > 1:
        raise UsageError(f"{' and '.join(given)} exclude each other")
    if chosen.ctranslate2_workers != 1 and chosen.ctranslate2 is None:
        raise UsageError("--ctranslate2-workers applies to --ctranslate2 only")
    check_model_files(chosen.model, chosen.ckpt, chosen.ensemble_weights)


def check_model_files(
    name: str | None, ckpt: list[str] | None, ensemble_weights: list[float] | None
) -> None:
    """A released model's ``name`` that exists (one line naming those that do, else), each
    ``ckpt`` a checkpoint file, and ``--ensemble-weights`` one per checkpoint."""
    if name is not None:
        resolve(name)
    check_ensemble_weights(ckpt, ensemble_weights)
    for path in ckpt or []:
        check_checkpoint_path(path)


def open_model(
    command: str, chosen: ModelSettings, options: DecodeSettings, n_best: int = 1
) -> TranslationModel:
    """The checkpoints of ``--ckpt`` (several: an ensemble, weighted by
    ``--ensemble-weights``) or the export of ``--ctranslate2``, checked and loaded, searching
    with its own settings changed by ``options`` (an unset --length-penalty keeps the
    model's)."""
    check_model_options(command, chosen)
    return load(
        chosen.paths, ensemble_weights=chosen.ensemble_weights, max_tokens=options.max_tokens,
        max_source_len=options.max_source_len, ctranslate2_workers=chosen.ctranslate2_workers,
        export=chosen.ctranslate2 is not None, hf=chosen.hf is not None or None,
        recase=chosen.recase_table,
        **search_options(options, n_best),
    )  # fmt: skip
