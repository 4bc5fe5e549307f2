"""What ``seq2seq serve`` runs: check the options, load the model once, serve it.

Importing this module imports neither FastAPI nor uvicorn; ``start_server`` does, and
says in one line which package of the ``serve`` extra is missing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from seq2seq.checkpoint import Trained, check_checkpoint_path
from seq2seq.ensemble import load_ensemble
from seq2seq.errors import Seq2SeqError
from seq2seq.search import SearchSettings

if TYPE_CHECKING:
    from seq2seq.commands import DecodeOptions

SERVE_PACKAGES = {"fastapi", "starlette", "pydantic", "uvicorn"}  # the `serve` extra


@dataclass(frozen=True)
class ServeLimits:
    """What one request may ask for, and how requests are batched (`seq2seq serve --help`)."""

    batch_wait_ms: float
    max_beam: int
    max_sentences: int
    max_chars: int
    max_concurrent: int


def start_server(
    ckpts: list[str],
    decode: DecodeOptions,
    limits: ServeLimits,
    host: str,
    port: int,
    search: Callable[[Trained], SearchSettings],
) -> None:
    """Serve ``ckpts`` (one model or an ensemble) on ``host``:``port`` until SIGTERM;
    ``search`` gives the search settings for the loaded model (a request sets its beam and
    n-best)."""
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
    for ckpt in ckpts:
        check_checkpoint_path(ckpt)
    if decode.beam > limits.max_beam:
        raise Seq2SeqError(f"--beam {decode.beam} is more than --max-beam {limits.max_beam}")
    trained = load_ensemble(ckpts)  # once, before the port is opened
    engine = Engine(trained, search(trained), decode.max_tokens, decode.max_source_len)
    request_limits = Limits(limits.max_sentences, limits.max_chars, limits.max_beam, decode.beam)
    options = ServerOptions(
        request_limits, limits.max_concurrent, limits.batch_wait_ms / 1000, ckpts
    )
    serve_forever(engine, options, host, port)
