"""Every shipped config writes only under its run folder: `--trainer.default_root_dir DIR`
moves all of a run's outputs (checkpoints, logs) into DIR, so that a test, a benchmark or a
user can run a recipe anywhere without touching the recipe's own folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_recipes import MULTI30K, printed_config, recipe_files
from test_smoke_run import SHIPPED

# the keys under which Lightning and its callbacks and loggers take an output folder
OUTPUT_FOLDER_KEYS = {"default_root_dir", "dirpath", "save_dir", "log_dir"}
# the overlay the selection protocol adds after a recipe (its ModelCheckpoint names no folder)
WITH_OVERLAY = {
    "select-on-val@transformer@en-de": [
        *recipe_files("en-de", "transformer"),
        MULTI30K.parent / "select-on-val.yaml",
    ]
}


def output_folders(config: Any, where: str = "") -> Iterator[tuple[str, str]]:
    """Every (dotted key, folder) of a printed config whose key names an output folder."""
    if isinstance(config, dict):
        for key, value in config.items():
            inner = f"{where}.{key}" if where else str(key)
            if key in OUTPUT_FOLDER_KEYS and isinstance(value, str):
                yield inner, value
            else:
                yield from output_folders(value, inner)
    elif isinstance(config, list):
        for index, value in enumerate(config):
            yield from output_folders(value, f"{where}[{index}]")


@pytest.mark.parametrize("name", [*SHIPPED, *WITH_OVERLAY])
def test_the_root_dir_moves_every_output_folder_of_a_shipped_config(
    name: str, tmp_path: Path
) -> None:
    files = {**SHIPPED, **WITH_OVERLAY}[name]
    printed = printed_config(files, "--trainer.default_root_dir", str(tmp_path))
    folders = dict(output_folders(printed))
    assert folders["trainer.default_root_dir"] == str(tmp_path)
    pinned = {key: path for key, path in folders.items() if not Path(path).is_relative_to(tmp_path)}
    assert pinned == {}, f"{name} pins output folders that the root dir cannot move"


# How each shipped config was written before the release's renames (CHANGELOG.md): the
# encoder-decoder under model.model, Luong's attentions under their old names.
OLD_SPELLINGS = [
    ("\n  network:", "\n  model:"),
    ("LuongGlobalAttention", "LuongAttention"),
    ("LuongLocationAttention", "LocationAttention"),
    ("LuongLocalAttention", "LocalAttention"),
]


@pytest.mark.parametrize("name", [*SHIPPED, *WITH_OVERLAY])
def test_a_shipped_config_written_with_the_old_names_builds_the_same_run(
    name: str, tmp_path: Path
) -> None:
    """The upgrade table reads every old name of a shipped config as its new one: the
    config a run would use is the same, key for key."""
    files = {**SHIPPED, **WITH_OVERLAY}[name]
    old_files = []
    for index, path in enumerate(files):
        text = path.read_text()
        for new, old in OLD_SPELLINGS:
            text = text.replace(new, old)
        old_files.append(tmp_path / f"{index}-{path.name}")
        old_files[-1].write_text(text)
    assert printed_config(old_files) == printed_config(files)
