"""The Multi30k recipes as users run them: `seq2seq fit --config base --config recipe [...]`
for every composition of configs/multi30k/recipes.yaml. Each parses (through the CLI's own
`--print_config`), builds a model that translates, keeps its own run folder, and differs
from the recipe it is compared with only where it means to (so a comparison is fair)."""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
import yaml

from seq2seq.commands.main import main
from seq2seq.inference.checkpoint import build_model
from seq2seq.inference.search import SearchSettings, translate_batch
from seq2seq.model import VocabSpec
from seq2seq.text.tokenizer import VocabSettings
from seq2seq.training.data.datamodule import TranslationDataModule

MULTI30K = Path(__file__).resolve().parents[1] / "configs" / "multi30k"
RECIPES: dict[str, dict[str, list[str]]] = yaml.safe_load(
    (MULTI30K / "recipes.yaml").read_text(encoding="utf-8")
)
COMPOSITIONS = [(pair, name) for pair, recipes in RECIPES.items() for name in recipes]
ATTENTION_VARIANTS = [
    "luong-dot",
    "luong-general",
    "luong-concat",
    "luong-location",
    "luong-local-m",
    "luong-local-p",
    "rnn-dot-product",
    "rnn-multihead",
]
# What an attention variant may change against bahdanau: the attention block, the decoder
# style (Luong's variants use his decoder with input feeding) and the encoder's output size
# (dot-type scores); and its run folder.
MAY_DIFFER = ("attention", "style", "input_feeding", "encoder_output")
VOCAB = VocabSpec(src_size=50, tgt_size=40, pad_id=0, bos_id=2, eos_id=3, joint=False)


def recipe_files(pair: str, name: str) -> list[Path]:
    """The --config files of a recipe, in order."""
    return [MULTI30K / path for path in RECIPES[pair][name]]


def printed_config(files: list[Path], *options: str) -> dict[str, Any]:
    """`seq2seq fit --config F1 --config F2 ... [OPTIONS] --print_config`: the config a run
    would use."""
    printed = io.StringIO()
    with (
        mock.patch.object(sys, "argv", ["seq2seq"]),  # not pytest's arguments
        contextlib.redirect_stdout(printed),
        pytest.raises(SystemExit) as exit_,
    ):
        configs = [arg for path in files for arg in ("--config", str(path))]
        main(["fit", *configs, *options, "--print_config"])
    assert exit_.value.code in (0, None)
    return yaml.safe_load(printed.getvalue())


@pytest.fixture(scope="module")
def effective() -> dict[tuple[str, str], dict[str, Any]]:
    """Every recipe's merged config, parsed once for the whole module."""
    return {(pair, name): printed_config(recipe_files(pair, name)) for pair, name in COMPOSITIONS}


def vocabulary(config: dict[str, Any]) -> VocabSettings:
    """The SentencePiece settings (and so the cache key) a recipe's data section trains."""
    return TranslationDataModule(**config["data"]).vocab_settings


def without(config: dict[str, Any], *dotted: str) -> dict[str, Any]:
    """A copy of ``config`` without the keys ``dotted`` names (``model.lr``...)."""
    config = yaml.safe_load(yaml.safe_dump(config))
    for key in dotted:
        *parents, last = key.split(".")
        node = config
        for parent in parents:
            node = node[parent]
        node.pop(last)
    return config


def test_every_config_file_belongs_to_a_recipe_that_starts_from_a_base() -> None:
    shipped = {str(p.relative_to(MULTI30K)) for p in MULTI30K.rglob("*.yaml")} - {"recipes.yaml"}
    used = {path for recipes in RECIPES.values() for files in recipes.values() for path in files}
    assert used == shipped
    for pair, name in COMPOSITIONS:
        first, *rest = RECIPES[pair][name]
        # the deepest: a student's R-Drop file over its bf16 file, shape, anchor, lowercase
        assert first in ("base/rnn.yaml", "base/transformer.yaml") and 1 <= len(rest) <= 5
        assert all(path.startswith(f"{pair}/") for path in rest), (pair, name)


def test_the_bases_name_no_attention() -> None:
    """A recipe's attention is its own: a base naming one would hand its init_args to the
    recipe's attention class where the two share a name (see the next test)."""
    for base in ("rnn", "transformer"):
        model = yaml.safe_load((MULTI30K / "base" / f"{base}.yaml").read_text())["model"]
        assert "attention" not in model["network"]["init_args"]


def test_a_later_class_path_keeps_the_init_args_the_new_class_shares(tmp_path: Path) -> None:
    """jsonargparse's merge, as configs/README.md describes it: a later file that names
    another attention class keeps the earlier class's init_args that the new one takes
    (hidden_size) and drops the others (dropout: LuongGlobalAttention has none)."""
    additive = tmp_path / "additive.yaml"
    additive.write_text(
        "model: {network: {init_args: {attention: {class_path: seq2seq.attention.AdditiveAttention,"
        " init_args: {hidden_size: 128, dropout: 0.1}}}}}"
    )
    luong = tmp_path / "luong.yaml"
    luong.write_text(
        "model: {network: {init_args: {attention: {"
        "class_path: seq2seq.attention.LuongGlobalAttention, init_args: {score: general}}}}}"
    )
    files = [*recipe_files("en-de", "bahdanau"), additive, luong]
    attention = printed_config(files)["model"]["network"]["init_args"]["attention"]
    assert attention == {
        "class_path": "seq2seq.attention.LuongGlobalAttention",
        "init_args": {"score": "general", "hidden_size": 128},
    }


@pytest.mark.parametrize(("pair", "name"), COMPOSITIONS, ids=lambda part: part)
def test_recipe_builds_a_model_that_translates(
    pair: str, name: str, effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    config = effective[pair, name]
    torch.manual_seed(0)
    model = build_model(config, VOCAB).eval()
    src, src_lens = torch.randint(4, 50, (2, 6)), torch.tensor([6, 3])
    logits, attn = model(src, src_lens, torch.randint(4, 40, (2, 5)))
    assert logits.shape == (2, 5, VOCAB.tgt_size)
    assert attn is not None and attn.shape[0] == 2 and attn.shape[-2:] == (5, 6)
    assert (attn[1, ..., 3:] == 0).all()  # padding gets no attention
    task = config["model"]
    search = SearchSettings(beam=task["test_beam"], length_penalty=task["length_penalty"])
    translations = translate_batch(model, src, src_lens, search)
    assert [len(sentence) for sentence in translations] == [1, 1]
    assert all(0 < len(h.tokens) <= 19 for [h] in translations)  # 1.5 * 6 + 10 at most


def test_every_recipe_has_its_own_run_folder_and_its_pair(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    for (pair, name), config in effective.items():
        assert config["trainer"]["default_root_dir"] == f"runs/multi30k-{pair}-{name}"
        source, target = pair.split("-")
        assert (config["data"]["src_lang"], config["data"]["tgt_lang"]) == (source, target)


def test_luong_variants_use_the_luong_decoder_with_input_feeding(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    for (_, name), config in effective.items():
        args = config["model"]["network"]["init_args"]
        if name.startswith("luong-"):
            assert args["style"] == "luong" and args["input_feeding"] is True, name
        elif name.startswith(("bahdanau", "rnn-")):
            assert args["style"] == "bahdanau", name


@pytest.mark.parametrize("name", ATTENTION_VARIANTS)
def test_attention_variant_differs_from_bahdanau_only_in_its_variant(
    name: str, effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    variable = ["trainer.default_root_dir", *(f"model.network.init_args.{k}" for k in MAY_DIFFER)]
    variant, bahdanau = effective["en-de", name], effective["en-de", "bahdanau"]
    assert without(variant, *variable) == without(bahdanau, *variable)


def test_the_hour_recipe_changes_only_the_schedule_and_budget_of_luong_concat(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """luong-concat-hour is luong-concat with a cosine schedule fitted to an hour, more
    patience, and its last epochs kept for averaging: the model is the same."""
    hour, base = effective["en-de", "luong-concat-hour"], effective["en-de", "luong-concat"]
    assert (hour["model"]["schedule"], base["model"]["schedule"]) == ("cosine", "inverse_sqrt")
    assert hour["trainer"]["max_time"] == "00:01:00:00"
    [recent] = hour["trainer"]["callbacks"]
    assert recent["init_args"]["monitor"] == "epoch" and recent["init_args"]["save_top_k"] == 5
    budget = ["model.schedule", "early_stopping.patience"]
    budget += [f"trainer.{key}" for key in ("max_epochs", "max_time", "default_root_dir")]
    budget += ["trainer.callbacks"]
    assert without(hour, *budget) == without(base, *budget)


def test_the_best_rnn_changes_only_text_case_learning_rate_and_search_of_the_hour_one(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """luong-concat-lowercase trains luong-concat-hour's model for the same hour on
    lowercased text, with a higher peak after a longer warm-up, and follows the lowercased
    BLEU it is scored with; it keeps ten recent epochs and searches with the length
    penalty val chose for their mean (2.0)."""
    best, hour = (
        effective["en-de", "luong-concat-lowercase"],
        effective["en-de", "luong-concat-hour"],
    )
    assert (best["data"]["lowercase"], hour["data"]["lowercase"]) == (True, False)
    assert (
        best["checkpoint"]["monitor"] == best["early_stopping"]["monitor"] == "val_bleu_literature"
    )
    assert (best["model"]["lr"], best["model"]["warmup_steps"]) == (0.002, 1000)
    assert best["model"]["length_penalty"] == 2.0
    [recent] = best["trainer"]["callbacks"]
    assert recent["init_args"]["monitor"] == "epoch" and recent["init_args"]["save_top_k"] == 10
    changes = ["data.lowercase", "trainer.default_root_dir", "trainer.callbacks"]
    changes += ["early_stopping.monitor", "checkpoint.monitor", "checkpoint.filename"]
    changes += ["model.lr", "model.warmup_steps", "model.length_penalty"]
    assert without(best, *changes) == without(hour, *changes)


def test_the_sampled_recipe_is_the_lowercased_one_reading_drawn_segmentations(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-lowercase-sampled changes only the training segmentations (and its run
    folder); the data module it builds draws them, from the recipe's unigram vocabulary."""
    sampled = effective["en-de", "transformer-lowercase-sampled"]
    recipe = effective["en-de", "transformer-lowercase"]
    changes = ["data.subword_nbest", "data.subword_alpha", "trainer.default_root_dir"]
    assert without(sampled, *changes) == without(recipe, *changes)
    data = TranslationDataModule(**sampled["data"])  # reads nothing until asked
    assert (data.subword_nbest, data.subword_alpha) == (64, 0.1)
    assert vocabulary(sampled) == vocabulary(recipe)


def test_the_rdrop_recipe_is_the_lowercased_one_with_the_kl_term_in_the_same_hour(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-lowercase-rdrop changes only R-Drop's weight, the epochs its doubled
    forward fits into the recipe's hour (under half of 28) and its run folder."""
    rdrop = effective["en-de", "transformer-lowercase-rdrop"]
    recipe = effective["en-de", "transformer-lowercase"]
    changes = ["model.rdrop_alpha", "trainer.max_epochs", "trainer.default_root_dir"]
    assert without(rdrop, *changes) == without(recipe, *changes)
    assert (rdrop["model"]["rdrop_alpha"], recipe["model"]["rdrop_alpha"]) == (5.0, 0.0)
    assert rdrop["trainer"]["max_epochs"] <= recipe["trainer"]["max_epochs"] // 2


def test_the_long_rdrop_recipe_trains_as_many_epochs_as_the_recipe(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-lowercase-rdrop-28 is the hour's R-Drop recipe over the recipe's own
    epochs (28), without the hour's time limit and keeping the last 10 epochs for val to
    choose from: nothing else changes but its run folder."""
    long = effective["en-de", "transformer-lowercase-rdrop-28"]
    hour = effective["en-de", "transformer-lowercase-rdrop"]
    recipe = effective["en-de", "transformer-lowercase"]
    changes = ["trainer.max_epochs", "trainer.max_time", "trainer.callbacks"]
    changes += ["trainer.default_root_dir"]
    assert without(long, *changes) == without(hour, *changes)
    assert long["trainer"]["max_epochs"] == recipe["trainer"]["max_epochs"] == 28
    assert (long["trainer"]["max_time"], hour["trainer"]["max_time"]) == (None, "00:01:00:00")
    (kept,) = long["trainer"]["callbacks"]
    assert kept["init_args"]["monitor"] == "epoch" and kept["init_args"]["save_top_k"] == 10
    assert long["model"]["rdrop_alpha"] == 5.0


def test_the_anchor_on_subword_nmt_pieces_changes_only_the_vocabulary(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-anchor-subword-nmt is the anchor with a word vocabulary over a corpus cut
    already, large enough for every one of the ~9.7k pieces, and its own run folder."""
    replica = effective["en-de", "transformer-anchor-subword-nmt"]
    anchor = effective["en-de", "transformer-anchor"]
    changes = ["data.vocab_size", "data.spm_model_type", "trainer.default_root_dir"]
    assert without(replica, *changes) == without(anchor, *changes)
    assert (replica["data"]["spm_model_type"], replica["data"]["vocab_size"]) == ("word", 12000)


def test_the_deep_encoder_student_is_the_anchor_with_layers_moved_to_the_encoder(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-student-6-2 keeps every setting of the anchor but the layer split (6+2
    against 4+4), the vocabulary (8k against 10k) and its run folder, and stays a student of
    at most 3M parameters (issue 40's bound) at its full vocabulary."""
    student = effective["en-de", "transformer-student-6-2"]
    anchor = effective["en-de", "transformer-anchor"]
    layers = [f"model.network.init_args.{side}_layers" for side in ("encoder", "decoder")]
    changes = [*layers, "data.vocab_size", "trainer.default_root_dir"]
    assert without(student, *changes) == without(anchor, *changes)
    shape = student["model"]["network"]["init_args"]
    assert (shape["encoder_layers"], shape["decoder_layers"]) == (6, 2)
    assert (student["data"]["vocab_size"], anchor["data"]["vocab_size"]) == (8000, 10000)
    size = student["data"]["vocab_size"]
    full = VocabSpec(src_size=size, tgt_size=size, pad_id=0, bos_id=2, eos_id=3, joint=True)
    parameters = sum(p.numel() for p in build_model(student, full).parameters())
    assert parameters <= 3_000_000


def test_the_short_students_differ_from_theirs_only_by_the_schedule(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-student-short is the anchor on a 3600-update cosine schedule, and
    transformer-student-6-2-short is the 6+2 student on that same schedule: shape and
    schedule compose, nothing else moves but the run folder."""
    schedule = ["trainer.max_steps", "model.warmup_steps", "model.schedule"]
    changes = [*schedule, "trainer.default_root_dir"]
    for shortened, full in [
        ("transformer-student-short", "transformer-anchor"),
        ("transformer-student-6-2-short", "transformer-student-6-2"),
    ]:
        assert without(effective["en-de", shortened], *changes) == without(
            effective["en-de", full], *changes
        )
    fast = effective["en-de", "transformer-student-6-2-short"]
    short = effective["en-de", "transformer-student-short"]
    assert without(fast, *changes) != without(short, *changes)
    for key in schedule:
        section, name = key.split(".")
        assert fast[section][name] == short[section][name]
    assert (short["trainer"]["max_steps"], short["model"]["schedule"]) == (3600, "cosine")


def test_the_bf16_student_is_the_short_6_2_student_in_bf16_with_more_updates(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-student-6-2-bf16 composes the 6+2 shape with a file of its own: bf16
    autocast where the machine computes bf16 natively (precision auto) and 5400 updates on
    the short schedule, nothing else moved."""
    bf16 = effective["en-de", "transformer-student-6-2-bf16"]
    short = effective["en-de", "transformer-student-6-2-short"]
    changes = ["trainer.precision", "trainer.max_steps", "trainer.default_root_dir"]
    assert without(bf16, *changes) == without(short, *changes)
    assert (bf16["trainer"]["precision"], short["trainer"]["precision"]) == ("auto", "32-true")
    assert bf16["trainer"]["max_steps"] == 5400


def test_the_rdrop_student_is_the_bf16_student_with_the_kl_term_over_the_same_pairs(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """transformer-student-6-2-bf16-rdrop adds R-Drop to the bf16 student and halves its
    updates, since each update runs the batch twice: the same sentences through the model,
    on the same warm-up and cosine; nothing else moves but its run folder."""
    rdrop = effective["en-de", "transformer-student-6-2-bf16-rdrop"]
    plain = effective["en-de", "transformer-student-6-2-bf16"]
    changes = ["model.rdrop_alpha", "trainer.max_steps", "trainer.default_root_dir"]
    assert without(rdrop, *changes) == without(plain, *changes)
    assert (rdrop["model"]["rdrop_alpha"], plain["model"]["rdrop_alpha"]) == (5.0, 0.0)
    assert 2 * rdrop["trainer"]["max_steps"] == plain["trainer"]["max_steps"]
    assert rdrop["model"]["schedule"] == "cosine"


@pytest.mark.parametrize(
    "name",
    [
        "transformer-lowercase",
        "transformer-lowercase-sampled",
        "transformer-lowercase-rdrop",
        "transformer-lowercase-rdrop-28",
        "luong-concat-lowercase",
    ],
)
def test_a_lowercased_recipe_follows_the_literature_bleu_it_is_scored_with(
    name: str, effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    config = effective["en-de", name]
    assert config["data"]["lowercase"] is True
    assert config["checkpoint"]["monitor"] == config["early_stopping"]["monitor"]
    assert config["checkpoint"]["monitor"] == "val_bleu_literature"
    assert "val_bleu_literature" in config["checkpoint"]["filename"]


@pytest.mark.parametrize(
    ("name", "also"),
    [("bahdanau", ["trainer.callbacks"]), ("transformer", ["model.length_penalty"])],
)
def test_the_en_fr_recipe_is_the_en_de_one_on_french_targets(
    name: str, also: list[str], effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """En-Fr keeps the En-De recipe (tuned on En-De val) but for what its own val set chose:
    the Transformer's length penalty, the RNN's last epochs kept for averaging."""
    differ = ["data.tgt_lang", "trainer.default_root_dir", *also]
    assert without(effective["en-fr", name], *differ) == without(effective["en-de", name], *differ)


def test_the_en_fr_recipes_carry_what_their_own_val_chose(
    effective: dict[tuple[str, str], dict[str, Any]],
) -> None:
    """docs/benchmarks/selection.md: the Transformer's last epoch under a length penalty of
    2.0; the RNN's mean of the last five epochs under 1.0, which it keeps for averaging."""
    transformer, bahdanau = effective["en-fr", "transformer"], effective["en-fr", "bahdanau"]
    assert transformer["model"]["length_penalty"] == 2.0
    assert bahdanau["model"]["length_penalty"] == 1.0
    [recent] = bahdanau["trainer"]["callbacks"]
    assert recent["init_args"]["monitor"] == "epoch" and recent["init_args"]["save_top_k"] == 5
    assert recent["init_args"]["filename"].startswith("recent-")


@pytest.mark.parametrize("name", ["transformer", "luong-concat-hour"])
def test_the_selection_overlay_keeps_ten_epochs_and_lifts_max_time_only(
    name: str, effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """configs/select-on-val.yaml, last after a recipe (docs/benchmarks/selection.md), keeps
    the last 10 epochs for val to choose among and changes nothing else of the recipe."""
    selected = printed_config(
        [*recipe_files("en-de", name), MULTI30K.parent / "select-on-val.yaml"]
    )
    [recent] = selected["trainer"]["callbacks"]
    assert recent["init_args"]["monitor"] == "epoch" and recent["init_args"]["save_top_k"] == 10
    assert selected["trainer"]["max_time"] is None
    changed = ["trainer.callbacks", "trainer.max_time"]
    assert without(selected, *changed) == without(effective["en-de", name], *changed)


@pytest.mark.parametrize(("pair", "name"), COMPOSITIONS)
def test_recipe_pins_the_vocabulary_settings_on_any_number_of_cores(
    pair: str, name: str, effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """SentencePiece's pieces depend on its thread count, whose default is every core: a
    recipe pins it, so that its vocabulary (and cache key) is the one its figures came from
    on a laptop of 8 cores as on the 2-core reference machine."""
    settings = []
    for cores in (1, 2, 8):
        with mock.patch("os.cpu_count", return_value=cores):
            settings.append(vocabulary(effective[pair, name]))
    assert settings[0] == settings[1] == settings[2]


@pytest.mark.parametrize(
    ("transformer", "rnn"),
    [("transformer-lowercase", "luong-concat-lowercase"), ("transformer", "luong-concat-hour")],
)
def test_a_transformer_and_an_rnn_recipe_share_the_vocabulary_an_ensemble_needs(
    transformer: str, rnn: str, effective: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """`--ckpt A --ckpt B` decodes only models of one vocabulary: the README's ensemble of
    the two lowercased recipes (and selection.md's cased one) train the same SentencePiece
    model, so the second run reads the first one's cache."""
    settings = [vocabulary(effective["en-de", name]) for name in (transformer, rnn)]
    assert settings[0] == settings[1]
