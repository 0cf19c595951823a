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

# Pod networks need Debian's CNI reference plugins (bridge, host-local, loopback in /usr/lib/cni)
# and nftables (kube-proxy's rules); kube-proxy clears stale UDP flows with conntrack. Each is
# installed only when missing, as root, where apt-get is; never fails the build: without them
# kubemu says why (pods share the host's network; stale UDP flows are left to time out).
SYSTEM_DEPS := containernetworking-plugins:/usr/lib/cni/bridge nftables:/usr/sbin/nft conntrack:/usr/sbin/conntrack

system-deps:
	@for dep in $(SYSTEM_DEPS); do \
	  pkg=$${dep%%:*}; file=$${dep#*:}; \
	  if [ ! -x "$$file" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    export DEBIAN_FRONTEND=noninteractive; \
	    (apt-get install -y -q --no-install-recommends $$pkg \
	     || (apt-get update -q && apt-get install -y -q --no-install-recommends $$pkg)) \
	     >/dev/null 2>&1 || echo "make: could not install $$pkg: kubemu will say what it does without it"; \
	  fi; \
	done

up: $(STAMP) system-deps
	$(VENV)/bin/kubemu up $(ARGS)

test: $(STAMP) system-deps
	$(PY) -m pytest $(ARGS)

bench: $(STAMP)
	$(VENV)/bin/kubemu bench $(or $(SUITE),restart) $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
