"""The module paths of earlier layouts (before commands, inference and training got their
own packages; before common/, text/ and training/data/), still importable: a saved run's
config names ``seq2seq.checkpoint_io.SafeCheckpointIO`` (every checkpoint written before
the first move carries it), and users' scripts may import ``seq2seq.checkpoint``,
``seq2seq.errors`` or ``seq2seq.data.batching``. An old path resolves to the module at its
new path (the same module object, so classes compare equal) with a DeprecationWarning that
names the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from types import ModuleType

OLD_TO_NEW = {  # old module path -> where it lives now
    "seq2seq.cli": "seq2seq.commands.main",
    "seq2seq.command_line": "seq2seq.commands.options",
    "seq2seq.attention_commands": "seq2seq.commands.attention",
    "seq2seq.checkpoint_commands": "seq2seq.commands.checkpoint",
    "seq2seq.corpus_command": "seq2seq.commands.corpus",
    "seq2seq.distill_command": "seq2seq.commands.distill",
    "seq2seq.translate_commands": "seq2seq.commands.translate",
    "seq2seq.serve.command": "seq2seq.commands.serve",
    "seq2seq.training_cli": "seq2seq.commands.fit",
    **{
        f"seq2seq.{name}": f"seq2seq.training.{name}"
        for name in (
            "task",
            "loss",
            "schedule",
            "epoch_metrics",
            "checkpoint_io",
            "stopping",
            "resume",
            "run_lock",
            "distributed",
            "quiet",
            "fit_summary",
        )
    },  # fmt: skip
    **{
        f"seq2seq.{name}": f"seq2seq.inference.{name}"
        for name in ("search", "checkpoint", "ensemble", "translator", "decoding", "export")
    },
    "seq2seq.ct2_translate": "seq2seq.inference.ct2_translate",
    # the files/ package and the small modules at the top went into common/ and text/
    **{
        f"seq2seq.{name}": f"seq2seq.common.{name}"
        for name in ("errors", "ranges", "interruptible", "atomic", "moved")
    },
    **{f"seq2seq.{name}": f"seq2seq.text.{name}" for name in ("tokenizer", "metrics")},
    "seq2seq.text_lines": "seq2seq.text.lines",
    "seq2seq.arriving_lines": "seq2seq.text.arriving_lines",
    "seq2seq.files": "seq2seq.common",  # the parent the next three are imported through
    "seq2seq.files.atomic": "seq2seq.common.atomic",
    "seq2seq.files.text_lines": "seq2seq.text.lines",
    "seq2seq.files.arriving_lines": "seq2seq.text.arriving_lines",
    "seq2seq.positional_encoding_plot": "seq2seq.inspection.positional_encoding",
    # data/ went into training/data/, but for its batches (inference) and the demo corpus (text)
    "seq2seq.data": "seq2seq.training.data",
    "seq2seq.data.batching": "seq2seq.inference.batching",
    "seq2seq.data.demo_corpus": "seq2seq.text.demo_corpus",
    **{
        f"seq2seq.data.{name}": f"seq2seq.training.data.{name}"
        for name in (
            "datamodule",
            "encode_pool",
            "sampled_segmentation",
            "sources",
            "split_text",
            "tokenised",
        )
    },  # fmt: skip
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module at the new one."""

    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{spec.name} is now {self.new}", DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        """The module at the new path is already executed."""


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Consulted before the ordinary finders, and only for the old paths: under an old
    package's alias (``seq2seq.files`` is ``seq2seq.common``) they would find a second copy
    of a module that sits in the new package."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if (new := OLD_TO_NEW.get(fullname)) is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _Alias(new))


def install() -> None:
    """Make the old paths importable (once per process)."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
