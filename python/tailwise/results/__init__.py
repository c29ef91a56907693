"""The data model and what commands write and read back: the engine's rows and result as plain types
(rows, measured), the documents (documents/), the results directory's files (export/), datasets."""
