# Two commands do all set-up on a fresh machine: `make up` runs kubemu, `make test` runs the tests.
# Both create the virtualenv and install the project into it first if needed.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: up test bench clean system-deps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# Pod networks need Debian's CNI reference plugins (bridge, host-local, loopback in /usr/lib/cni).
# Installed only when missing, as root, where apt-get is; never fails the build: without them
# kubemu says why and pods share the host's network.
system-deps:
	@if [ ! -x /usr/lib/cni/bridge ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  export DEBIAN_FRONTEND=noninteractive; \
	  (apt-get install -y -q --no-install-recommends containernetworking-plugins \
	   || (apt-get update -q && apt-get install -y -q --no-install-recommends containernetworking-plugins)) \
	   >/dev/null 2>&1 || echo "make: could not install containernetworking-plugins: pods will share the host's network"; \
	fi

up: $(STAMP) system-deps
	$(VENV)/bin/kubemu up $(ARGS)

test: $(STAMP) system-deps
	$(PY) -m pytest $(ARGS)

bench: $(STAMP)
	$(VENV)/bin/kubemu bench $(or $(SUITE),restart) $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
