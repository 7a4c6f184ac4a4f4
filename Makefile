# hostkit: the whole set-up is `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOSTKIT := $(VENV)/bin/hostkit
DEB_PACKAGES := openssh-server openssh-client rt-tests numactl containerd iproute2 util-linux procps python3 dmidecode \
		qemu-system-x86 qemu-utils mmdebstrap grub-pc-bin grub-common xorriso mtools e2fsprogs \
		prometheus openssl
STAMP := $(VENV)/.hostkit-installed
PYTEST_ARGS ?=
# Python may cache the checkout's compiled modules (__pycache__/, ignored by git): an environment
# that sets PYTHONDONTWRITEBYTECODE would have every process of the tests (each hostkit command, each
# Ansible worker loading hostkit's plugins) compile hostkit again, about 0.5 s of CPU each.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup deb venv demo test test-fast test-lab test-vm bench fuzz clean lint dist

setup: deb venv

# Debian packages: installed only when missing, quietly.
deb:
	@missing=""; for p in $(DEB_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi

# community.general's Redfish modules for the tests that run them beside hostkit (a no-op once there)
venv: $(STAMP)
	@$(PY) scripts/community_general.py

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PIP) install -q --upgrade pip
	@# this distribution's name before 0.2.0 (now hostkit-tuning), and its editable install's metadata
	@$(PIP) uninstall -q -y hostkit 2>/dev/null || true; rm -rf hostkit.egg-info
	@$(PIP) install -q -e '.[test,lint,dist]' --config-settings editable_mode=compat
	@$(PY) scripts/build_collection.py --view >/dev/null  # build/collections: ansible.cfg's collection view of the checkout
	@touch $(STAMP)

demo: setup
	@bash scripts/demo.sh

# The fast suite alone first (its tests that measure on this machine one at a time, the rest with
# pytest-xdist on both cores), then the lab suite beside the
# real-kernel (VM) suite in two lanes and the dependency floors; each suite's
# time, the ten slowest tests and the guest boots at the end (scripts/run_tests.py, docs/dev/testing.md).
test: setup
	$(PY) scripts/run_tests.py $(PYTEST_ARGS)

# Every file generated from the code, regenerated (scripts/generated.py lists the generators: role
# variables, role READMEs, docs/contracts.md); `$(PY) scripts/generated.py --check` only checks.
.PHONY: generate
generate: venv
	$(PY) scripts/generated.py

# ruff (lint and format) over the tree and mypy over core/, plan/ and api.py ([tool.ruff], [tool.mypy]).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test-fast: setup
	$(PY) -m pytest -m unit $(PYTEST_ARGS)

test-lab: setup
	$(PY) -m pytest -m lab $(PYTEST_ARGS)

test-vm: setup
	$(PY) -m pytest -m vm $(PYTEST_ARGS)

# The release files in dist/: the sdist and the wheel of hostkit-tuning (the wheel built from the sdist),
# the collection tarball hostkit-tuning-<version>.tar.gz and SHA256SUMS (scripts/dist.py).
dist: setup
	$(PY) scripts/dist.py dist

# The Ansible collection hostkit.tuning (also inside the wheel): build/collection/hostkit-tuning-<version>.tar.gz,
# and ansible-test sanity on it (tests/unit/test_collection.py runs the same).
.PHONY: collection sanity test-floors
collection: setup
	$(PY) scripts/build_collection.py build/collection --tar

sanity: setup
	$(PY) scripts/build_collection.py build/collection --sanity

# Every dependency at its pyproject floor in a fresh venv, then the lint and unit suites (tests/floors/test_floors.py).
test-floors: setup
	$(PY) -m pytest -m floors $(PYTEST_ARGS)

# The generated-input properties of tests/unit/test_fuzz.py with a large budget (make test runs 40 each).
fuzz: setup
	HOSTKIT_FUZZ_EXAMPLES=$${HOSTKIT_FUZZ_EXAMPLES:-2000} $(PY) -m pytest tests/unit/test_fuzz.py -q $(PYTEST_ARGS)

bench: setup
	$(PY) bench/facts.py
	$(PY) bench/apply_fleet.py
	$(PY) bench/module_route.py
	$(PY) bench/smoke_transport.py
	$(PY) bench/audit_fleet.py
	$(PY) bench/rollout_fleet.py
	$(PY) bench/bmc_fleet.py
	$(PY) bench/drift_fleet.py
	$(PY) bench/gap_probe.py
	$(PY) bench/lab_up.py

clean:
	-$(HOSTKIT) lab down 2>/dev/null
	rm -rf .hostkit .pytest_cache
