"""Plugins shared by every test directory: the real PostgreSQL server (``postgres``)."""

pytest_plugins = ["quillian.testing.postgres"]
