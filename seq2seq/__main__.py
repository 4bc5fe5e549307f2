"""``python -m seq2seq``: the ``seq2seq`` command."""

from seq2seq.commands.main import main

if __name__ == "__main__":
    main()
