"""Evaluation: data sets, answer metrics, the QA harness and Know3-RAG's θ0 calibration."""
