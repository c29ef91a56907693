"""Agents on other machines: the gRPC service (server), its client, a group run over them, deploy."""
