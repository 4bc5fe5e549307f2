"""Parts of a model kept fixed while the rest trains (``model.freeze``), for any family.

A parameter belongs to ``embeddings`` if an ``nn.Embedding`` holds it (a matrix tied to the
output layer too: a tied output projection is frozen with its embeddings), else to
``encoder`` if its top-level module's name starts with ``encoder`` (``encoder``,
``encoder_norm``), else to ``decoder`` (the decoder, its attention, the output layer).
"""

from __future__ import annotations

from typing import Literal

from torch import nn

Part = Literal["embeddings", "encoder", "decoder"]


def model_parts(model: nn.Module) -> dict[str, Part]:
    """Each parameter's name (tied ones once, as ``named_parameters`` gives them) -> its part."""
    embeddings = [m for m in model.modules() if isinstance(m, nn.Embedding)]
    embedded = {id(p) for m in embeddings for p in m.parameters()}
    parts: dict[str, Part] = {}
    for name, parameter in model.named_parameters():
        if id(parameter) in embedded:
            parts[name] = "embeddings"
        elif name.split(".")[0].startswith("encoder"):
            parts[name] = "encoder"
        else:
            parts[name] = "decoder"
    return parts


def freeze(model: nn.Module, frozen: list[Part]) -> tuple[int, int]:
    """Stops the gradients of the ``frozen`` parts of ``model``: (trainable, all) weights."""
    parts = model_parts(model)
    for name, parameter in model.named_parameters():
        if parts[name] in frozen:
            parameter.requires_grad_(False)
    parameters = list(model.parameters())
    return sum(p.numel() for p in parameters if p.requires_grad), sum(p.numel() for p in parameters)
