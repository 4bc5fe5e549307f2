"""The ``seq2seq`` command: ``main`` (the command list and dispatch), ``options`` (a typed
function read as range-checked options) and one module per command. The top layer: it may
import everything below it, nothing imports it."""
