"""The engine's drivers: the agent interface, snapshots, the local in-process agent, the client host's facts."""
