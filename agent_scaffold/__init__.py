"""Agent scaffold: the agent loop, its tools, prompts, trajectories and policy backends."""
