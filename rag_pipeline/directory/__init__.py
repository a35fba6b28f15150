"""The principal directory: who exists in each source, what they belong to, one person across sources, and why a
person may or may not read a document. Domain code: no dagster."""
