# The two commands of the README: `make demo` (set up, then the full pipeline on the embedded
# cluster; `make demo KEEP=1` keeps the cluster, the controller and the dashboard up until Ctrl-C) and
# `make test` (set up, then lint, then the type check beside the whole test suite: scripts/test).
# `make conformance` builds the reference cluster from Go modules when missing (minutes, once per
# machine: the binaries are cached outside the repository), then compares it with the embedded one.
.PHONY: setup demo test lint bench conformance refcluster

setup:
	@bash scripts/setup

demo: setup
	.venv/bin/lwsflow demo $(if $(filter 1 yes true,$(KEEP)),--keep)

lint: setup
	.venv/bin/ruff check .
	scripts/typecheck

test: setup
	@scripts/test

bench: setup
	.venv/bin/python bench/run_all.py

refcluster:
	@bash scripts/build-refcluster

# the run's results (build/conformance/results.json, differential.json) give its figures, printed after
conformance: setup refcluster
	@status=0; LWSFLOW_CONFORMANCE=1 .venv/bin/python -m pytest tests/conformance -q -p no:cacheprovider \
		|| status=$$?; .venv/bin/python bench/conformance_figures.py || true; exit $$status
