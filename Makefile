# Two commands do all set-up on a fresh machine: `make up` runs kubemu, `make test` runs the tests.
# Both create the virtualenv and install the project into it first if needed.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: up test bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

up: $(STAMP)
	$(VENV)/bin/kubemu up $(ARGS)

test: $(STAMP)
	$(PY) -m pytest $(ARGS)

bench: $(STAMP)
	$(VENV)/bin/kubemu bench $(or $(SUITE),restart) $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
