"""The server's requests and answers as pydantic models, so that FastAPI checks every
request against them and documents them in its OpenAPI schema (``/openapi.json``).

A request's limits (sentences, characters, beam) are the server's options, so the request
model is built for them (``request_model``) and the schema shows the ranges. Unknown
fields and values of the wrong type (``"5"`` for a beam) are errors, not guessed at.

Shapes in answers: S source pieces, T target pieces (both ending with ``</s>``), L layers,
H heads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from seq2seq.inference.search import DEFAULT_SEARCH


@dataclass(frozen=True)
class Limits:
    """What one request may ask for: ``max_sentences`` lines of at most ``max_chars``
    characters, a beam in [1, ``max_beam``] (``default_beam`` when not given)."""

    max_sentences: int = 64
    max_chars: int = 1000
    max_beam: int = 16
    default_beam: int = DEFAULT_SEARCH.beam


class TranslateRequestBase(BaseModel):
    """The fields every request model has; ``request_model`` adds the limits."""

    model_config = ConfigDict(extra="forbid", strict=True)

    text: list[str]
    beam: int
    n_best: int
    alignment: bool = Field(False, description="word alignments, Pharaoh i-j (0-indexed)")
    attention: bool = Field(False, description="the attention map of every hypothesis")

    @model_validator(mode="after")
    def _n_best_within_beam(self) -> TranslateRequestBase:
        if self.n_best > self.beam:
            raise ValueError(f"n_best {self.n_best} is more than beam {self.beam}")
        return self


def request_model(limits: Limits) -> type[TranslateRequestBase]:
    """The request model of a server with ``limits``."""
    line = Annotated[str, StringConstraints(max_length=limits.max_chars)]

    class TranslateRequest(TranslateRequestBase):
        """Sentences to translate, one per item, and how to search."""

        text: list[line] = Field(
            min_length=1,
            max_length=limits.max_sentences,
            description="source sentences (a blank one gets an empty translation)",
        )
        beam: int = Field(limits.default_beam, ge=1, le=limits.max_beam, description="1: greedy")
        n_best: int = Field(1, ge=1, le=limits.max_beam, description="hypotheses per sentence")

    return TranslateRequest


class HypothesisAttention(BaseModel):
    """What the decoder attended to while writing one hypothesis."""

    source: list[str] = Field(description="source pieces, the last one </s> [S]")
    target: list[str] = Field(description="target pieces, the last one </s> [T]")
    weights: list[list[float]] = Field(description="[T][S]: the mean over layers and heads")
    heads: list[list[list[list[float]]]] = Field(
        description="[L][H][T][S]: every layer's every head (an RNN's attention: L = 1)"
    )


class Hypothesis(BaseModel):
    """One translation of a sentence."""

    text: str
    score: float = Field(description="log-probability over the GNMT length penalty")
    alignment: str | None = Field(
        None, description="Pharaoh links source-target between words (with alignment: true)"
    )
    attention: HypothesisAttention | None = Field(None, description="with attention: true")


class SentenceTranslation(BaseModel):
    """The n-best translations of one source sentence, best first."""

    source: str
    translations: list[Hypothesis]


class TranslateResponse(BaseModel):
    """One result per sentence of the request, in its order."""

    results: list[SentenceTranslation]


class ErrorResponse(BaseModel):
    """Why a request was refused or failed, in one line."""

    error: str


class Health(BaseModel):
    """The server is up and its model loaded."""

    status: str
    model_loaded: bool
    version: str
    model: str = Field(description="the model's name: --name, else its run folder's")
    src_lang: str | None
    tgt_lang: str | None
    in_flight: int = Field(description="/translate requests being answered now")
    batches: int = Field(description="batches the dynamic batcher has run so far")
    sentences_per_batch: float = Field(description="sentences per batch so far, on average")
