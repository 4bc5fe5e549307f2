"""The one-line error of a ``seq2seq`` command that fails, for the tests of its messages."""

from __future__ import annotations

import pytest

from seq2seq.commands.main import main

ERROR = "seq2seq: error: "


def cli_error(
    capsys: pytest.CaptureFixture[str], *args: str, alone: bool = False
) -> tuple[int, str]:
    """Run `seq2seq ARGS`, which must fail without a traceback and with one error line: its
    exit status and that line (without the prefix). ``alone``: nothing else on stderr."""
    with pytest.raises(SystemExit) as stopped:
        main(list(args))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    errors = [line for line in err.splitlines() if line.startswith(ERROR)]
    assert len(errors) == 1, err
    assert not alone or len(err.splitlines()) == 1, err
    assert stopped.value.code != 0
    return stopped.value.code, errors[0].removeprefix(ERROR)
