"""``seq2seq serve``: a model loaded once, translating JSON requests over HTTP.

- ``schema``: the requests and answers (pydantic), with the server's limits in them;
- ``batcher``: dynamic batching: concurrent requests gathered into one batch;
- ``engine``: a batch translated, aligned and its attention read, on the model's thread;
- ``app``: the FastAPI application, its errors, and the uvicorn server.

FastAPI, pydantic and uvicorn (the ``serve`` extra) are imported by these modules only,
and only when ``seq2seq serve`` runs.
"""
