"""Self-play SWE-RL: artifacts, validation, grading, rewards, store, learner, orchestration and CLI."""
