"""The selection protocol (docs/benchmarks/selection.md): choose a recipe on val alone, then
score the chosen one on the test set, once. ``scripts/select_on_val.py`` is its command
line; the parts, each readable alone:

- ``records``: what a selection folder holds and the choices it implies (reading only);
- ``runs``: training a recipe's seed and scoring its final models;
- ``table``: the val table and its figure;
- ``on_val`` (``train``, ``ensemble``), ``on_test`` (``final``), ``distill``, ``release``,
  ``record``: the commands.
"""
