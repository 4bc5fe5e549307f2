"""Hard word alignments from attention, symmetrisation of two directions, Pharaoh format.

A link ``(i, j)`` joins source word ``i`` and target word ``j`` (0-indexed, source first,
as in Pharaoh/Moses/fast_align files: ``0-0 1-2 2-1``). Attention maps here are word
level, ``[Tw, Sw]`` (target rows, source columns: see ``words.merge_to_words``).

With a second model trained in the reverse direction (target -> source), its attention
gives links the other way; ``symmetrize`` combines the two as Koehn et al. (2003) do:
``intersection`` (precise), ``union`` (complete), ``grow-diag`` (the intersection grown
into neighbouring, diagonal included, union links that align a still unaligned word) and
``grow-diag-final`` (then any union link that aligns a still unaligned word).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from torch import Tensor

Link = tuple[int, int]  # (source word, target word)
Method = Literal["argmax", "threshold"]
Symmetrization = Literal["intersection", "union", "grow-diag", "grow-diag-final"]

_NEIGHBOURS = [(-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1)]


def argmax_links(weights: Tensor) -> set[Link]:
    """One link per target word, to the source word it attends to most.

    weights: [Tw, Sw]. A row without attention mass (all zeros, or no source word at all)
    gives no link.
    """
    if weights.size(-1) == 0:
        return set()
    best = weights.argmax(dim=-1).tolist()
    has_mass = (weights.sum(dim=-1) > 0).tolist()
    return {(i, j) for j, (i, mass) in enumerate(zip(best, has_mass, strict=True)) if mass}


def threshold_links(weights: Tensor, threshold: float) -> set[Link]:
    """Every (source, target) pair whose weight is at least ``threshold`` (> 0). [Tw, Sw]."""
    if not 0 < threshold <= 1:
        raise ValueError(f"an alignment threshold must be in (0, 1], got {threshold}")
    return {(i, j) for j, i in (weights >= threshold).nonzero().tolist()}


def extract_links(weights: Tensor, method: Method, threshold: float = 0.3) -> set[Link]:
    """Links of a word-level map [Tw, Sw] by ``argmax`` or by ``threshold``."""
    if method == "argmax":
        return argmax_links(weights)
    if method == "threshold":
        return threshold_links(weights, threshold)
    raise ValueError(f"unknown alignment method {method!r}: choose argmax or threshold")


def transpose(links: Iterable[Link]) -> set[Link]:
    """Links of the reverse direction's model, (its source, its target), as (ours, ours)."""
    return {(j, i) for i, j in links}


def grow_diag(forward: set[Link], backward: set[Link], final: bool = False) -> set[Link]:
    """Koehn's grow-diag(-final) of two directions' links (both as (source, target))."""
    union = forward | backward
    links = forward & backward
    src_done = {i for i, _ in links}
    tgt_done = {j for _, j in links}

    def add(i: int, j: int) -> None:
        links.add((i, j))
        src_done.add(i)
        tgt_done.add(j)

    grown = True
    while grown:
        grown = False
        for i, j in sorted(links):
            for di, dj in _NEIGHBOURS:
                a, b = i + di, j + dj
                unaligned = a not in src_done or b not in tgt_done
                if unaligned and (a, b) in union and (a, b) not in links:
                    add(a, b)
                    grown = True
    if final:
        for direction in (forward, backward):
            for i, j in sorted(direction):
                if (i not in src_done or j not in tgt_done) and (i, j) not in links:
                    add(i, j)
    return links


def symmetrize(forward: set[Link], backward: set[Link], method: Symmetrization) -> set[Link]:
    """Combine the links of the two directions (both given as (source, target))."""
    if method == "intersection":
        return forward & backward
    if method == "union":
        return forward | backward
    if method == "grow-diag":
        return grow_diag(forward, backward)
    if method == "grow-diag-final":
        return grow_diag(forward, backward, final=True)
    raise ValueError(f"unknown symmetrization {method!r}")


def format_pharaoh(links: Iterable[Link]) -> str:
    """``{(1, 2), (0, 0)}`` -> ``'0-0 1-2'`` (sorted by source, then target)."""
    return " ".join(f"{i}-{j}" for i, j in sorted(links))
