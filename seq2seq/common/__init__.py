"""What every layer uses and which imports none of them: ``errors`` (the one-line errors),
``ranges`` (declared ranges of options and settings), ``atomic`` (write, then rename),
``interruptible`` (long C++ calls that Ctrl-C still stops), ``precision`` (what the
machine computes natively) and ``folder_lock`` (one run per checkpoint folder)."""
