"""The WMT14 recipe's data path, offline: a local dataset of the Hub's `wmt14` shape (a
README naming the `de-en` config, Parquet shards with a `translation` column, splits
train / validation / test) read through the shipped config's own data block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from test_data import corpus

from seq2seq.common.errors import DataError
from seq2seq.training.data.datamodule import TranslationDataModule

CONFIG = (
    Path(__file__).resolve().parents[1] / "configs" / "wmt14" / "en-de" / "transformer-base.yaml"
)
SPLITS = {"train": 400, "validation": 30, "test": 20}
README = """---
configs:
- config_name: de-en
  data_files:
  - split: train
    path: de-en/train-*
  - split: validation
    path: de-en/validation-*
  - split: test
    path: de-en/test-*
---
A local stand-in for the Hub's wmt14 dataset.
"""


@pytest.fixture(scope="module")
def wmt_like(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("wmt14")
    (root / "de-en").mkdir()
    (root / "README.md").write_text(README)
    for seed, (split, n) in enumerate(SPLITS.items()):
        english, german = corpus(n, seed)
        rows = [{"de": de, "en": en} for en, de in zip(english, german, strict=True)]
        table = pa.table({"translation": rows})
        pq.write_table(table, root / "de-en" / f"{split}-00000-of-00001.parquet")
    return root


def wmt_data(source: Path, cache: Path, **changes: Any) -> TranslationDataModule:
    """The config's data block with a local source and a vocabulary the tiny corpus fills."""
    data = yaml.safe_load(CONFIG.read_text())["data"]
    data.update(source=str(source), cache_dir=str(cache), vocab_size=300, **changes)
    return TranslationDataModule(**data)


def test_the_recipe_reads_a_dataset_of_the_hub_shape(wmt_like: Path, tmp_path: Path) -> None:
    data = wmt_data(wmt_like, tmp_path)
    data.setup("fit")
    rows, lengths = data.tokenized("train")
    assert len(rows) == len(lengths) == SPLITS["train"]
    english, german = corpus(SPLITS["validation"], 1)
    assert data.references("validation") == german and data.sources("validation") == english
    batch = next(iter(data.val_dataloader()))
    index = int(batch.ids[0])
    assert batch.src[0, : batch.src_lens[0] - 1].tolist() == data.vocab.src.encode(english[index])
    assert data.text("train").files is None  # the Hub's own Arrow files, mapped as they are
    again = wmt_data(wmt_like, tmp_path)
    assert again.text("train").key == data.text("train").key  # found again, not re-read


def test_a_missing_language_is_named(wmt_like: Path, tmp_path: Path) -> None:
    data = wmt_data(wmt_like, tmp_path, src_lang="fr")
    with pytest.raises(DataError, match=r"no fr-de pair \(languages: de, en\)"):
        _ = data.vocab


@pytest.mark.slow  # builds Transformer base
def test_the_shipped_config_parses(run_here) -> None:
    printed = run_here("fit", "--config", str(CONFIG), "--print_config")
    assert printed.returncode == 0, printed.stderr[-2000:]
    config = yaml.safe_load(printed.stdout)
    assert config["data"]["source"] == "wmt14" and config["data"]["hub_config"] == "de-en"
    assert config["trainer"]["strategy"] == "ddp" and config["trainer"]["devices"] == 8
