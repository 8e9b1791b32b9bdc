"""Blue-green, in one place: ``plan`` (pure: phases, weights, the next step), ``kinds`` (what differs
between a pair, a DisaggregatedSet and an LWS), ``executor`` (the I/O around the plan, for the CLI and
the controller), ``incluster`` (what the controller decides for a blue-green RolloutPolicy) and
``status`` (the policy's status mirror). docs/rollout.md and docs/controller.md, "Blue-green".
"""
