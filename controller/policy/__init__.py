"""The RolloutPolicy resource (``lwsflow.io/v1alpha1``): model, CRD generation, status mirror."""
