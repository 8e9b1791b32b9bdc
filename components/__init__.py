"""Pipeline steps as plain functions (render, build, promote, rollout, smoke) with kfp and hera wrappers."""
