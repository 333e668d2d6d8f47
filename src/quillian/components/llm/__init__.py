"""The LLM layer: the chat-model protocol and typed parsing of model output."""
