"""Embedded stores: no server, everything in one index directory.

SQLite holds documents, chunks, ingestion status and key-value data; numpy (or FAISS,
with the ``ann`` extra) holds vectors; CSR arrays hold the graph. FAISS is imported only
when a :class:`FaissHNSWIndex` is created.
"""

from quillian.stores.embedded.graph import CSRGraphStore
from quillian.stores.embedded.sqlite import (
    SqliteDocumentStore,
    SqliteKeyValueStore,
    SqliteStatusStore,
)
from quillian.stores.embedded.vectors import ExactVectorIndex, FaissHNSWIndex, UnknownIdError

__all__ = [
    "CSRGraphStore",
    "ExactVectorIndex",
    "FaissHNSWIndex",
    "SqliteDocumentStore",
    "SqliteKeyValueStore",
    "SqliteStatusStore",
    "UnknownIdError",
]
