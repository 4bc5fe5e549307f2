"""Label-smoothed cross-entropy over the valid target positions, in one fused pass.

For logits x [N, V], target y and smoothing eps, per row:

    loss = (1 - eps) * (lse(x) - x_y) + eps * (lse(x) - mean(x))

which equals ``torch.nn.functional.cross_entropy(x, y, label_smoothing=eps)``; its
gradient is softmax(x) - (1 - eps) * onehot(y) - eps / V. Written as one autograd
function it reads the logits twice instead of building log-probabilities and their
gather/mean gradients, the costliest part of a step after the matrix products.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from seq2seq.masking import sequence_mask


class _SmoothedCrossEntropy(torch.autograd.Function):
    """Per-row smoothed loss and NLL of logits [N, V] (any float dtype; fp32 inside)."""

    @staticmethod
    def forward(ctx: Any, logits: Tensor, target: Tensor, eps: float) -> tuple[Tensor, Tensor]:
        x = logits.float()
        lse = torch.logsumexp(x, dim=-1)  # [N]
        nll = lse - x.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        uniform = lse - x.mean(dim=-1)
        ctx.save_for_backward(logits, target, lse)
        ctx.eps = eps
        ctx.mark_non_differentiable(nll)
        return (1.0 - eps) * nll + eps * uniform, nll

    @staticmethod
    def backward(ctx: Any, grad_loss: Tensor, _grad_nll: Tensor) -> tuple[Tensor, None, None]:
        logits, target, lse = ctx.saved_tensors
        eps, vocab = ctx.eps, logits.size(-1)
        # softmax, computed in place in a fresh fp32 copy: out-of-place exp into new memory
        # took twice as long on the CPU, and this is the largest tensor of the step
        grad = logits.to(torch.float32, copy=True).sub_(lse.unsqueeze(-1)).exp_()
        grad.sub_(eps / vocab)
        grad.scatter_add_(-1, target.unsqueeze(-1), torch.full_like(lse.unsqueeze(-1), eps - 1.0))
        grad.mul_(grad_loss.unsqueeze(-1))
        return grad.to(logits.dtype), None, None


def label_smoothed_nll(
    logits: Tensor, target: Tensor, lengths: Tensor, smoothing: float
) -> tuple[Tensor, Tensor, Tensor]:
    """Summed losses over the valid target positions.

    logits [B, T, V], target [B, T], lengths [B] -> (smoothed loss, nll, number of tokens).
    Positions past a sentence's length contribute nothing, whatever their ids.
    """
    B, T, V = logits.shape
    mask = sequence_mask(lengths, T).reshape(-1).float()  # [B*T]
    loss, nll = _SmoothedCrossEntropy.apply(logits.reshape(B * T, V), target.reshape(-1), smoothing)
    return (loss * mask).sum(), (nll * mask).sum(), mask.sum().long()


def symmetric_kl(logits_a: Tensor, logits_b: Tensor, lengths: Tensor) -> Tensor:
    """The symmetric KL divergence between two output distributions, summed over the valid
    target positions: ``sum over positions of (KL(P_a || P_b) + KL(P_b || P_a)) / 2``.

    logits_a, logits_b [B, T, V] (any float dtype; fp32 inside), lengths [B] -> a scalar.
    Per position it is ``sum_v (p_a - p_b) * (log p_a - log p_b) / 2``: exactly 0 where the
    two distributions are the same, positive elsewhere. Positions past a sentence's length
    contribute nothing, whatever their logits.
    """
    T = logits_a.size(1)
    log_a, log_b = logits_a.float().log_softmax(-1), logits_b.float().log_softmax(-1)
    per_position = ((log_a.exp() - log_b.exp()) * (log_a - log_b)).sum(-1) / 2  # [B, T]
    return torch.where(sequence_mask(lengths, T), per_position, 0.0).sum()
