"""unified: test-time RL for code LLMs with one resident policy and one resident vLLM engine."""
