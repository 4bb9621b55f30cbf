"""Embeddings: the (model, text) LRU, the micro-batcher and the OpenAI response encoding."""
