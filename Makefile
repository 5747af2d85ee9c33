# The two set-up commands users run (see README): `make demo` and `make test`.
VENV := .venv
PY := $(VENV)/bin/python

.PHONY: demo test setup
setup:
	@scripts/setup.sh

demo: setup
	$(PY) examples/queue_demo.py

test: setup
	$(PY) -m pytest -n auto -q
