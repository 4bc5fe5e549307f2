"""The anchor recipe's update, step by step against fairseq's arithmetic for the same
weights and batches.

`configs/multi30k/en-de/transformer-anchor.yaml` runs fairseq's `transformer_tiny` as Wu et
al. (ACL 2021) ran it with their fork of fairseq (LividWo/Revisit-MMT). fairseq is not
installed: ``FairseqUpdate`` restates, from the fork's code, what one of its updates does:

- the loss (`fairseq/criterions/label_smoothed_cross_entropy.py`, the fork's default
  criterion): ``(1 - eps) * nll + eps / V * sum_v(-log p_v)`` summed over the target
  tokens that are not padding; the update's sample size is its number of target tokens
  (EOS included, `--sentence-avg` off);
- `fairseq/trainer.py` (`train_step`): backward of the summed loss, gradients multiplied
  by world size / sample size, clipped to a global norm of `--clip-norm` (25 by default,
  `torch.nn.utils.clip_grad_norm_`), the optimizer's step, then the learning rate of the
  next update (`set_num_updates` -> `lr_step_update`);
- `fairseq/optim/adam.py` (the fork's default optimizer, its Python `Adam`): the moments,
  ``denom = sqrt(v) + eps``, ``step_size = lr * sqrt(1 - beta2^t) / (1 - beta1^t)``. On
  GPUs too: the file's branch for apex's FusedAdam names a class it never defines, so
  with apex installed a run would have stopped with a NameError;
- `fairseq/optim/lr_scheduler/inverse_square_root_schedule.py`: ``warmup_init_lr + n *
  (lr - warmup_init_lr) / warmup_updates`` after n < warmup_updates updates, then ``lr *
  sqrt(warmup_updates / n)``; the first update uses ``warmup_init_lr`` (1e-7).

Our side is the real path: the recipe as `seq2seq fit` composes it, our TranslationTask
(training step, loss, configure_optimizers) run by a Lightning Trainer with the recipe's
gradient clipping and precision.

The differences, both written in the recipe's comments, are asserted as what they are:
our warm-up starts from 0 and runs one update ahead of fairseq's (update k uses fairseq's
rate of update k + 1), and PyTorch's Adam adds eps after the second moment's bias
correction, fairseq's before it. Given both, the restatement reproduces our updates: the
losses and gradients to float32 rounding, the parameters after each update to a unit or
two in their last place. There is no third difference in the update.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from test_recipes import printed_config, recipe_files
from torch import Tensor, nn
from torch.utils.data import DataLoader

from seq2seq.batch import Batch
from seq2seq.inference.batching import collate, cut_batches
from seq2seq.inference.checkpoint import build_model
from seq2seq.model import EncoderDecoder
from seq2seq.text.demo_corpus import generate_pairs, write_corpus
from seq2seq.text.tokenizer import VocabSettings, Vocabulary
from seq2seq.training.data.datamodule import TranslationDataModule
from seq2seq.training.schedule import WarmupThenDecay
from seq2seq.training.task import TranslationTask

UPDATES = 4  # updates compared, each on its own batch
SEED = 11  # dropout masks of update k: SEED + k, drawn alike on both sides


@pytest.fixture(scope="module")
def anchor() -> dict[str, Any]:
    """The anchor recipe as `seq2seq fit --config ... --print_config` composes it."""
    return printed_config(recipe_files("en-de", "transformer-anchor"))


# -- fairseq's arithmetic, restated from the fork's code ------------------------------------
@dataclass(frozen=True)
class FairseqOptions:
    """The fork's options that one update reads (its defaults where the command gave none)."""

    lr: float = 0.005  # --lr
    warmup_updates: int = 2000  # --warmup-updates
    warmup_init_lr: float = 1e-7  # --warmup-init-lr (the fork's default)
    betas: tuple[float, float] = (0.9, 0.98)  # --adam-betas
    eps: float = 1e-8  # --adam-eps
    weight_decay: float = 0.0  # --weight-decay
    clip_norm: float = 25.0  # --clip-norm
    label_smoothing: float = 0.1  # --label-smoothing
    world_size: int = 1  # --distributed-world-size


def fairseq_lr(options: FairseqOptions, num_updates: int) -> float:
    """InverseSquareRootSchedule: the learning rate set after ``num_updates`` updates (the
    rate of update ``num_updates + 1``; the first update uses ``warmup_init_lr``)."""
    if num_updates < options.warmup_updates:
        lr_step = (options.lr - options.warmup_init_lr) / options.warmup_updates
        return options.warmup_init_lr + num_updates * lr_step
    decay_factor = options.lr * options.warmup_updates**0.5
    return decay_factor * num_updates**-0.5


def fairseq_label_smoothed_nll_loss(
    lprobs: Tensor, target: Tensor, epsilon: float, ignore_index: int
) -> tuple[Tensor, Tensor]:
    """label_smoothed_nll_loss with reduce=True: lprobs [N, V], target [N] -> summed
    (loss, nll) over the targets that are not ``ignore_index``."""
    target = target.unsqueeze(-1)
    nll_loss = -lprobs.gather(dim=-1, index=target)
    smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
    non_pad_mask = target.ne(ignore_index)
    nll_loss, smooth_loss = nll_loss[non_pad_mask].sum(), smooth_loss[non_pad_mask].sum()
    eps_i = epsilon / lprobs.size(-1)
    return (1.0 - epsilon) * nll_loss + eps_i * smooth_loss, nll_loss


class FairseqAdam:
    """fairseq/optim/adam.py's ``Adam.step`` (amsgrad off), one state per parameter.

    ``eps_after_bias_correction`` is not fairseq's: it moves eps where PyTorch's Adam puts
    it, to show that this placement is the only difference between the two optimizers.
    """

    def __init__(self, params: list[nn.Parameter], options: FairseqOptions, eps_after: bool):
        self.params, self.options, self.eps_after = params, options, eps_after
        self.state = [
            {"step": 0, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
            for p in params
        ]

    @torch.no_grad()
    def step(self, lr: float) -> None:
        beta1, beta2 = self.options.betas
        for p, state in zip(self.params, self.state, strict=True):
            if p.grad is None:
                continue
            grad, exp_avg, exp_avg_sq = p.grad, state["exp_avg"], state["exp_avg_sq"]
            state["step"] += 1
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            bias_correction1 = 1 - beta1 ** state["step"]
            bias_correction2 = 1 - beta2 ** state["step"]
            eps = self.options.eps
            if self.eps_after:  # sqrt(v / bc2) + eps == (sqrt(v) + eps * sqrt(bc2)) / sqrt(bc2)
                eps *= math.sqrt(bias_correction2)
            denom = exp_avg_sq.sqrt().add_(eps)
            step_size = lr * math.sqrt(bias_correction2) / bias_correction1
            if self.options.weight_decay != 0:
                p.add_(p, alpha=-self.options.weight_decay * lr)
            p.addcdiv_(exp_avg, denom, value=-step_size)


@dataclass
class Step:
    """What one update did: its loss per token, the gradients before clipping (normalized
    by the sample size), the learning rate it used, and the parameters after it."""

    loss: float
    grads: dict[str, Tensor]
    lr: float
    params: dict[str, Tensor]


class FairseqUpdate:
    """fairseq's trainer, one update per call, on ``model`` (ours: the weights and forward
    are the same on both sides; what is compared is the update)."""

    def __init__(
        self,
        model: EncoderDecoder,
        options: FairseqOptions,
        ahead: int = 0,
        eps_after_bias_correction: bool = False,
    ) -> None:
        self.model, self.options, self.ahead = model, options, ahead
        self.optimizer = FairseqAdam(list(model.parameters()), options, eps_after_bias_correction)
        self.num_updates = 0

    def __call__(self, batch: Batch, seed: int, gradients: dict[str, Tensor] | None = None) -> Step:
        """One update on ``batch``, its dropout drawn after ``torch.manual_seed(seed)``; with
        ``gradients`` (normalized, before clipping), the update clips and applies those
        instead of its own (which it still computes and returns)."""
        model, options = self.model, self.options
        model.train()
        model.zero_grad()
        torch.manual_seed(seed)
        logits, _ = model(batch.src, batch.src_lens, batch.tgt_in, need_weights=False)
        lprobs = torch.log_softmax(logits.float(), dim=-1)  # get_normalized_probs
        pad = model.vocab.pad_id
        loss, _ = fairseq_label_smoothed_nll_loss(
            lprobs.view(-1, lprobs.size(-1)), batch.tgt_out.view(-1), options.label_smoothing, pad
        )
        sample_size = int(batch.tgt_lens.sum())  # ntokens: every target token, EOS included
        loss.backward()
        for p in model.parameters():  # optimizer.multiply_grads
            p.grad.mul_(options.world_size / sample_size)
        grads = {name: p.grad.clone() for name, p in model.named_parameters()}
        for name, p in model.named_parameters() if gradients is not None else ():
            p.grad.copy_(gradients[name])
        torch.nn.utils.clip_grad_norm_(list(model.parameters()), options.clip_norm)
        lr = fairseq_lr(options, self.num_updates + self.ahead)
        self.optimizer.step(lr)
        self.num_updates += 1  # set_num_updates: the next update's rate
        params = {name: p.detach().clone() for name, p in model.named_parameters()}
        return Step(float(loss.detach()) / sample_size, grads, lr, params)


# -- our real path --------------------------------------------------------------------------
class Recorder(pl.Callback):
    """Seeds each update's dropout as ``FairseqUpdate`` does, and records each ``Step``."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self.grads: dict[str, Tensor] = {}
        self.lr = 0.0

    def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
        torch.manual_seed(SEED + batch_idx)

    def on_before_optimizer_step(self, trainer, module, optimizer) -> None:  # before clipping
        self.grads = {name: p.grad.clone() for name, p in module.model.named_parameters()}
        self.lr = optimizer.param_groups[0]["lr"]

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        params = {name: p.detach().clone() for name, p in module.model.named_parameters()}
        self.steps.append(Step(float(outputs["loss"]), self.grads, self.lr, params))


def our_steps(
    task: TranslationTask, trainer_config: dict[str, Any], batches: list[Batch], root: Path
) -> list[Step]:
    """``batches`` trained on by a Lightning Trainer with the recipe's update settings."""
    recorder = Recorder()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=len(batches),
        gradient_clip_val=trainer_config["gradient_clip_val"],
        gradient_clip_algorithm=trainer_config["gradient_clip_algorithm"],
        precision=trainer_config["precision"],
        accumulate_grad_batches=trainer_config["accumulate_grad_batches"],
        limit_val_batches=0,
        num_sanity_val_steps=0,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[recorder],
        default_root_dir=str(root),
    )
    trainer.fit(task, train_dataloaders=DataLoader(batches, batch_size=None))
    return recorder.steps


# -- the settings -------------------------------------------------------------------------
def test_the_anchor_recipe_resolves_to_fairseqs_settings(anchor: dict[str, Any]) -> None:
    trainer, task, data = anchor["trainer"], anchor["model"], anchor["data"]
    network = task["network"]
    fairseq = FairseqOptions()
    assert network["class_path"] == "seq2seq.transformer.Transformer"
    assert network["init_args"] == {
        "model_size": 128, "num_heads": 4, "ff_size": 256, "encoder_layers": 4,
        "decoder_layers": 4, "dropout": 0.3, "attention_dropout": 0.0,
        "activation_dropout": 0.0, "norm": "post", "tie_embeddings": True, "sdpa": False,
        "init": "fairseq", "activation": "relu", "output_bias": False,
    }  # fmt: skip
    assert data["joint_vocab"] is True  # --share-all-embeddings: one matrix for all three
    assert (task["lr"], task["warmup_steps"]) == (fairseq.lr, fairseq.warmup_updates)
    assert task["schedule"] == "inverse_sqrt"
    assert tuple(task["betas"]) == fairseq.betas
    assert task["weight_decay"] == fairseq.weight_decay
    assert task["label_smoothing"] == fairseq.label_smoothing
    assert task["rdrop_alpha"] == 0.0
    adam = TranslationTask(partial(build_model, anchor), vocabulary(), **task_options(anchor))
    [optimizer] = [adam.configure_optimizers()["optimizer"]]
    assert optimizer.defaults["eps"] == fairseq.eps and optimizer.defaults["amsgrad"] is False
    assert trainer["gradient_clip_val"] == fairseq.clip_norm
    assert trainer["gradient_clip_algorithm"] in (None, "norm")
    assert trainer["accumulate_grad_batches"] == 1  # one batch of 8192 is the update
    assert trainer["precision"] == "32-true"  # no --fp16
    assert (trainer["max_steps"], trainer["max_epochs"]) == (8000, -1)  # --max-update 8000
    assert data["max_tokens"] == 8192  # --max-tokens 4096 on 2 GPUs
    [recent] = trainer["callbacks"]
    assert recent["init_args"]["monitor"] == "epoch"
    assert recent["init_args"]["save_top_k"] == 10  # the last 10 epochs, averaged
    assert anchor["early_stopping"]["monitor"] == "val_loss"  # --patience 10
    assert anchor["early_stopping"]["patience"] == 10


def fairseq_batches(sizes: list[int], max_tokens: int) -> list[list[int]]:
    """data_utils_fast.batch_by_size_fast over indices taken in order, with
    ``num_tokens(i) = max(src_sizes[i], tgt_sizes[i])`` (sizes with EOS) and
    --required-batch-size-multiple 1 (fairseq's 8 rounds batches to multiples of 8
    sentences, which we do not: the recipe's comments say so)."""
    batches, batch, sample_len = [], [], 0
    for index, size in enumerate(sizes):
        sample_len = max(sample_len, size)
        if batch and (len(batch) + 1) * sample_len > max_tokens:
            batches.append(batch)
            batch, sample_len = [], size
        batch.append(index)
    return [*batches, batch] if batch else batches


def test_max_tokens_counts_what_fairseqs_max_tokens_counts(
    anchor: dict[str, Any], tmp_path: Path
) -> None:
    """A pair costs max(source + EOS, target + EOS) positions, as fairseq's num_tokens
    counts its binarised sentences (EOS appended to both sides), and a batch is cut where
    fairseq's batch_by_size cuts it over the same order of pairs."""
    corpus = tmp_path / "corpus"
    write_corpus(corpus, seed=5, sizes={"train": 300, "val": 4, "test": 4})
    data = {**anchor["data"], "source": str(corpus), "vocab_size": 500, "spm_threads": 1}
    module = TranslationDataModule(**{**data, "cache_dir": str(tmp_path / "cache")})
    rows, lengths = module.tokenized("train")
    pieces = rows.lengths  # [N, 2]: each side's pieces, without EOS
    assert len(lengths) == len(pieces) and (lengths == (pieces + 1).max(axis=1)).all()
    ordered = np.sort(lengths)
    for max_tokens in (data["max_tokens"], 64, 100):
        bounds = cut_batches(ordered, max_tokens)
        ours = [list(range(a, b)) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        assert ours == fairseq_batches(ordered.tolist(), max_tokens)


# -- the learning rate ----------------------------------------------------------------------
def test_our_warm_up_is_fairseqs_from_zero_one_update_ahead(anchor: dict[str, Any]) -> None:
    """Update k (from 1) runs at ``lr * factor(k - 1)`` here (LambdaLR steps after each
    update) and at ``fairseq_lr(k - 1)`` in fairseq. With fairseq's warmup_init_lr at 0 the
    two are the same sequence shifted by one update; with its 1e-7 they are at most
    lr / warmup (2.5e-6) apart during the warm-up, and 1 / (2 * warmup) apart relatively
    after it (the inverse square root of k against k - 1)."""
    task, steps = anchor["model"], anchor["trainer"]["max_steps"]
    factor = WarmupThenDecay(task["warmup_steps"], task["schedule"])
    ours = [task["lr"] * factor(k - 1) for k in range(1, steps + 1)]
    theirs = FairseqOptions()
    fairseq = [fairseq_lr(theirs, k - 1) for k in range(1, steps + 2)]
    from_zero = [fairseq_lr(FairseqOptions(warmup_init_lr=0.0), k - 1) for k in range(1, steps + 2)]
    assert ours == pytest.approx(from_zero[1:], rel=1e-12, abs=0)  # update k: fairseq's k + 1
    warm = theirs.warmup_updates
    gaps = [abs(a - b) for a, b in zip(ours[:warm], fairseq[:warm], strict=True)]
    assert max(gaps) <= theirs.lr / warm and ours[0] - fairseq[0] == pytest.approx(2.4e-6)
    relative = [abs(a - b) / b for a, b in zip(ours[warm:], fairseq[warm:steps], strict=True)]
    assert max(relative) <= 1 / (2 * warm)


# -- Adam's eps -----------------------------------------------------------------------------
def test_fairseqs_eps_is_pytorchs_eps_scaled_by_the_bias_correction() -> None:
    """fairseq divides by ``sqrt(v) + eps`` before correcting the second moment's bias,
    PyTorch by ``sqrt(v / bc2) + eps`` after: fairseq's step t is PyTorch's with eps /
    sqrt(bc2), bc2 = 1 - beta2^t, from 7.1e-8 (t = 1) down to 1e-8 (t large) for beta2
    0.98. Only gradient elements within a few orders of eps in size move differently."""
    torch.manual_seed(0)
    options, lr = FairseqOptions(), 1e-3
    start = torch.randn(1000, dtype=torch.float64)
    fairseq = FairseqAdam([nn.Parameter(start.clone())], options, eps_after=False)
    scaled, plain = nn.Parameter(start.clone()), nn.Parameter(start.clone())
    adams = [
        torch.optim.AdamW([p], lr=lr, betas=options.betas, eps=options.eps, weight_decay=0.0)
        for p in (scaled, plain)
    ]
    sizes = torch.logspace(-12, 0, 1000, dtype=torch.float64)  # some far below eps, some near
    near_eps, far = (sizes > 1e-9) & (sizes < 1e-7), sizes > 1e-4
    grad = sizes * torch.randn(1000, dtype=torch.float64).sign()  # the same at every step
    for t in range(1, 6):
        for p in (*fairseq.params, scaled, plain):
            p.grad = grad.clone()
        adams[0].param_groups[0]["eps"] = options.eps / math.sqrt(1 - options.betas[1] ** t)
        for optimizer in (*adams, fairseq):
            optimizer.step() if optimizer is not fairseq else fairseq.step(lr)
        [theirs] = fairseq.params
        assert torch.allclose(scaled, theirs, rtol=1e-14, atol=0)
        moved = (plain - theirs).abs()
        assert moved[near_eps].min() > 1e-2 * lr  # PyTorch's own eps: a difference near eps
        assert moved[far].max() < 1e-3 * lr * t  # and none worth the name far above it


# -- the update -----------------------------------------------------------------------------
def vocabulary() -> Vocabulary:
    """The anchor's joint lowercased BPE vocabulary, trained on a sample of the demo corpus
    (its 10,000 pieces shrunk to what that corpus holds)."""
    pairs = generate_pairs(400, seed=7)
    settings = VocabSettings(500, model_type="bpe", joint=True, lowercase=True)
    return Vocabulary.train([s for s, _ in pairs], [t for _, t in pairs], settings)


def task_options(config: dict[str, Any]) -> dict[str, Any]:
    """The task's own options of a run config (its ``model`` block but the network)."""
    return {k: v for k, v in config["model"].items() if k not in ("network", "vocab")}


def demo_batches(vocab: Vocabulary, count: int) -> list[Batch]:
    """``count`` batches of 8 demo pairs each, of different lengths (so padded)."""
    pairs = generate_pairs(8 * count, seed=9)
    spec = vocab.spec
    examples = [
        {"id": i, "src_ids": vocab.src.encode(src), "tgt_ids": vocab.tgt.encode(tgt)}
        for i, (src, tgt) in enumerate(pairs)
    ]
    return [
        collate(examples[8 * b : 8 * b + 8], spec.pad_id, spec.bos_id, spec.eos_id)
        for b in range(count)
    ]


def max_gap(ours: dict[str, Tensor], theirs: dict[str, Tensor]) -> float:
    return max(float((ours[name] - theirs[name]).abs().max()) for name in ours)


def ulps_apart(ours: dict[str, Tensor], theirs: dict[str, Tensor], atol: float) -> float:
    """The largest gap between two sets of float32 parameters beyond ``atol``, in units of
    the last place of the parameter (2**-23 of its size): rounding alone makes about 1."""
    ulp = torch.finfo(torch.float32).eps
    return max(
        float(((ours[n] - theirs[n]).abs() - atol).clamp_min(0).div(theirs[n].abs() * ulp).max())
        for n in ours
    )


@pytest.mark.parametrize("clip", ["recipe", 0.05], ids=["clip-25", "clip-active"])
def test_our_updates_are_fairseqs_given_the_two_documented_differences(
    anchor: dict[str, Any], clip: str | float, tmp_path: Path
) -> None:
    """Step by step, for the same weights and batch: the loss per token, the gradients
    (normalized by the target tokens, before clipping), the learning rate, and the
    parameters after clipping and Adam.

    The gradients agree to float32 rounding. Each update then applies ours on both sides:
    Adam divides a gradient by its own size, so where the true gradient is 0 and only
    rounding is left (every key projection's bias: softmax ignores a score added to all of
    a query's keys; fairseq has the same bias), two roundings of the same gradient move a
    weight by up to lr in different directions, and the comparison of the update would
    measure that noise. Given the same gradients, the parameters agree to the last bit or
    two of float32."""
    config = copy.deepcopy(anchor)
    if clip != "recipe":  # 25 is not reached at the start: a clip that bites, on both sides
        config["trainer"]["gradient_clip_val"] = clip
    vocab = vocabulary()
    torch.manual_seed(0)
    task = TranslationTask(partial(build_model, config), vocab, **task_options(config))
    start = copy.deepcopy(task.model)
    batches = demo_batches(vocab, UPDATES)
    ours = our_steps(task, config["trainer"], batches, tmp_path)

    options = FairseqOptions(clip_norm=config["trainer"]["gradient_clip_val"], warmup_init_lr=0.0)
    fairseq = FairseqUpdate(start, options, ahead=1, eps_after_bias_correction=True)
    assert len(ours) == UPDATES
    for k, (batch, mine) in enumerate(zip(batches, ours, strict=True)):
        their = fairseq(batch, SEED + k, gradients=mine.grads)
        norm = math.sqrt(sum(float(g.square().sum()) for g in their.grads.values()))
        assert (norm > options.clip_norm) == (clip != "recipe"), (k, norm)
        assert mine.loss == pytest.approx(their.loss, rel=1e-6), k
        assert max_gap(mine.grads, their.grads) <= 1e-6 * norm, k
        assert mine.lr == pytest.approx(their.lr, rel=1e-12), k
        assert ulps_apart(mine.params, their.params, atol=1e-5 * mine.lr) <= 2, k
