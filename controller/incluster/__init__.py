"""The in-cluster rollout controller: reconciles RolloutPolicies (``lwsflow controller run``)."""
