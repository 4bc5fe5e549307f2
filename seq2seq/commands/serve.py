"""``seq2seq serve``: check the options, load the model once, serve it.

Importing this module imports neither FastAPI nor uvicorn; the command does, and says in
one line which package of the ``serve`` extra is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from seq2seq.commands.options import command
from seq2seq.errors import Seq2SeqError
from seq2seq.inference.checkpoint import check_checkpoint_path
from seq2seq.inference.decoding import (
    BEAM_SEARCH,
    DecodeOptions,
    check_ensemble_weights,
    search_settings,
)
from seq2seq.inference.ensemble import load_ensemble
from seq2seq.ranges import Range

SERVE_PACKAGES = {"fastapi", "starlette", "pydantic", "uvicorn"}  # the `serve` extra


def model_name(checkpoints: list[str]) -> str:
    """What the server calls a model it was given as ``checkpoints``, without their paths:
    each one's run folder (``runs/NAME/checkpoints/last.ckpt``, or an older run's
    ``runs/NAME/logs/version_0/checkpoints/last.ckpt``: NAME), else its file name without
    ``.ckpt``; an ensemble's members joined by `` + ``."""
    names = []
    for checkpoint in map(Path, checkpoints):
        folder = checkpoint.absolute().parent
        if folder.name != "checkpoints":
            names.append(checkpoint.stem)
            continue
        run = folder.parent
        names.append((run.parent.parent if run.parent.name == "logs" else run).name)
    return " + ".join(names)


@command
def serve(
    ckpt: list[str],
    ensemble_weight: list[float] | None = None,
    decode: DecodeOptions = BEAM_SEARCH,
    host: str = "127.0.0.1",
    port: Annotated[int, Range(1, 65535)] = 8000,
    batch_wait_ms: Annotated[float, Range(0, 1000)] = 50.0,
    max_beam: Annotated[int, Range(1, 64)] = 16,
    max_sentences: Annotated[int, Range(1)] = 64,
    max_chars: Annotated[int, Range(1)] = 1000,
    max_concurrent: Annotated[int, Range(1)] = 256,
    name: str | None = None,
) -> None:
    """Serve translations, alignments and attention over HTTP.

    The model (or ensemble) is loaded once, POST /translate answers JSON requests
    (translations, scores, word alignments, attention maps), requests that arrive together
    are translated in one batch; GET /health, API documentation at /docs. SIGTERM answers
    the requests in flight, then exits. Needs the `serve` extra (pip install
    'seq2seq[serve]').

    Args:
        ckpt: checkpoint written by `seq2seq fit`; repeat it to serve an ensemble
        ensemble_weight: with several --ckpt, the members' weights, one per --ckpt in the
            same order (scaled to sum to 1; default: equal)
        decode: the search and its batches (--beam: a request's beam when it names none)
        host: address to listen on
        port: port to listen on
        batch_wait_ms: the longest a batch waits for as many requests as were lately in
            flight (up to --max-tokens); a lone client does not wait
        max_beam: the largest beam (and n_best) a request may ask for
        max_sentences: sentences per request
        max_chars: characters per sentence
        max_concurrent: requests in flight at once; more are refused (503)
        name: the model's name on the page and in /health (default: each --ckpt's run
            folder, NAME for runs/NAME/checkpoints/last.ckpt; no path of the server's
            disk is shown)
    """
    try:
        from seq2seq.serve.app import ServerOptions, serve_forever
        from seq2seq.serve.engine import Engine
        from seq2seq.serve.schema import Limits
    except ImportError as error:
        if error.name not in SERVE_PACKAGES:
            raise
        raise Seq2SeqError(
            f"seq2seq serve needs the serve extra ({error.name} is not installed): "
            "pip install 'seq2seq[serve]'"
        ) from None
    check_ensemble_weights(ckpt, ensemble_weight)
    for path in ckpt:
        check_checkpoint_path(path)
    if decode.beam > max_beam:
        raise Seq2SeqError(f"--beam {decode.beam} is more than --max-beam {max_beam}")
    trained = load_ensemble(ckpt, weights=ensemble_weight)  # once, before the port is opened
    engine = Engine(trained, search_settings(decode, trained.search), decode.max_tokens,
                    decode.max_source_len)  # fmt: skip
    limits = Limits(max_sentences, max_chars, max_beam, decode.beam)
    options = ServerOptions(limits, max_concurrent, batch_wait_ms / 1000, name or model_name(ckpt))
    serve_forever(engine, options, host, port)
