"""The chain every source shares: partitions, the raw documents asset, chunks, vectors and the Qdrant points,
their resources, IO manager and metadata, the SourceSpec that ties one source to them, and offline discovery."""
