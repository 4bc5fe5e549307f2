"""What ``seq2seq serve`` runs: check the options, load the model once, serve it.

Importing this module imports neither FastAPI nor uvicorn; ``start_server`` does, and
says in one line which package of the ``serve`` extra is missing.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from seq2seq.checkpoint import Trained, check_checkpoint_path
from seq2seq.ensemble import load_ensemble
from seq2seq.errors import Seq2SeqError
from seq2seq.search import SearchSettings

SERVE_PACKAGES = {"fastapi", "starlette", "pydantic", "uvicorn"}  # the `serve` extra


def start_server(args: argparse.Namespace, search: Callable[[Trained], SearchSettings]) -> None:
    """Serve ``args.ckpt`` on ``args.host``:``args.port`` until SIGTERM; ``search`` gives
    the search settings for the loaded model (a request sets its beam and n-best)."""
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
    for ckpt in args.ckpt:
        check_checkpoint_path(ckpt)
    if args.beam_size > args.max_beam:
        raise Seq2SeqError(f"--beam {args.beam_size} is more than --max-beam {args.max_beam}")
    trained = load_ensemble(args.ckpt)  # once, before the port is opened
    engine = Engine(trained, search(trained), args.max_tokens, args.max_source_len)
    limits = Limits(args.max_sentences, args.max_chars, args.max_beam, args.beam_size)
    options = ServerOptions(limits, args.max_concurrent, args.batch_wait_ms / 1000, args.ckpt)
    serve_forever(engine, options, args.host, args.port)
