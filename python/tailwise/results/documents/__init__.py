"""The documents tailwise writes, as typed models: each is written through its model and its JSON
schema in docs/schema is generated from it (``python -m tailwise.results.documents``)."""
