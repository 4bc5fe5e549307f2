"""The off switch of the speed tricks: the environment variable ``SEQ2SEQ_PLAIN``.

Unset or empty, every trick is on. ``SEQ2SEQ_PLAIN=1`` (or ``all``) turns every trick off,
so that everything runs the plain PyTorch path; a comma-separated list of trick names
turns those off, e.g. ``SEQ2SEQ_PLAIN=cpu_dropout,malloc``. The names are the modules of
``seq2seq.speedups``: ``malloc``, ``cpu_dropout``, ``beam_shared_source``,
``onednn_linear``. Use it to measure a trick against its plain path, or to rule a trick
out when something looks wrong. The variable is read whenever a trick is about to run, so
a test can set it.

Every trick is for the CPU alone: for work on any other device (a GPU) they never run,
whatever the variable says, and the plain PyTorch path runs instead.
"""

from __future__ import annotations

import functools
import os

from seq2seq.common.errors import Seq2SeqError

VARIABLE = "SEQ2SEQ_PLAIN"
TRICKS = ("malloc", "cpu_dropout", "beam_shared_source", "onednn_linear")  # all for the CPU
_ALL = {"1", "all"}


@functools.lru_cache(maxsize=8)
def switched_off(value: str) -> frozenset[str]:
    """The tricks that ``SEQ2SEQ_PLAIN=value`` turns off; an unknown name is an error."""
    names = {name.strip().lower() for name in value.split(",")} - {""}
    if names & _ALL:
        return frozenset(TRICKS)
    unknown = sorted(names - set(TRICKS))
    if unknown:
        raise Seq2SeqError(
            f"{VARIABLE}={value!r} names no speed trick {', '.join(unknown)}; "
            f"give 1 (all of them) or some of {', '.join(TRICKS)}"
        )
    return frozenset(names)


def trick_enabled(trick: str, device_type: str = "cpu") -> bool:
    """Whether ``trick`` (one of ``TRICKS``) runs, rather than its plain PyTorch path, for
    work on a device of ``device_type`` (``torch.device.type``: "cpu", "cuda", ...)."""
    if device_type != "cpu":
        return False
    return trick not in switched_off(os.environ.get(VARIABLE, ""))
