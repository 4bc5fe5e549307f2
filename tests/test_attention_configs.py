"""The Multi30k attention configs: each parses, builds and runs, and differs from
bahdanau.yaml only where its variant needs to (so a comparison between them is fair)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml

from seq2seq.checkpoint import build_model
from seq2seq.model import VocabSpec

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs" / "multi30k" / "en-de"
NAMES = [
    "bahdanau",
    "luong-dot",
    "luong-general",
    "luong-concat",
    "luong-location",
    "luong-local-m",
    "luong-local-p",
    "rnn-dot-product",
    "rnn-multihead",
]
# What a variant may change: the attention block, the decoder style (Luong's variants use
# his decoder with input feeding), the encoder's output size (dot-type scores) and its run
# folder.
MAY_DIFFER = ("attention", "style", "input_feeding", "encoder_output")
VOCAB = VocabSpec(src_size=50, tgt_size=40, pad_id=0, bos_id=2, eos_id=3, joint=False)


def load(name: str) -> dict[str, Any]:
    return yaml.safe_load((CONFIG_DIR / f"{name}.yaml").read_text(encoding="utf-8"))


def without_variant(config: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(config)
    del config["trainer"]["default_root_dir"]
    for key in MAY_DIFFER:
        config["model"]["model"]["init_args"].pop(key, None)
    return config


@pytest.mark.parametrize("name", NAMES)
def test_config_builds_a_model_that_translates(name: str) -> None:
    torch.manual_seed(0)
    model = build_model(load(name), VOCAB).eval()
    src, src_lens = torch.randint(4, 50, (2, 6)), torch.tensor([6, 3])
    logits, attn = model(src, src_lens, torch.randint(4, 40, (2, 5)))
    assert logits.shape == (2, 5, VOCAB.tgt_size)
    assert attn.shape[0] == 2 and attn.shape[-2:] == (5, 6)
    assert (attn[1, ..., 3:] == 0).all()


@pytest.mark.parametrize("name", NAMES[1:])
def test_config_differs_from_bahdanau_only_in_its_variant(name: str) -> None:
    assert without_variant(load(name)) == without_variant(load("bahdanau"))


def test_luong_variants_use_the_luong_decoder_with_input_feeding() -> None:
    for name in NAMES:
        args = load(name)["model"]["model"]["init_args"]
        if name.startswith("luong-"):
            assert args["style"] == "luong" and args["input_feeding"] is True, name


def test_every_config_has_its_own_run_folder() -> None:
    roots = [load(name)["trainer"]["default_root_dir"] for name in NAMES]
    assert roots == [f"runs/multi30k-en-de-{name}" for name in NAMES]


def test_the_hour_recipe_changes_only_the_schedule_and_budget_of_luong_concat() -> None:
    """luong-concat-hour.yaml is luong-concat.yaml with a cosine schedule fitted to an hour,
    more patience, and its last epochs kept for averaging: the model is the same."""
    hour, base = load("luong-concat-hour"), load("luong-concat")
    assert hour["model"]["schedule"] == "cosine" and "schedule" not in base["model"]
    assert hour["trainer"]["max_time"] == "00:01:00:00"
    [recent] = hour["trainer"].pop("callbacks")
    assert recent["init_args"]["monitor"] == "epoch" and recent["init_args"]["save_top_k"] == 5
    for config in (hour, base):
        config["model"].pop("schedule", None)
        for key in ("max_epochs", "max_time", "default_root_dir"):
            del config["trainer"][key]
        del config["early_stopping"]["patience"]
    assert hour == base


def test_the_best_rnn_recipe_changes_only_text_case_learning_rate_and_search_of_the_hour_one() -> (
    None
):
    """luong-concat-lowercase.yaml trains luong-concat-hour.yaml's model for the same epochs
    on lowercased text, with a higher peak after a longer warm-up, a length penalty of 1.5,
    and follows the lowercased BLEU it is scored with."""
    best, hour = load("luong-concat-lowercase"), load("luong-concat-hour")
    assert best["data"].pop("lowercase") is True and "lowercase" not in hour["data"]
    assert best.pop("checkpoint")["monitor"] == "val_bleu_literature"
    assert best["early_stopping"].pop("monitor") == "val_bleu_literature"
    assert (best["model"]["lr"], best["model"]["warmup_steps"]) == (0.002, 1000)
    assert best["model"]["length_penalty"] == 1.5
    for config in (best, hour):
        for key in ("lr", "warmup_steps", "length_penalty"):
            del config["model"][key]
        del config["trainer"]["default_root_dir"]
    assert best == hour
