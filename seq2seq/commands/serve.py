"""``seq2seq serve``: check the options, load the model once, serve it.

Importing this module imports neither FastAPI nor uvicorn; the command does, and says in
one line which package of the ``serve`` extra is missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from seq2seq.commands.decoding import (
    BEAM_SEARCH,
    MEAN_ALIGNMENT,
    NO_MODEL,
    AlignmentSettings,
    DecodeSettings,
    ModelSettings,
    open_model,
)
from seq2seq.commands.options import command
from seq2seq.common.errors import Seq2SeqError
from seq2seq.common.ranges import Range
from seq2seq.inference.released import looks_like_a_name

SERVE_PACKAGES = {"fastapi", "starlette", "pydantic", "uvicorn"}  # the `serve` extra


def model_name(checkpoints: list[str]) -> str:
    """What the server calls a model it was given as ``checkpoints``, without their paths:
    each one's run folder (``runs/NAME/checkpoints/last.ckpt``, or an older run's
    ``runs/NAME/logs/version_0/checkpoints/last.ckpt``: NAME), else its file name without
    ``.ckpt`` (an export: its folder's name; a released model: its name); an ensemble's
    members joined by `` + ``."""
    names = []
    for checkpoint in map(Path, checkpoints):
        if looks_like_a_name(checkpoint):  # a released model
            names.append(str(checkpoint))
            continue
        if checkpoint.is_dir():  # a CTranslate2 export
            names.append(checkpoint.absolute().name)
            continue
        folder = checkpoint.absolute().parent
        if folder.name != "checkpoints":
            names.append(checkpoint.stem)
            continue
        run = folder.parent
        names.append((run.parent.parent if run.parent.name == "logs" else run).name)
    return " + ".join(names)


@command
def serve(  # its parameters are the command's options
    model: ModelSettings = NO_MODEL,
    decode: DecodeSettings = BEAM_SEARCH,
    host: str = "127.0.0.1",
    port: Annotated[int, Range(1, 65535)] = 8000,
    batch_wait_ms: Annotated[float, Range(0, 1000)] = 50.0,
    max_beam: Annotated[int, Range(1, 64)] = 16,
    max_sentences: Annotated[int, Range(1)] = 64,
    max_chars: Annotated[int, Range(1)] = 1000,
    max_concurrent: Annotated[int, Range(1)] = 256,
    name: str | None = None,
    links: AlignmentSettings = MEAN_ALIGNMENT,
) -> None:
    """Serve translations, alignments and attention over HTTP.

    The model (a released model, checkpoints, an ensemble or a CTranslate2 export) is
    loaded once, through
    the Python API's seq2seq.load; POST /translate answers JSON requests
    (translations, scores, word alignments, attention maps), requests that arrive together
    are translated in one batch; GET /health, API documentation at /docs. SIGTERM answers
    the requests in flight, then exits. Needs the `serve` extra (pip install
    'seq2seq[serve]').

    Args:
        model: --model (a released model, by name), --ckpt (repeat it to serve an
            ensemble, weighted by --ensemble-weights) or --ctranslate2 (an export, int8
            included; it keeps no attention, so requests for alignments or attention maps
            are refused)
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
        links: how the word links a request asks for ("alignment": true) are read, as
            translate --alignment reads them (the model's attention page shows the maps
            themselves)
    """
    try:
        from seq2seq.serve.app import ServerSettings, serve_forever
        from seq2seq.serve.engine import Engine
        from seq2seq.serve.schema import Limits
    except ImportError as error:
        if error.name not in SERVE_PACKAGES:
            raise
        raise Seq2SeqError(
            f"seq2seq serve needs the serve extra ({error.name} is not installed): "
            "pip install 'seq2seq[serve]'"
        ) from None
    if decode.beam > max_beam:
        raise Seq2SeqError(f"--beam {decode.beam} is more than --max-beam {max_beam}")
    chosen = links.extraction()
    opened = open_model("seq2seq serve", model, decode)  # once, before the port is opened
    if chosen is not None:
        opened.check_extraction(chosen)  # the model keeps attention and has the layer
    engine = Engine(opened, chosen)
    limits = Limits(max_sentences, max_chars, max_beam, decode.beam)
    options = ServerSettings(
        limits, max_concurrent, batch_wait_ms / 1000, name or model_name(model.paths)
    )
    serve_forever(engine, options, host, port)
