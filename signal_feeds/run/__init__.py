"""One run over the source list: the stages, the writer, the report."""
