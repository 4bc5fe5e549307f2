"""Label-smoothed cross-entropy over the valid target positions, in one fused pass.

For logits x [N, V], target y and smoothing eps, per row:

    loss = (1 - eps) * (lse(x) - x_y) + eps * (lse(x) - mean(x))

which equals ``torch.nn.functional.cross_entropy(x, y, label_smoothing=eps)``; its
gradient is softmax(x) - (1 - eps) * onehot(y) - eps / V. Written as one autograd
function it reads the logits twice instead of building log-probabilities and their
gather/mean gradients, the costliest part of a step after the matrix products.

R-Drop's symmetric KL between two runs' output distributions (``symmetric_kl``) is one
autograd function for the same reason.
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


class _SymmetricKL(torch.autograd.Function):
    """Per-row symmetric KL of two logits [N, V] (any float dtype; at least fp32 inside).

    With l = log_softmax(x), p = exp(l), D = l_a - l_b and E_p[D] = sum_v p_v D_v, the row's
    value is sum_v (p_a - p_b) D / 2 = (E_pa[D] - E_pb[D]) / 2 and its gradients are

        d/dx_a = (p_a * (D - E_pa[D] + 1) - p_b) / 2
        d/dx_b = (p_b * (E_pb[D] - D + 1) - p_a) / 2

    (the probabilities sum to 1 in both rows).
    Written as one function it takes one exp of each logits tensor and keeps p_a, p_b, D and
    the two expectations for backward, which is elementwise arithmetic alone.
    Built from autograd's ops instead, the copies it saved raised an R-Drop fit's peak
    memory by more than a third (docs/benchmarks/speed.md, "Measurements behind choices").
    """

    @staticmethod
    def forward(ctx: Any, logits_a: Tensor, logits_b: Tensor) -> Tensor:
        with torch.autocast(logits_a.device.type, enabled=False):  # no bf16 row sums
            log_a, p_a = _log_softmax_and_softmax(logits_a)  # [N, V] each
            log_b, p_b = _log_softmax_and_softmax(logits_b)
            difference = log_a.sub_(log_b)  # D
            expected_a, expected_b = _row_dot(p_a, difference), _row_dot(p_b, difference)
            ctx.save_for_backward(p_a, p_b, difference, expected_a, expected_b)
            ctx.dtypes = logits_a.dtype, logits_b.dtype
            return (expected_a - expected_b) / 2  # [N]

    @staticmethod
    def backward(ctx: Any, grad_rows: Tensor) -> tuple[Tensor, Tensor]:
        p_a, p_b, difference, expected_a, expected_b = ctx.saved_tensors
        with torch.autocast(p_a.device.type, enabled=False):
            scale = grad_rows.unsqueeze(-1) / 2  # [N, 1]
            grad_a = (difference - expected_a.unsqueeze(-1)).add_(1).mul_(p_a).sub_(p_b)
            grad_b = (expected_b.unsqueeze(-1) - difference).add_(1).mul_(p_b).sub_(p_a)
            dtype_a, dtype_b = ctx.dtypes
            return grad_a.mul_(scale).to(dtype_a), grad_b.mul_(scale).to(dtype_b)


def _log_softmax_and_softmax(logits: Tensor) -> tuple[Tensor, Tensor]:
    """(log_softmax, softmax) of ``logits`` [N, V], in fresh tensors of at least fp32, from
    one exp."""
    shifted = logits.to(torch.promote_types(logits.dtype, torch.float32), copy=True)
    shifted.sub_(shifted.amax(dim=-1, keepdim=True))
    probabilities = shifted.exp()
    total = probabilities.sum(dim=-1, keepdim=True)  # [N, 1]
    return shifted.sub_(total.log()), probabilities.div_(total)


def _row_dot(x: Tensor, y: Tensor) -> Tensor:
    """sum_v x[n, v] * y[n, v] for rows [N, V] -> [N], without an [N, V] product in memory."""
    return torch.bmm(x.unsqueeze(1), y.unsqueeze(2)).view(-1)


def symmetric_kl(logits_a: Tensor, logits_b: Tensor, lengths: Tensor) -> Tensor:
    """The symmetric KL divergence between two output distributions, summed over the valid
    target positions: ``sum over positions of (KL(P_a || P_b) + KL(P_b || P_a)) / 2``.

    logits_a, logits_b [B, T, V] (any float dtype; fp32 inside), lengths [B] -> a scalar.
    Per position it is ``sum_v (p_a - p_b) * (log p_a - log p_b) / 2``: exactly 0 where the
    two distributions are the same, positive elsewhere. Positions past a sentence's length
    contribute nothing, whatever their logits.
    """
    B, T, V = logits_a.shape
    per_position = _SymmetricKL.apply(logits_a.reshape(B * T, V), logits_b.reshape(B * T, V))
    return torch.where(sequence_mask(lengths, T).reshape(-1), per_position, 0.0).sum()
