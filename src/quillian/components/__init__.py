"""Quillian."""
