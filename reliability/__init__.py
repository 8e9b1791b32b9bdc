"""The fault and bad-input campaigns and the code they share with ``tests/reliability``: trials,
invariants, generated inputs and a CLI runner. Importable from the repository root (pytest puts it
on ``sys.path``; the campaign scripts insert it), never installed."""
