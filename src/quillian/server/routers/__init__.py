"""One router per resource: system (health, metrics), workspaces and methods, retrieval
and answers, documents, jobs, graph browsing, and the OpenAI-compatible endpoints."""
