"""Training through Lightning: ``task`` (the LightningModule), ``loss``, ``schedule``,
``epoch_metrics``, and the helpers of a run (``checkpoint_io``, ``resume``, ``stopping``,
``run_lock``, ``distributed``, ``quiet``, ``fit_summary``). Above inference and data;
inference never imports it."""
