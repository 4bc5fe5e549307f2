"""Keep Lightning's output to what a user can act on.

Lightning logs banners at INFO on its own loggers (devices available or not, seeds, the
distributed setup, advertisements for its cloud products, "`Trainer.fit` stopped") and
lets deprecation warnings that its own code triggers in torch reach the user, with a
path into site-packages. ``quiet_lightning`` raises those loggers to WARNING and drops
those deprecations; Lightning's real warnings and errors, its deprecations of options
the user set, and the toolkit's own INFO messages (the ``seq2seq`` logger) stay.
"""

from __future__ import annotations

import logging
import warnings

from lightning_fabric.utilities.rank_zero import LightningDeprecationWarning

LIGHTNING_LOGGERS = ("lightning_fabric", "pytorch_lightning", "lightning")
LIGHTNING_MODULES = r"(lightning_fabric|pytorch_lightning|lightning)\."

# Lightning's ModelCheckpoint warns when a run ends before its first validation has
# logged the monitored val_bleu (e.g. max_steps within the first epoch); once a
# validation has run, a monitor that is never logged is an error, so nothing is hidden.
NOT_VALIDATED_YET = r".*could not find the monitored key in the returned metrics"


def quiet_lightning() -> None:
    """Lightning's INFO banners off, its internal deprecation warnings ignored."""
    for name in LIGHTNING_LOGGERS:
        logging.getLogger(name).setLevel(logging.WARNING)
    for category in (DeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category, module=LIGHTNING_MODULES)
    # filterwarnings puts its filter first: this one wins over the two above
    warnings.filterwarnings("default", category=LightningDeprecationWarning)
    warnings.filterwarnings("ignore", message=NOT_VALIDATED_YET, module=LIGHTNING_MODULES)
