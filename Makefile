# The two commands of the README: `make demo` (set up, then the full pipeline on the embedded
# cluster) and `make test` (set up, then lint, type check, drift checks and the whole test suite).
.PHONY: setup demo test lint bench

setup:
	@bash scripts/setup

demo: setup
	.venv/bin/lwsflow demo

lint: setup
	.venv/bin/ruff check .
	scripts/typecheck

test: setup
	.venv/bin/ruff check .
	scripts/typecheck
	.venv/bin/python -m pytest -n 2 -q

bench: setup
	.venv/bin/python bench/run_all.py
