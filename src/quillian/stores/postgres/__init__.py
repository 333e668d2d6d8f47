"""The PostgreSQL + pgvector backend (extra ``postgres``): every store protocol in one
schema per workspace, chosen by a ``postgresql://...?workspace=NAME`` location.

Importing this package needs ``psycopg`` and ``psycopg_pool``; the storage factory
imports it only for a PostgreSQL location and names the extra when they are missing.
"""

from quillian.stores.postgres._pg import (
    PostgresLocation,
    Workspace,
    is_postgres_location,
    parse_location,
)
from quillian.stores.postgres.documents import (
    PgChangeLog,
    PgDocumentStore,
    PgKeyValueStore,
    PgStatusStore,
)
from quillian.stores.postgres.files import (
    manifest_state,
    pull_files,
    push_files,
    read_manifest,
    refetch_files,
    write_manifest,
)
from quillian.stores.postgres.graph import PgGraphStore
from quillian.stores.postgres.jobs import PgJobTable
from quillian.stores.postgres.lease import writer_lock
from quillian.stores.postgres.pinned import PinnedVectors
from quillian.stores.postgres.vectors import PgVectorIndex, check_vector_dtype

__all__ = [
    "PgChangeLog",
    "PgDocumentStore",
    "PgGraphStore",
    "PgJobTable",
    "PgKeyValueStore",
    "PgStatusStore",
    "PgVectorIndex",
    "PinnedVectors",
    "PostgresLocation",
    "Workspace",
    "check_vector_dtype",
    "is_postgres_location",
    "manifest_state",
    "parse_location",
    "pull_files",
    "push_files",
    "read_manifest",
    "refetch_files",
    "write_manifest",
    "writer_lock",
]
