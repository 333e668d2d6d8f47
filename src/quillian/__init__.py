"""Quillian: knowledge-graph-augmented retrieval-augmented generation.

Named after M. Ross Quillian, who invented semantic networks and spreading activation.
"""

__version__ = "0.1.0"
