"""Quillian: knowledge-graph-augmented retrieval-augmented generation.

Named after M. Ross Quillian, who invented semantic networks and spreading activation.
"""

from quillian import _ast_guard

__version__ = "0.1.0"

_ast_guard.install()
