"""The LightningModule: a plain ``EncoderDecoder`` trained with label-smoothed cross-entropy.

One shared step computes the loss for train/val/test; validation and test also decode
(greedy or beam) and score BLEU/chrF on detokenized text against the raw references.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import random
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal, cast

import pytorch_lightning as pl
import torch
from pytorch_lightning.utilities import rank_zero_warn
from torch import Tensor, nn

from seq2seq.batch import Batch
from seq2seq.common.errors import CheckpointError, Seq2SeqError
from seq2seq.common.ranges import Range, check_arguments
from seq2seq.inference.checkpoint import CHECKPOINT_KEY, Payload
from seq2seq.inference.search import DEFAULT_SEARCH, SearchSettings, translate_batch
from seq2seq.model import EncoderDecoder, VocabSpec
from seq2seq.speedups.cpu_dropout import cpu_dropouts
from seq2seq.text.metrics import literature_bleu, score_corpus
from seq2seq.text.tokenizer import AnyVocabulary, vocabulary_from_state
from seq2seq.training.epoch_metrics import Perplexity, SplitTranslations
from seq2seq.training.freezing import Part
from seq2seq.training.freezing import freeze as freeze_parts
from seq2seq.training.guided_alignment import (
    check_guided_settings,
    guided_alignment_loss,
    head_weights,
)
from seq2seq.training.init_from import load_starting_weights
from seq2seq.training.loss import label_smoothed_nll, symmetric_kl
from seq2seq.training.schedule import Schedule, WarmupThenDecay

if TYPE_CHECKING:
    from pytorch_lightning.utilities.types import OptimizerLRSchedulerConfig

log = logging.getLogger("seq2seq")


class NonFiniteLossError(Seq2SeqError):
    """Training produced a NaN or infinite loss."""


def _sizes(spec: VocabSpec | None) -> str:
    if spec is None:
        return "none"
    return f"{spec.src_size} pieces" if spec.joint else f"{spec.src_size}/{spec.tgt_size} pieces"


def adamw(
    parameters: Iterable[nn.Parameter],
    lr: float,
    betas: tuple[float, float],
    weight_decay: float = 0.0,
    fused: bool = False,
) -> torch.optim.AdamW:
    """AdamW over ``parameters``. ``fused`` (CUDA): one kernel does every operation of the
    update (PyTorch's default there, ``foreach``, launches one for each operation)."""
    return torch.optim.AdamW(
        parameters, lr=lr, betas=betas, weight_decay=weight_decay, fused=fused or None
    )


def batch_sentences(batch: Batch) -> int:
    """Sentences in a batch (for Lightning's ThroughputMonitor)."""
    return int(batch.src.size(0))


def batch_target_tokens(batch: Batch) -> int:
    """Real (unpadded) target tokens in a batch, EOS included: what tokens/s counts."""
    return batch.target_tokens


class TranslationTask(pl.LightningModule):
    """Training, validation and test of one ``EncoderDecoder``.

    Checkpoints carry the RNG states, so a resumed run draws the same dropout masks.

    Args:
        network: The encoder-decoder: its family (``class_path``: one of the known
            subclasses) and settings (``init_args``). It is built from the linked ``vocab``,
            so vocabulary sizes and special ids are never written in a config.
        vocab: The source and target tokenizers, linked from the data module's vocabulary.
        label_smoothing: Share of the target probability spread over the whole vocabulary
            in the training loss (0 is plain cross-entropy).
        lr: Peak learning rate of AdamW, reached at the end of the warm-up.
        betas: AdamW's (beta1, beta2), the decay rates of its gradient moment averages.
        weight_decay: AdamW's decoupled weight decay (0: none).
        warmup_steps: Optimizer steps of linear learning-rate warm-up from 0 to ``lr``.
        schedule: The learning rate after the warm-up: ``inverse_sqrt`` decays as
            1/sqrt(step), ``constant`` stays at ``lr``, ``cosine`` reaches 0 at the last
            step that ``trainer.max_epochs`` or ``trainer.max_steps`` allows.
        val_beam: Beam size for the translations scored at each validation (1 is
            greedy search, the fastest).
        test_beam: Beam size for the translations scored by ``seq2seq test``.
        length_penalty: GNMT length-penalty alpha of validation and test search (0: none;
            higher favors longer translations); ``translate`` and ``evaluate`` use it too
            unless given ``--length-penalty``.
        max_len_ratio: Validation and test translations stop at ``max_len_ratio`` times the
            source length plus ``max_len_offset`` tokens.
        max_len_offset: Tokens added to that maximum length.
        nonfinite_loss: What a NaN or infinite training loss does: ``stop`` ends training
            with an error naming the step; ``skip`` skips the batch (counted in
            ``train_skipped_batches``; one process only).
        rdrop_alpha: R-Drop (Liang et al., 2021), at least 0 (0: off, the default): each
            training batch runs through the model twice with independent dropout, and the
            loss is the mean of the two label-smoothed losses plus ``rdrop_alpha / 2`` times
            the symmetric KL divergence between the two output distributions (logged as
            ``train_rdrop_kl``), per target token: the paper's loss per token of both copies,
            so its alpha (5 for IWSLT'14) means the same here (see ``_rdrop_loss``). A
            training step costs about twice as much; validation and test are unchanged.
            Needs dropout: without it the two runs agree and the term is 0.
        init_from: Start from this trained model's weights (a checkpoint, a released
            model's name, a transformers MarianMT model); ``fit --init_from`` sets it, with
            the model's own architecture and vocabulary (docs/fine-tuning.md).
        freeze: Parts of the model kept fixed while the rest trains: ``embeddings`` (a
            tied output layer with them), ``encoder``, ``decoder``.
        guided_alignment: Guided alignment's weight (0: off, the default; 0.05 in Garg et
            al. 2019): one attention head learns the word links of ``data.train_alignments``
            (see ``seq2seq.training.guided_alignment``), its cross-entropy logged as
            ``train_align_loss``. Not with R-Drop.
        guided_layer: The decoder layer of that head (negative counts from the last; the
            default, the one before the last, is Garg et al.'s); a Transformer's only.
        guided_head: The head of that layer.
    """

    def __init__(  # its parameters are the config's model.* keys (jsonargparse reads them)
        self,
        network: Callable[[VocabSpec], EncoderDecoder],
        vocab: AnyVocabulary,
        label_smoothing: Annotated[float, Range(0, 1, below=True)] = 0.1,
        lr: Annotated[float, Range(0, above=True)] = 5e-4,
        betas: tuple[float, float] = (0.9, 0.98),
        weight_decay: Annotated[float, Range(0)] = 0.0,
        warmup_steps: Annotated[int, Range(0)] = 1000,
        schedule: Schedule = "inverse_sqrt",
        val_beam: Annotated[int, Range(1)] = 1,
        test_beam: Annotated[int, Range(1)] = DEFAULT_SEARCH.beam,
        length_penalty: Annotated[float, Range(0)] = DEFAULT_SEARCH.length_penalty,
        max_len_ratio: Annotated[float, Range(0)] = DEFAULT_SEARCH.max_len_ratio,
        max_len_offset: Annotated[int, Range(0)] = DEFAULT_SEARCH.max_len_offset,
        nonfinite_loss: Literal["stop", "skip"] = "stop",
        rdrop_alpha: Annotated[float, Range(0)] = 0.0,
        init_from: str | None = None,
        freeze: list[Part] | None = None,
        guided_alignment: Annotated[float, Range(0)] = 0.0,
        guided_layer: int = -2,
        guided_head: Annotated[int, Range(0)] = 0,
    ) -> None:
        super().__init__()
        check_arguments(TranslationTask.__init__, locals(), "model.", Seq2SeqError)
        if guided_alignment > 0 and rdrop_alpha > 0:
            raise Seq2SeqError(
                "model.guided_alignment and model.rdrop_alpha cannot both be on: choose one"
            )
        self.vocab = vocab
        built = network(vocab.spec)
        # what the run started from (None: random weights), and what it keeps fixed
        self.started_from = load_starting_weights(built, init_from) if init_from else None
        self.frozen: list[Part] = list(freeze or [])
        self.trainable, _ = freeze_parts(built, self.frozen)
        # a cheaper dropout mask on a CPU; "model." prefixes its weights in a checkpoint
        self.model = cpu_dropouts(built)
        self.label_smoothing = label_smoothing
        self.lr, self.betas, self.weight_decay = lr, betas, weight_decay
        self.warmup_steps, self.schedule = warmup_steps, schedule
        self.lr_factor: WarmupThenDecay | None = None  # set by configure_optimizers
        limits = SearchSettings(
            length_penalty=length_penalty,
            max_len_ratio=max_len_ratio,
            max_len_offset=max_len_offset,
        )
        self.searches = {
            "val": dataclasses.replace(limits, beam=val_beam),
            "test": dataclasses.replace(limits, beam=test_beam),
        }
        self.run_config: str | None = None  # the CLI's YAML config, saved into checkpoints
        self.flops_per_batch: int | None = None  # ThroughputMonitor asks; not measured
        self.nonfinite_loss = nonfinite_loss
        self.rdrop_alpha = rdrop_alpha
        self.guided_alignment, self.guided_layer = guided_alignment, guided_layer
        self.guided_head = guided_head
        self.skipped_batches = 0
        stages = ("train", "val", "test")
        self.perplexity = nn.ModuleDict({f"{s}_ppl": Perplexity() for s in stages})
        self.translations = nn.ModuleDict({s: SplitTranslations() for s in ("val", "test")})

    # -- the shared step ---------------------------------------------------------------
    def _loss(self, batch: Batch) -> tuple[Tensor, Tensor, int]:
        """(label-smoothed loss per token, summed NLL, target tokens) of a batch."""
        logits, _ = self.model(batch.src, batch.src_lens, batch.tgt_in, need_weights=False)
        loss, nll, _ = label_smoothed_nll(
            logits, batch.tgt_out, batch.tgt_lens, self.label_smoothing
        )
        n = batch.target_tokens
        return loss / n, nll, n

    def _rdrop_loss(self, batch: Batch) -> tuple[Tensor, Tensor, int, Tensor]:
        """R-Drop: (loss per token, summed NLL, target tokens, symmetric KL per token) of a
        batch run through the model twice, with independent dropout.

        The two runs are one forward over the batch stacked on itself ([2B, ...]), so each
        copy draws its own dropout masks. With N the batch's target tokens, CE_1 and CE_2
        the copies' label-smoothed losses and KL their symmetric divergence
        (``symmetric_kl``: (KL(P_1 || P_2) + KL(P_2 || P_1)) / 2 per position), each summed
        over the valid target positions:

            loss = (CE_1 + CE_2 + alpha * KL) / (2 N)

        The paper's loss (Liang et al., 2021, eq. 3) and the reference code's (its fairseq
        criterion, which divides by N) are CE_1 + CE_2 + alpha * KL: this is that loss per
        target token of both copies, so alpha weighs the KL against the cross-entropies as
        theirs does, and the loss equals the plain one when the two copies agree. The NLL
        returned is the mean of the two copies' (for the perplexity).
        """
        B = batch.src.size(0)

        def twice(x: Tensor) -> Tensor:
            return torch.cat([x, x])  # [2B, ...]

        logits, _ = self.model(
            twice(batch.src), twice(batch.src_lens), twice(batch.tgt_in), need_weights=False
        )  # [2B, T, V]
        both, nll, _ = label_smoothed_nll(
            logits, twice(batch.tgt_out), twice(batch.tgt_lens), self.label_smoothing
        )
        kl = symmetric_kl(logits[:B], logits[B:], batch.tgt_lens)
        n = batch.target_tokens
        return (both + self.rdrop_alpha * kl) / (2 * n), nll / 2, n, kl.detach() / n

    def _guided_loss(self, batch: Batch) -> tuple[Tensor, Tensor, int]:
        """(loss per token plus ``guided_alignment`` times the guided head's cross-entropy
        per guided row, summed NLL, target tokens) of a batch that carries a guide."""
        assert batch.guide is not None  # check_data made sure the loader makes guides
        logits, attention = self.model(batch.src, batch.src_lens, batch.tgt_in)
        loss, nll, _ = label_smoothed_nll(
            logits, batch.tgt_out, batch.tgt_lens, self.label_smoothing
        )
        n = batch.target_tokens
        weights = head_weights(attention, self.guided_layer, self.guided_head)  # [B, T, S]
        alignment = guided_alignment_loss(weights, batch.guide)
        self.log("train_align_loss", alignment, batch_size=n, on_epoch=True, sync_dist=True)
        return loss / n + self.guided_alignment * alignment, nll, n

    def _training_loss(self, batch: Batch) -> tuple[Tensor, Tensor, int, Tensor | None]:
        """(loss per token, summed NLL, target tokens, R-Drop's KL per token or None)."""
        if self.rdrop_alpha > 0:
            return self._rdrop_loss(batch)
        if self.guided_alignment > 0:
            return *self._guided_loss(batch), None
        return *self._loss(batch), None

    def _log_loss(self, stage: str, loss: Tensor, nll: Tensor, n: int) -> None:
        self.log(
            f"{stage}_loss",
            loss,
            batch_size=n,
            prog_bar=True,
            on_step=stage == "train",
            on_epoch=True,
            sync_dist=True,  # under DDP, the mean over every process's batches
        )
        perplexity = cast(Perplexity, self.perplexity[f"{stage}_ppl"])  # a ModuleDict's: Module
        perplexity.update(nll.detach(), tokens=n)
        self.log(f"{stage}_ppl", perplexity, on_step=False, on_epoch=True, batch_size=n)

    def on_train_start(self) -> None:
        if self.schedule == "cosine":  # to 0 over the steps max_epochs/max_steps allow
            estimate = self.trainer.estimated_stepping_batches
            total = int(estimate) if math.isfinite(estimate) else None
            assert self.lr_factor is not None  # configure_optimizers ran before training
            note = self.lr_factor.plan(total, self.warmup_steps)
            if note and self.trainer.is_global_zero:
                log.info(note)

    def check_trainer(self, trainer: pl.Trainer) -> None:
        """Refuses settings that ``trainer`` cannot run (the CLI asks before DDP starts its
        processes)."""
        if self.nonfinite_loss == "skip" and trainer.world_size > 1:
            raise Seq2SeqError(
                "model.nonfinite_loss: skip works on one process only (Lightning cannot skip "
                "an optimizer step under DDP); use stop"
            )

    def on_fit_start(self) -> None:
        self.check_trainer(self.trainer)
        # Lightning sets the trainer's datamodule at run time without declaring it
        datamodule = self.trainer.datamodule  # type: ignore[attr-defined]
        check_guided_settings(self.guided_alignment, getattr(datamodule, "train_alignments", None))

    def training_step(self, batch: Batch, batch_idx: int) -> Tensor | None:
        loss, nll, n, kl = self._training_loss(batch)
        # Every process takes the same branch: under DDP, one process stopping alone would
        # leave the others waiting in the gradient all-reduce.
        finite_here = bool(torch.isfinite(loss))
        if self.trainer.strategy.reduce_boolean_decision(finite_here, all=True):
            self._log_loss("train", loss, nll, n)
            if kl is not None:
                self.log("train_rdrop_kl", kl, batch_size=n, on_epoch=True, sync_dist=True)
            return loss
        value = float(loss) if not finite_here else "non-finite on another process"
        where = f"step {self.global_step} (epoch {self.current_epoch}, batch {batch_idx})"
        if self.nonfinite_loss == "stop":
            raise NonFiniteLossError(
                f"the training loss is {value} at {where}; lower the learning rate, "
                "clip gradients, or set model.nonfinite_loss: skip"
            )
        self.skipped_batches += 1  # kept out of the epoch's loss and perplexity
        rank_zero_warn(f"skipped a batch at {where}: the loss is {value}")
        return None  # Lightning skips the optimizer step

    def validation_step(self, batch: Batch, batch_idx: int) -> None:
        self._log_loss("val", *self._loss(batch))
        self._translate(batch, "val")

    def test_step(self, batch: Batch, batch_idx: int) -> None:
        self._log_loss("test", *self._loss(batch))
        self._translate(batch, "test")

    # -- decoding and scoring ----------------------------------------------------------
    def _translate(self, batch: Batch, stage: str) -> None:
        hyps = translate_batch(self.model, batch.src, batch.src_lens, self.searches[stage])
        self._translations(stage).update(batch.ids, [nbest[0].tokens for nbest in hyps])

    def _translations(self, stage: str) -> SplitTranslations:
        """The translations of ``stage`` so far (their ModuleDict types them Module)."""
        return cast(SplitTranslations, self.translations[stage])

    def on_validation_epoch_start(self) -> None:
        self._translations("val").reset()

    def on_test_epoch_start(self) -> None:
        self._translations("test").reset()

    def on_validation_epoch_end(self) -> None:
        self._score("val")

    def on_test_epoch_end(self) -> None:
        self._score("test")

    def on_train_epoch_end(self) -> None:
        self.log(
            "train_skipped_batches", float(self.skipped_batches), sync_dist=True, reduce_fx="sum"
        )

    def _score(self, stage: str) -> None:
        # Lightning sets the trainer's datamodule at run time without declaring it
        datamodule = self.trainer.datamodule  # type: ignore[attr-defined]
        split = datamodule.val_split if stage == "val" else datamodule.test_split
        refs = datamodule.references(split)
        # Every process gathers here, in on_validation_epoch_end/on_test_epoch_end, before
        # any metric of the epoch is computed: Lightning's progress bars, which compute
        # them on process 0 only, read them later (on_validation_end).
        translated = self._translations(stage).compute()
        if len(translated) != len(refs):  # e.g. a sanity check on a few batches
            return
        hyps = [self.vocab.tgt.decode(translated[i]) for i in range(len(refs))]
        scores = score_corpus(hyps, refs)
        # Every process scores the same gathered corpus, so the values agree everywhere.
        self.log(f"{stage}_bleu", scores["bleu"]["score"], prog_bar=True, sync_dist=True)
        self.log(f"{stage}_chrf", scores["chrf"]["score"], sync_dist=True)
        lit = literature_bleu(hyps, refs, datamodule.tgt_lang)  # lowercased, as papers score
        self.log(f"{stage}_bleu_literature", lit["score"], sync_dist=True)
        if self.trainer.is_global_zero:
            log.info(f"{stage} example: {hyps[0]!r} (reference: {refs[0]!r})")

    # -- optimization and checkpoints --------------------------------------------------
    def configure_optimizers(self) -> OptimizerLRSchedulerConfig:
        # fused on CUDA, unless gradients are clipped: Lightning refuses to clip a fused
        # optimizer's gradients under mixed precision
        clips = self._trainer is not None and bool(self._trainer.gradient_clip_val)
        fused = self.device.type == "cuda" and not clips
        trainable = [p for p in self.parameters() if p.requires_grad]  # none frozen
        optimizer = adamw(trainable, self.lr, self.betas, self.weight_decay, fused)
        self.lr_factor = WarmupThenDecay(self.warmup_steps, self.schedule)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, self.lr_factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint[CHECKPOINT_KEY] = Payload(
            vocab=self.vocab.to_state(),
            config=self.run_config,
            search=dataclasses.asdict(self.searches["test"]),
            rng={"torch": torch.get_rng_state(), "python": random.getstate()},
            skipped_batches=self.skipped_batches,
        )
        if self._trainer is not None:  # what a resumed run compares its own precision with
            checkpoint[CHECKPOINT_KEY]["precision"] = str(self._trainer.precision)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        stored: Payload = checkpoint.get(CHECKPOINT_KEY, {})
        if stored.get("vocab") != self.vocab.to_state():
            spec = vocabulary_from_state(stored["vocab"]).spec if "vocab" in stored else None
            theirs, ours = _sizes(spec), _sizes(self.vocab.spec)
            sizes = (
                f"{theirs} in the checkpoint, {ours} from the data"
                if theirs != ours
                else f"{ours} in both, but not the same pieces"
            )
            raise CheckpointError(
                f"the checkpoint's vocabulary does not match the data's ({sizes}): "
                "use the data and SentencePiece settings it was trained with"
            )
        if "rng" in stored:  # resuming: continue the random streams where they stopped
            torch.set_rng_state(stored["rng"]["torch"])
            random.setstate(stored["rng"]["python"])
        self.skipped_batches = stored.get("skipped_batches", 0)
