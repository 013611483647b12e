"""Retrieval: chunking, embedding, per-tenant hnswlib index + SQLite chunk store, ingestion.

Modules (import them directly; nothing heavy loads at import time):

* ``chunker``      — ``Chunk``, ``split_sentences``, ``chunk_text`` (exact char offsets)
* ``embedder``     — ``SentenceTransformerEmbedder``, ``load_embedder``, ``model_path``
* ``vector_index`` — ``VectorIndex`` protocol, ``HnswVectorIndex``
* ``chunk_store``  — SQLite documents/chunks, ``DocumentRecord``, ``DocumentInfo``
* ``tenant_index`` — ``TenantIndex``, ``IndexWriter``, ``IndexManager``, name validation
* ``readers``      — ``read_documents`` (.txt .md .html .pdf .jsonl)
* ``ingest``       — ``ingest_paths``, ``ingest_texts``, ``delete_documents``
"""
