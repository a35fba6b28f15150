"""Answers with cited sources: the retrieved documents a reader may read, formatted as a numbered context for an
LLM that must answer only from it and cite ``[N]``; citations parsed back into sources. Domain code: no dagster."""
