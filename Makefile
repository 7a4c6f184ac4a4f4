# hostkit: the whole set-up is `make demo` and `make test`.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
HOSTKIT := $(VENV)/bin/hostkit
DEB_PACKAGES := openssh-server openssh-client rt-tests numactl containerd iproute2 util-linux procps python3 dmidecode \
		qemu-system-x86 qemu-utils mmdebstrap grub-pc-bin grub-common xorriso mtools e2fsprogs \
		prometheus
STAMP := $(VENV)/.hostkit-installed
PYTEST_ARGS ?=

.PHONY: setup deb venv demo test test-fast test-lab test-vm bench clean

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

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@$(PIP) install -q --upgrade pip
	@$(PIP) install -q -e '.[test]' --config-settings editable_mode=compat
	@$(PY) scripts/build_collection.py --view >/dev/null  # build/collections: ansible.cfg's collection view of the checkout
	@touch $(STAMP)

demo: setup
	@bash scripts/demo.sh

# Fast tests first (unit, fixtures, live reads), then the lab tests over real SSH side by side
# with the real-kernel lab (QEMU guests booted through their own GRUB; the guest image is built
# once into /var/cache/hostkit/vm and reused), then the dependency floors while the VM lanes finish
# (the lab suite ends well before them; the floors measure no latency). The VM suite runs in
# two lanes (VM_LANE_B's modules on their own ports; the rest in lane A, about as long), both
# beside the lab suite: a VM test spends most of its time waiting on TCG guests (boots, Ansible
# inside them), so three processes keep the 2 cores busy where one after another left them idle. Each lane's output follows the lab suite's
# (from .hostkit/test-vm-*.log); any of the three failing fails the run. The VM tests that judge
# latency compare figures measured in the same guest within one run, or state a skip with the
# measured figure when this host's load stops the guest (test_vm_gaps).
VM_LANE_B := tests/test_vm_rollout.py tests/test_vm_tuned.py
test: setup
	$(PY) -m pytest -m 'not lab and not vm and not floors' $(PYTEST_ARGS)
	@mkdir -p .hostkit; echo "VM suite running in two lanes beside the lab suite: .hostkit/test-vm-a.log, .hostkit/test-vm-b.log"; \
	( $(PY) -m pytest -m vm $(addprefix --ignore=,$(VM_LANE_B)) $(PYTEST_ARGS) > .hostkit/test-vm-a.log 2>&1; \
	  echo $$? > .hostkit/test-vm-a.rc ) & a=$$!; \
	( HOSTKIT_TEST_VM_PORT=2600 HOSTKIT_TEST_LAB_PORT=2422 $(PY) -m pytest -m vm $(VM_LANE_B) $(PYTEST_ARGS) \
	  > .hostkit/test-vm-b.log 2>&1; echo $$? > .hostkit/test-vm-b.rc ) & b=$$!; \
	$(PY) -m pytest -m lab $(PYTEST_ARGS); lab=$$?; \
	echo "lab suite exit $$lab; the dependency floors while the VM lanes finish"; \
	$(PY) -m pytest -m floors $(PYTEST_ARGS); floors=$$?; wait $$a $$b; \
	cat .hostkit/test-vm-a.log .hostkit/test-vm-b.log; \
	echo "lab suite exit $$lab, floors exit $$floors, VM lane a exit $$(cat .hostkit/test-vm-a.rc), lane b exit $$(cat .hostkit/test-vm-b.rc)"; \
	test $$lab = 0 && test $$floors = 0 && test "$$(cat .hostkit/test-vm-a.rc)" = 0 && test "$$(cat .hostkit/test-vm-b.rc)" = 0

test-fast: setup
	$(PY) -m pytest -m 'not lab and not vm and not floors' $(PYTEST_ARGS)

test-lab: setup
	$(PY) -m pytest -m lab $(PYTEST_ARGS)

test-vm: setup
	$(PY) -m pytest -m vm $(PYTEST_ARGS)

# The Ansible collection hostkit.tuning (also inside the wheel): build/collection/hostkit-tuning-<version>.tar.gz,
# and ansible-test sanity on it (tests/test_collection.py runs the same).
.PHONY: collection sanity test-floors
collection: setup
	$(PY) scripts/build_collection.py build/collection --tar

sanity: setup
	$(PY) scripts/build_collection.py build/collection --sanity

# Every dependency at its pyproject floor in a fresh venv, then the lint and unit suites (tests/test_floors.py).
test-floors: setup
	$(PY) -m pytest -m floors $(PYTEST_ARGS)

bench: setup
	$(PY) bench/facts.py
	$(PY) bench/apply_fleet.py
	$(PY) bench/smoke_transport.py
	$(PY) bench/audit_fleet.py
	$(PY) bench/gap_probe.py

clean:
	-$(HOSTKIT) lab down 2>/dev/null
	rm -rf .hostkit .pytest_cache
