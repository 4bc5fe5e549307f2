"""What earlier versions wrote, read as this version writes it: the one place that knows
what changed (CHANGELOG.md, "Compatibility", says what a release may break).

- ``RENAMED_CLASSES``: class paths that moved, as configs name them (``class_path``). It is
  applied to the run config a checkpoint carries (``upgraded_payload``, which every
  checkpoint read goes through), to the configs ``seq2seq fit`` reads (``config_loader``
  around the CLI's YAML loader), and by ``seq2seq upgrade``, which rewrites a checkpoint.
- ``RENAMED_KEYS``: config keys that were renamed (``model.test_beam_size`` is
  ``model.test_beam``), applied with the class paths; ``fit`` also takes the old spellings
  of their command-line options (``RENAMED_OPTIONS``), and the other commands theirs
  (``RENAMED_COMMAND_OPTIONS``), each with a warning naming the new one.
- ``RENAMED_LOAD_ARGUMENTS``: ``seq2seq.load``'s arguments renamed to share the names of
  the options that set them (``weights`` is ``ensemble_weights``, as ``--ensemble-weights``);
  an old name still works, with a FutureWarning naming the new one.
- A checkpoint written before its payload held the search: the search is read from its
  config's model options. A search written before ``beam_size`` became ``beam`` (payloads
  and exports alike) is read with the new name.
- A CTranslate2 export of description format 1 kept only its length penalty.
"""

from __future__ import annotations

import dataclasses
import logging
import warnings
from collections.abc import Callable
from typing import Any

import yaml

from seq2seq.inference.search import SearchSettings

log = logging.getLogger("seq2seq")

RENAMED_CLASSES = {  # old class path -> the class's path now
    "seq2seq.checkpoint_io.SafeCheckpointIO": "seq2seq.training.checkpoint_io.SafeCheckpointIO",
    # Luong et al.'s three attentions, named as one family (luong.py holds the three)
    **{
        f"seq2seq.attention{module}.{old}": f"seq2seq.attention{module}.Luong{new}"
        for module in ("", ".luong")
        for old, new in [
            ("LuongAttention", "GlobalAttention"),
            ("LocationAttention", "LocationAttention"),
            ("LocalAttention", "LocalAttention"),
        ]  # fmt: skip
    },
}
RENAMED_KEYS = {"val_beam_size": "val_beam", "test_beam_size": "test_beam"}  # the task's
# keys renamed at one place of a run config (the task's encoder-decoder was model.model)
RENAMED_NESTED_KEYS: dict[tuple[str, ...], str] = {("model", "model"): "network"}
RENAMED_OPTIONS = {f"--model.{old}": f"--model.{new}" for old, new in RENAMED_KEYS.items()}
RENAMED_OPTIONS["--model.model"] = "--model.network"  # and --model.model.init_args.* below
# The options of the commands beside fit, and seq2seq.load's arguments, renamed so that an
# option and the Python argument it sets share one name (dashes for underscores).
RENAMED_COMMAND_OPTIONS = {
    "--ensemble-weight": "--ensemble-weights",
    "--symmetrize": "--symmetrization",
}
RENAMED_LOAD_ARGUMENTS = {
    "weights": "ensemble_weights",
    "attention_from": "ensemble_attention",
    "workers": "ctranslate2_workers",
}
RENAMED_SEARCH_FIELDS = {"beam_size": "beam"}  # SearchSettings' fields, as payloads store them
# The task's options that set its test search, before the payload held the search itself.
CONFIG_SEARCH_KEYS = {
    "beam": "test_beam",
    "length_penalty": "length_penalty",
    "max_len_ratio": "max_len_ratio",
    "max_len_offset": "max_len_offset",
}


def upgraded_config(config: Any, path: tuple[str, ...] = ()) -> Any:
    """A parsed config (mappings, lists, values; at ``path`` in a run config, () for the
    whole) with every renamed class path and key replaced."""
    if isinstance(config, dict):
        upgraded = {}
        for key, value in config.items():
            new = str(RENAMED_NESTED_KEYS.get((*path, key)) or RENAMED_KEYS.get(key) or key)
            upgraded[new] = upgraded_config(value, (*path, new))
        return upgraded
    if isinstance(config, list):
        return [upgraded_config(value, path) for value in config]
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


def upgraded_arguments(args: list[str], renamed: dict[str, str] = RENAMED_OPTIONS) -> list[str]:
    """A command line (``fit``'s, unless ``renamed`` says whose) with the old spellings of
    renamed options replaced, each said in a warning (hidden aliases: CHANGELOG.md says for
    how long)."""
    upgraded = []
    for arg in args:
        option, equals, value = arg.partition("=")
        old = next((o for o in renamed if option == o or option.startswith(o + ".")), None)
        if old is not None:
            new = renamed[old] + option[len(old) :]
            log.warning("%s is now %s; the old name goes in a later release", option, new)
            option = new
        upgraded.append(option + equals + value)
    return upgraded


def upgraded_load_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """``seq2seq.load``'s keyword arguments with the old names replaced, each said in a
    FutureWarning (the way Python says an interface will change)."""
    upgraded = {}
    for name, value in arguments.items():
        if name in RENAMED_LOAD_ARGUMENTS:
            new = RENAMED_LOAD_ARGUMENTS[name]
            warnings.warn(f"seq2seq.load({name}=...) is now {new}=...; the old name goes in a "
                          "later release", FutureWarning, stacklevel=3)  # fmt: skip
            name = new
        upgraded[name] = value
    return upgraded


def export_search(description: dict[str, Any]) -> SearchSettings:
    """The search a CTranslate2 export keeps (format 1 kept its length penalty alone)."""
    if description["format"] == 1:
        return SearchSettings(length_penalty=description["length_penalty"])
    return SearchSettings(**upgraded_search(description["search"]))
