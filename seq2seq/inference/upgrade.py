"""What earlier versions wrote, read as this version writes it: the one place that knows
what changed (CHANGELOG.md, "Compatibility", says what a release may break).

- ``RENAMED_CLASSES``: class paths that moved, as configs name them (``class_path``). It is
  applied to the run config a checkpoint carries (``upgraded_payload``, which every
  checkpoint read goes through), to the configs ``seq2seq fit`` reads (``config_loader``
  around the CLI's YAML loader), and by ``seq2seq upgrade``, which rewrites a checkpoint.
- ``RENAMED_KEYS``: config keys that were renamed (``model.test_beam_size`` is
  ``model.test_beam``), applied with the class paths; ``fit`` also takes the old spellings
  of their command-line options (``RENAMED_OPTIONS``).
- A checkpoint written before its payload held the search: the search is read from its
  config's model options. A search written before ``beam_size`` became ``beam`` (payloads
  and exports alike) is read with the new name.
- A CTranslate2 export of description format 1 kept only its length penalty.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import yaml

from seq2seq.inference.search import SearchSettings

RENAMED_CLASSES = {  # old class path -> the class's path now
    "seq2seq.checkpoint_io.SafeCheckpointIO": "seq2seq.training.checkpoint_io.SafeCheckpointIO",
}
RENAMED_KEYS = {"val_beam_size": "val_beam", "test_beam_size": "test_beam"}  # the task's
RENAMED_OPTIONS = {f"--model.{old}": f"--model.{new}" for old, new in RENAMED_KEYS.items()}
RENAMED_SEARCH_FIELDS = {"beam_size": "beam"}  # SearchSettings' fields, as payloads store them
# The task's options that set its test search, before the payload held the search itself.
CONFIG_SEARCH_KEYS = {
    "beam": "test_beam",
    "length_penalty": "length_penalty",
    "max_len_ratio": "max_len_ratio",
    "max_len_offset": "max_len_offset",
}


def upgraded_config(config: Any) -> Any:
    """A parsed config (mappings, lists, values) with every renamed class path and key
    replaced."""
    if isinstance(config, dict):
        return {RENAMED_KEYS.get(k, k): upgraded_config(value) for k, value in config.items()}
    if isinstance(config, list):
        return [upgraded_config(value) for value in config]
    return RENAMED_CLASSES.get(config, config) if isinstance(config, str) else config


def config_loader(load: Callable[[str], Any]) -> Callable[[str], Any]:
    """A YAML loader (jsonargparse's, which ``seq2seq fit`` reads its configs and option
    values with) whose results have the class paths of now."""

    def load_upgraded(text: str) -> Any:
        return upgraded_config(load(text))

    return load_upgraded


def upgraded_payload(payload: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's payload (``checkpoint.Payload``) as this version writes it: its config
    with the class paths of now, and its test search (written whole since the search was
    kept in the payload; before, read from the config's model options)."""
    upgraded = dict(payload)
    if config_text := payload.get("config"):
        written = yaml.safe_load(config_text)
        if (config := upgraded_config(written)) != written:
            upgraded["config"] = yaml.safe_dump(config, sort_keys=False)
        if "search" not in payload:
            options = config.get("model") or {}
            found = {f: options[key] for f, key in CONFIG_SEARCH_KEYS.items() if key in options}
            upgraded["search"] = dataclasses.asdict(SearchSettings(**found))
    if "search" in payload:
        upgraded["search"] = upgraded_search(payload["search"])
    return upgraded


def upgraded_search(search: dict[str, Any]) -> dict[str, Any]:
    """A stored ``SearchSettings`` with its fields' names of now."""
    return {RENAMED_SEARCH_FIELDS.get(name, name): value for name, value in search.items()}


def upgraded_arguments(args: list[str]) -> list[str]:
    """``fit``'s command line with the old spellings of renamed options replaced (hidden
    aliases: CHANGELOG.md says for how long)."""
    renamed = []
    for arg in args:
        option, equals, value = arg.partition("=")
        renamed.append(RENAMED_OPTIONS.get(option, option) + equals + value)
    return renamed


def export_search(description: dict[str, Any]) -> SearchSettings:
    """The search a CTranslate2 export keeps (format 1 kept its length penalty alone)."""
    if description["format"] == 1:
        return SearchSettings(length_penalty=description["length_penalty"])
    return SearchSettings(**upgraded_search(description["search"]))
