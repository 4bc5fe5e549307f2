"""Everything a trained model needs to translate, without Lightning, torchmetrics or
``datasets``: ``batching`` (padded, length-bucketed batches, which training reads too),
``search``, ``checkpoint`` (the format and averaging), ``ensemble``, ``translator``,
``decoding`` (a checkpoint, an ensemble or an export opened as one decoder), ``export`` and
``ct2_translate`` (CTranslate2)."""
