"""Training through Lightning: ``task`` (the LightningModule), ``loss``, ``schedule``,
``epoch_metrics``, ``data`` (the corpora, tokenized splits and the DataModule), and the
helpers of a run (``checkpoint_io``, ``resume``, ``stopping``, ``run_lock``, ``distributed``,
``quiet``, ``fit_summary``). Above inference; inference never imports it."""
