"""seq2seq: neural machine translation with pluggable, inspectable attention.

The Python API (docs/python.md):

    import seq2seq
    model = seq2seq.load("runs/demo/checkpoints/best.ckpt")
    model.translate("forty-two")
    model.attention("forty-two").plot()

Names are imported on first use, so ``import seq2seq`` (and every command that does not
need them) stays as light as the command line needs: no Lightning (``seq2seq.fit`` brings
it), no matplotlib.

The attention modules and model families are imported from where they live
(``from seq2seq.attention import AdditiveAttention``, ``seq2seq.transformer.Transformer``),
not from here: configs and checkpoints name them by those paths, and a class reachable as
``seq2seq.Transformer`` would be written into new configs under that shorter name.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {  # name -> the module that defines it
    # open a trained model, translate, score, look at its attention
    "load": "seq2seq.translation_model",
    "TranslationModel": "seq2seq.translation_model",
    "AttentionMaps": "seq2seq.inspection.sentence",
    "Aligned": "seq2seq.translation_model",
    "Extraction": "seq2seq.inspection.extraction",
    "Evaluation": "seq2seq.translation_model",
    "SearchSettings": "seq2seq.inference.search",
    "Recaser": "seq2seq.text.casing",
    # train from Python as `seq2seq fit` does
    "fit": "seq2seq.commands.fit",
    # the masks every attention module uses, and the Transformer's positions
    "masked_softmax": "seq2seq.masking",
    "sequence_mask": "seq2seq.masking",
    "sinusoidal_table": "seq2seq.transformer",
    # pictures
    "heatmap": "seq2seq.inspection.heatmap",
    # the one error every mistake in the user's input raises
    "Seq2SeqError": "seq2seq.common.errors",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from seq2seq.commands.fit import fit as fit
    from seq2seq.common.errors import Seq2SeqError as Seq2SeqError
    from seq2seq.inference.search import SearchSettings as SearchSettings
    from seq2seq.inspection.extraction import Extraction as Extraction
    from seq2seq.inspection.heatmap import heatmap as heatmap
    from seq2seq.inspection.sentence import AttentionMaps as AttentionMaps
    from seq2seq.masking import masked_softmax as masked_softmax
    from seq2seq.masking import sequence_mask as sequence_mask
    from seq2seq.text.casing import Recaser as Recaser
    from seq2seq.transformer import sinusoidal_table as sinusoidal_table
    from seq2seq.translation_model import Aligned as Aligned
    from seq2seq.translation_model import Evaluation as Evaluation
    from seq2seq.translation_model import TranslationModel as TranslationModel
    from seq2seq.translation_model import load as load


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'seq2seq' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
