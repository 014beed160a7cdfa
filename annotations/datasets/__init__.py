"""Dataset files going in and out: the JSONL import and the exports, column mappings and the mapped import, the
Parquet export, the store of the judge scores a file carries, and editing a dataset as a whole."""
