"""Evaluation: answer metrics and (later) the QA benchmark harness."""
