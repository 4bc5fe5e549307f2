"""The FastAPI application of ``seq2seq serve`` and the uvicorn server that runs it.

``POST /translate`` checks a request against ``schema.request_model`` and hands its
sentences to the batcher; ``GET /health`` says the model is loaded; ``GET /`` is a page
to translate a sentence and see its attention (``page``). Every error is JSON,
``{"error": "..."}`` in one line: 400 for a body that is not JSON, 422 for a request the
schema refuses (naming the field), 503 when ``max_concurrent`` requests are in flight, 500
for a failure while translating (logged; the server goes on). SIGTERM stops accepting,
answers the requests in flight, and exits with status 0.

This module deliberately has no ``from __future__ import annotations``: FastAPI reads the
endpoints' annotations, and the request model is a local class built for the limits.
"""

import logging
import os
import signal
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, NoReturn, cast

import uvicorn
from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from seq2seq import __version__
from seq2seq.common.errors import Seq2SeqError
from seq2seq.serve.batcher import Batcher
from seq2seq.serve.engine import Engine, SearchKey, Sentence
from seq2seq.serve.page import live_page
from seq2seq.serve.schema import (
    ErrorResponse,
    Health,
    Limits,
    TranslateRequestBase,
    TranslateResponse,
    request_model,
)

log = logging.getLogger("seq2seq")
ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": description}
    for status, description in [
        (400, "the body is not JSON"),
        (422, "the request breaks the schema or a limit"),
        (500, "translating failed"),
        (503, "too many requests in flight"),
    ]
}


@dataclass(frozen=True)
class ServerSettings:
    """How the server takes requests: their limits, how many may be in flight at once,
    how long the batcher waits for more, and the model's name (the page's title, in
    /health: never a path of the server's disk)."""

    limits: Limits
    max_concurrent: int
    batch_wait_s: float
    model: str


def create_app(engine: Engine, options: ServerSettings) -> FastAPI:
    """The application serving ``engine``'s model. Its three routes are written inside, as
    FastAPI's closures over the batcher and the count of requests in flight: the function is
    long because it holds them."""
    batcher = Batcher(engine.run, engine.model.max_tokens, options.batch_wait_s)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(
        title="seq2seq",
        version=__version__,
        description="Neural machine translation: translations, word alignments, attention.",
        lifespan=lifespan,
    )
    _add_error_handlers(app)
    TranslateRequest = request_model(options.limits)  # noqa: N806 (a class)
    in_flight = 0

    @app.post(
        "/translate",
        response_model=TranslateResponse,
        response_model_exclude_none=True,
        responses=ERRORS,
    )
    async def translate(body: TranslateRequest) -> dict[str, Any]:  # type: ignore[valid-type]
        """Translate every sentence of ``text``; word alignments and attention maps on
        request. Requests arriving together are translated in one batch."""
        nonlocal in_flight
        request = cast(TranslateRequestBase, body)  # body's class is built at run time
        if in_flight >= options.max_concurrent:
            raise HTTPException(
                503,
                f"busy: {options.max_concurrent} requests are in flight (--max-concurrent); "
                "try again",
            )
        if (request.alignment or request.attention) and not engine.has_attention:
            raise HTTPException(
                422,
                "alignment and attention need a checkpoint: this server's model is a "
                "CTranslate2 export, which keeps no attention",
            )
        in_flight += 1
        try:
            sentences = [
                Sentence(text, request.alignment, request.attention) for text in request.text
            ]
            size = sum(engine.size(text) for text in request.text)
            key = SearchKey(request.beam, request.n_best)
            results = await batcher.submit(key, sentences, size)
        except Exception as error:
            log.exception("translating a request failed")
            # not the error's text, which may name the server's files: the log has it
            message = f"translating failed ({type(error).__name__}); see the server's log"
            raise HTTPException(500, message) from error
        finally:
            in_flight -= 1
        return {"results": results}

    layers, heads = (1, 1, *(engine.model.heads or ()))[-2:]  # () (H,) (L, H) -> L, H
    page = live_page(
        f"seq2seq: {options.model}", layers, heads,
        options.limits.default_beam, options.limits.max_beam,
    )  # fmt: skip

    @app.get("/", response_class=HTMLResponse)
    async def live_attention() -> str:
        """A page to type a sentence into and see its translation and attention."""
        return page

    @app.get("/health", response_model=Health)
    async def health() -> Health:
        """The model is loaded and the server answers."""
        model = engine.model
        return Health(
            status="ok",
            model_loaded=True,
            version=__version__,
            model=options.model,
            src_lang=model.src_lang,
            tgt_lang=model.tgt_lang,
            in_flight=in_flight,
            batches=batcher.batches,
            sentences_per_batch=round(batcher.sentences / max(batcher.batches, 1), 2),
        )

    return app


def _describe(error: dict[str, Any]) -> str:
    """One pydantic error in words: ``text.0: String should have at most 10 characters``."""
    where = ".".join(str(part) for part in error["loc"] if part != "body")
    if error["type"] == "extra_forbidden":
        return f"unknown field {where!r}"
    if not where and error["type"] in ("model_attributes_type", "dict_type", "model_type"):
        return "the body must be a JSON object"
    message = error["msg"].removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _add_error_handlers(app: FastAPI) -> None:
    """Every refusal as ``{"error": "..."}``."""

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        not_json = [e for e in errors if e["type"] == "json_invalid"]
        if not_json:
            reason = not_json[0].get("ctx", {}).get("error", "")
            message = f"the body is not valid JSON{': ' + reason if reason else ''}"
            return JSONResponse({"error": message}, status_code=400)
        return JSONResponse({"error": "; ".join(map(_describe, errors))}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def refused(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)


def _listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound before uvicorn starts: a port in use is one line."""
    try:
        return socket.create_server((host, port), reuse_port=False)
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise Seq2SeqError(f"cannot listen on {host}:{port}: {reason}") from error


def _exit_quietly(signum: int, frame: object) -> NoReturn:
    """After uvicorn has drained the requests in flight it raises the signal again; end
    then, SIGTERM with status 0 (an asked-for stop), SIGINT with 130, no traceback."""
    raise SystemExit(0 if signum == signal.SIGTERM else 128 + signum)


def serve_forever(engine: Engine, options: ServerSettings, host: str, port: int) -> None:
    """Serve until SIGTERM or SIGINT; requests in flight are answered before the end."""
    sock = _listen(host, port)
    app = create_app(engine, options)
    config = uvicorn.Config(app, log_level="info", timeout_graceful_shutdown=None)
    log.info("serving on http://%s:%d (API documentation: /docs)", host, sock.getsockname()[1])
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_quietly)
    uvicorn.Server(config).run(sockets=[sock])
