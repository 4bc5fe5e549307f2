"""What the task accumulates over an epoch, as torchmetrics metrics.

torchmetrics keeps each metric's state per process and syncs it across processes when
the metric is computed, so under DDP every process runs the same collectives at the same
point, and the gathering is the library's.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat


class Perplexity(Metric):
    """exp of the token-weighted mean NLL per token (without label smoothing), at most e^50.

    Logged as a metric object, so Lightning computes it at the end of an epoch together
    with the other logged values, and torchmetrics syncs its sums across processes
    there: every process runs that collective at the same point, whatever the callbacks.
    An update only adds on the device (torchmetrics' MeanMetric would read each value back
    to look for NaNs, a wait for the GPU at every step); a NaN shows in the perplexity.
    """

    full_state_update = False
    nll_sum: Tensor
    tokens: Tensor

    def __init__(self) -> None:
        super().__init__()
        self.add_state("nll_sum", default=torch.tensor(0.0), dist_reduce_fx="sum")
        self.add_state("tokens", default=torch.tensor(0.0), dist_reduce_fx="sum")

    def update(self, nll: Tensor, tokens: int) -> None:
        """nll: [] a batch's summed NLL over its target tokens; tokens: how many there are."""
        self.nll_sum += nll.float()
        self.tokens += tokens

    def compute(self) -> Tensor:
        return torch.exp(torch.clamp(self.nll_sum / self.tokens, max=50.0))


class SplitTranslations(Metric):
    """The translations of a split as token ids, by sentence index, from every process.

    Under DDP each process decodes its own shard of the split (a few sentences twice,
    where the last shards are padded with repeats); scoring needs the whole corpus once.
    The states are tensors that torchmetrics concatenates across processes: sentence
    indices [N], hypothesis lengths [N] and all hypotheses' ids end to end [sum of lengths].
    """

    full_state_update = False
    indices: list[Tensor]
    lengths: list[Tensor]
    tokens: list[Tensor]

    def __init__(self) -> None:
        super().__init__()
        self.add_state("indices", default=[], dist_reduce_fx="cat")
        self.add_state("lengths", default=[], dist_reduce_fx="cat")
        self.add_state("tokens", default=[], dist_reduce_fx="cat")

    def update(self, indices: Tensor, hypotheses: list[list[int]]) -> None:
        """indices [B]: the sentences of a batch; hypotheses: their token ids."""
        self.indices.append(indices.detach().to(self.device, torch.long))
        lengths = [len(tokens) for tokens in hypotheses]
        self.lengths.append(torch.tensor(lengths, dtype=torch.long, device=self.device))
        flat = [token for tokens in hypotheses for token in tokens]
        self.tokens.append(torch.tensor(flat, dtype=torch.long, device=self.device))

    def compute(self) -> dict[int, list[int]]:
        """Token ids of every translated sentence, by index (a repeat keeps one copy)."""
        if isinstance(self.indices, list) and not self.indices:  # nothing translated
            return {}
        indices, lengths = dim_zero_cat(self.indices), dim_zero_cat(self.lengths)
        pieces = dim_zero_cat(self.tokens).split(lengths.tolist())
        return {int(i): p.tolist() for i, p in zip(indices, pieces, strict=True)}
