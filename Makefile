# The two set-up commands users run (see README): `make demo` and `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test setup
setup:
	@scripts/setup.sh

demo:
	@HCQ_EXTRAS=test,examples scripts/setup.sh
	$(PY) examples/digits.py

test: setup
	$(PY) -m ruff check --quiet .
	$(PY) -m mypy
	$(PY) -m pytest -n auto -q
