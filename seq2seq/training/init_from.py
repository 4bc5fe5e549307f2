"""``fit --init_from MODEL``: a new run that starts from a trained model's weights.

The model brings its architecture, its vocabulary and its search; the run brings the rest
(data, optimizer, schedule, steps, checkpoint folder). Before parsing, ``starting_options``
writes what the model brings as options placed ahead of the user's own, so that a config
that says nothing of the architecture takes the model's; after parsing,
``check_contradictions`` refuses, in one line each, an option that changed what the model
fixes. The task loads the weights (``model.init_from``) and the data module encodes with
the model's own vocabulary (``data.vocab_from``), both through ``open_trained``.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Mapping
from typing import Any

from torch import Tensor, nn

from seq2seq.common.errors import UsageError
from seq2seq.inference.opening import Opened, open_trained

INIT_OPTION = "--init_from"
# what a fine-tune may set otherwise than the model it starts from, of its model's settings
MAY_CHANGE = frozenset({"dropout", "attention_dropout", "activation_dropout", "init"})
# the data.* options that make a vocabulary: fixed by the model's own
VOCABULARY_OPTIONS = (
    "vocab_size", "spm_model_type", "joint_vocab", "character_coverage", "max_piece_length",
    "lowercase",
)  # fmt: skip


def init_from_value(args: list[str]) -> str | None:
    """The value of ``--init_from`` on a command line (``--init_from X`` or ``=X``)."""
    for index, arg in enumerate(args):
        if arg == INIT_OPTION and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(INIT_OPTION + "="):
            return arg.partition("=")[2]
    return None


def model_block(opened: Opened) -> dict[str, Any]:
    """The ``model.network`` block (class_path, init_args) a run starting from the model
    builds: the model's own, less an output bias that only banned ids (``starting_bias``)."""
    block = copy.deepcopy(opened.trained.config["model"]["network"])
    if starting_bias(opened) is None:
        block.setdefault("init_args", {}).pop("output_bias", None)
    return block


def starting_bias(opened: Opened) -> Tensor | None:
    """The output bias a run starts from (None: none). A transformers model opened for
    translating bans ids its generation never emits (its pad) by an output bias of -inf; a
    run leaves the ban behind, since the smoothed loss reads every logit: the bias keeps its
    finite part, and goes if that is zero (MarianMT's usual bias)."""
    bias = opened.trained.model.state_dict().get("output.bias")  # references, not copies
    if bias is None or opened.kind != "huggingface":
        return bias
    finite = bias.masked_fill(bias.isinf(), 0.0)
    return finite if finite.any() else None


def starting_weights(opened: Opened) -> dict[str, Tensor]:
    """The model's weights in float32, as a run starts from them (``starting_bias``)."""
    state = {key: value.float() for key, value in opened.trained.model.state_dict().items()}
    bias = starting_bias(opened)
    if bias is None:
        state.pop("output.bias", None)
    else:
        state["output.bias"] = bias.float()
    return state


def vocabulary_settings(opened: Opened) -> dict[str, Any]:
    """The data.* vocabulary options of the model's own run (a transformers model: its sizes)."""
    data = opened.trained.config.get("data") or {}
    if opened.kind == "huggingface":
        spec = opened.trained.vocab.spec
        return {"vocab_size": spec.src_size, "joint_vocab": spec.joint, "lowercase": False}
    return {key: data[key] for key in VOCABULARY_OPTIONS if key in data}


def starting_options(source: str) -> list[str]:
    """What the model ``source`` brings, as fit options to put before the user's own: its
    architecture, languages, vocabulary and search, and where the task and the data find
    its weights and vocabulary."""
    opened = open_trained(source)
    data = opened.trained.config.get("data") or {}
    search = opened.trained.search
    vocabulary = vocabulary_settings(opened)
    languages = [lang for lang in ("src_lang", "tgt_lang") if data.get(lang)]
    options = {
        "--model.network": json.dumps(model_block(opened)),
        "--model.init_from": source,
        "--model.test_beam": str(search.beam),
        "--model.length_penalty": str(search.length_penalty),
        "--model.max_len_ratio": str(search.max_len_ratio),
        "--model.max_len_offset": str(search.max_len_offset),
        "--data.vocab_from": source,
        **{f"--data.{key}": _option_value(value) for key, value in vocabulary.items()},
        **{f"--data.{lang}": str(data[lang]) for lang in languages},
    }  # fmt: skip
    return [part for option, value in options.items() for part in (option, value)]


def _option_value(value: Any) -> str:
    """A setting as its option is written: text as it is, anything else as JSON (true, 0.5)."""
    return value if isinstance(value, str) else json.dumps(value)


def _settings(namespace: Any) -> dict[str, Any]:
    """A jsonargparse Namespace (or a mapping) as a plain dict."""
    if hasattr(namespace, "as_dict"):
        return namespace.as_dict()
    return dict(namespace) if isinstance(namespace, Mapping) else {}


def _class_defaults(class_path: str) -> dict[str, Any]:
    """The defaults of a model class's settings (those a config may leave out)."""
    module, _, name = class_path.rpartition(".")
    cls = getattr(__import__(module, fromlist=[name]), name)
    return {
        key: parameter.default
        for key, parameter in inspect.signature(cls.__init__).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def check_contradictions(settings: Any, source: str) -> None:
    """Refuses (UsageError, one line) a parsed ``fit`` config whose options change what the
    model ``source`` fixes: its model class and settings (dropout excepted), its vocabulary
    options, or the model and vocabulary the task and the data start from."""
    opened = open_trained(source)
    here = f"{INIT_OPTION} {source}"
    for key in ("model.init_from", "data.vocab_from"):
        if settings.get(key) != source:
            raise UsageError(
                f"{here}: --{key} {settings.get(key)} names another model; leave it out"
            )
    if opened.kind == "huggingface" and settings.get("data.subword_nbest"):
        raise UsageError(
            f"{here}: --data.subword_nbest samples segmentations of seq2seq's own "
            "vocabularies; a MarianMT tokenizer has none to sample (leave it out)"
        )
    block, parsed = model_block(opened), _settings(settings.get("model.network"))
    if parsed.get("class_path") != block["class_path"]:
        raise UsageError(
            f"{here}: --model.network is {parsed.get('class_path')} but the model is a "
            f"{block['class_path']}; the architecture comes from the model (leave it out)"
        )
    wanted = {**_class_defaults(block["class_path"]), **(block.get("init_args") or {})}
    given = _settings(parsed.get("init_args"))
    for key, value in given.items():
        if key in MAY_CHANGE or key not in wanted or _same(value, wanted[key]):
            continue
        raise UsageError(
            f"{here}: model.network.init_args.{key} is {value!r} here but {wanted[key]!r} in the "
            f"model; the architecture comes from the model (leave {key} out)"
        )
    for key, value in vocabulary_settings(opened).items():
        if not _same(settings.get(f"data.{key}"), value):
            raise UsageError(
                f"{here}: data.{key} is {settings.get(f'data.{key}')!r} here but {value!r} in "
                f"the model; the data are encoded with the model's own vocabulary (leave "
                f"{key} out)"
            )


def _same(given: Any, wanted: Any) -> bool:
    """Equal settings, a nested class block compared as plain data."""
    return json.dumps(_plain(given), sort_keys=True, default=str) == json.dumps(
        _plain(wanted), sort_keys=True, default=str
    )


def _plain(value: Any) -> Any:
    if hasattr(value, "as_dict"):
        return value.as_dict()
    if isinstance(value, tuple):
        return list(value)
    return value


def load_starting_weights(network: nn.Module, source: str) -> str:
    """``network`` (built from the model's own config and vocabulary) given the weights of
    the model ``source``; what it started from, in words, for the fit summary."""
    opened = open_trained(source)
    start = opened.trained.model
    if type(start) is not type(network):
        raise UsageError(
            f"{INIT_OPTION} {source}: the model is a {type(start).__name__}, the run builds a "
            f"{type(network).__name__}"
        )
    network.load_state_dict(starting_weights(opened))
    return opened.describe()
