"""The agent service's wire format: agent.proto and its generated stubs (``python -m tailwise.agents.proto``)."""
