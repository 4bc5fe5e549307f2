"""The learning-rate schedule: a linear warm-up, then 1/sqrt decay, constant, or cosine."""

from __future__ import annotations

import math
from typing import Literal

from seq2seq.common.errors import Seq2SeqError

Schedule = Literal["inverse_sqrt", "constant", "cosine"]


class WarmupThenDecay:
    """Learning-rate multiplier: linear warm-up to 1, then 1/sqrt decay, constant, or a
    cosine that reaches 0 at ``total_steps``.

    The cosine's ``total_steps`` may be set after construction: the task sets it when
    training starts, once Lightning has restored a resumed run's data position (asking
    the Trainer for its step budget earlier sets the training data up before that
    restore, and a resumed epoch would start over). LambdaLR checkpoints its attributes.
    """

    def __init__(self, warmup_steps: int, schedule: Schedule, total_steps: int | None = None):
        self.warmup_steps, self.schedule, self.total_steps = warmup_steps, schedule, total_steps

    def plan(self, total_steps: int | None, warmup_steps: int) -> str | None:
        """Make the cosine reach 0 at ``total_steps``, after ``warmup_steps`` (the configured
        value: a resumed run plans again from it).

        A run of no more steps than that warm-up (a smoke run such as ``fast_dev_run``, or
        a short one) warms up over its first half instead; the returned note says so. A
        run without a step budget (no max_epochs or max_steps) is refused.
        """
        if total_steps is None:
            raise Seq2SeqError(
                "the cosine schedule needs a number of training steps to reach 0 at; set "
                "trainer.max_epochs or trainer.max_steps, or use another model.schedule"
            )
        self.total_steps, self.warmup_steps = total_steps, warmup_steps
        if total_steps > warmup_steps:
            return None
        self.warmup_steps = total_steps // 2
        return (
            f"the run has {total_steps} training steps, no more than model.warmup_steps="
            f"{warmup_steps}: the cosine schedule warms up over {self.warmup_steps} instead"
        )

    def __call__(self, step: int) -> float:
        step = step + 1
        if step < self.warmup_steps:
            return step / self.warmup_steps
        if self.schedule == "inverse_sqrt":
            return math.sqrt(self.warmup_steps / step)
        if self.schedule == "cosine":
            if self.total_steps is None:  # LambdaLR's call at construction: the top
                return 1.0
            span = self.total_steps - self.warmup_steps
            done = min(1.0, (step - self.warmup_steps) / span)
            return 0.5 * (1.0 + math.cos(math.pi * done))
        return 1.0
