"""Speed tricks, each kept because a benchmark shows its gain (docs/benchmarks/speed.md),
each applied from outside the model core, each with the plain PyTorch path beside it and
an off switch (``switch``: ``SEQ2SEQ_PLAIN``).

- ``malloc``: glibc's malloc keeps freed memory in the process (training on a CPU);
- ``cpu_dropout``: a dropout mask that is cheap to draw on a CPU (training on a CPU);
- ``beam_shared_source``: one copy of a sentence's source side for all its beams (search);
- ``onednn_linear``: the products of linear layers in oneDNN, weights reordered once (search).

Each trick gives the results of its plain path (tests/test_speedups_*.py check it). This
file imports nothing.
"""
