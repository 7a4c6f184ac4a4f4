#!/usr/bin/env bash
# make demo: the main job on the embedded default, the local lab.
# One real sshd lab host per fixture; facts over SSH through Ansible; plan; apply (guests take
# the vmware-guest profile, the VMware fixture is refused the bare-metal one); a second apply
# that changes nothing; an audit over testinfra; rollback to the byte; a smoke test here.
set -euo pipefail
cd "$(dirname "$0")/.."
HOSTKIT=.venv/bin/hostkit
LAB=.hostkit/demo-lab
$HOSTKIT lab down --dir "$LAB" >/dev/null 2>&1 || true
trap '$HOSTKIT lab down --dir "$LAB"' EXIT
step() { printf '\n== %s\n' "$*"; }

step "this machine (sysroot /)"
$HOSTKIT facts

step "lab: one sshd host per fixture on 127.0.0.2..."
$HOSTKIT lab up --dir "$LAB" --host epyc-nps1=epyc-9634-nps1 --host epyc-nps4=epyc-9654-nps4-smt \
  --host xeon-snc2=xeon-8480-snc2-ht --host vmware-guest=vmware-88vcpu --host kvm-guest=kvm-small \
  --host this-machine=this-machine
INV="$LAB/inventory.yml"

step "facts of every lab host, over SSH through ansible-runner"
$HOSTKIT facts -i "$INV"

step "the production incident's VMware guest, in detail"
$HOSTKIT facts --sysroot "$LAB/hosts/vmware-guest/root"

step "plan for the production incident's bare-metal host"
$HOSTKIT plan -i "$INV" --limit epyc-nps1

step "apply the bare-metal hosts (the guests are refused the bare-metal profile: exit 3 for them)"
$HOSTKIT apply -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2,vmware-guest' || [ $? -eq 3 ]

step "apply again: nothing changes"
$HOSTKIT apply -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2' 2>/dev/null

step "audit over testinfra (the planned kernel arguments wait for a reboot)"
$HOSTKIT audit -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2'

step "rollback: every tree back to the byte"
$HOSTKIT rollback -i "$INV" --limit 'epyc-nps1,epyc-nps4,xeon-snc2'

step "a short smoke test on this machine (p999 deschedule of SHM inference)"
$HOSTKIT smoke --duration 3 --target-p999-ms 50 || true

# The real-kernel lab: one QEMU guest (2 vCPUs), tuned, rebooted through its own GRUB, shown isolated.
VMLAB=.hostkit/demo-vm
if [ "$(id -u)" = 0 ] && command -v qemu-system-x86_64 >/dev/null && command -v mmdebstrap >/dev/null; then
  $HOSTKIT lab down --dir "$VMLAB" >/dev/null 2>&1 || true
  trap '$HOSTKIT lab down --dir "$LAB"; $HOSTKIT lab down --dir "$VMLAB"' EXIT
  step "real kernel: a QEMU guest booted through its own GRUB (its image is built once, ~3-6 min, then cached)"
  $HOSTKIT lab up --dir "$VMLAB" --vm guest=small --port 2224
  # One housekeeping core of two; isolation allowed on this (honest, non-deceptive) test guest.
  .venv/bin/python - "$VMLAB/inventory.yml" <<'PY'
import sys, yaml
path = sys.argv[1]
inv = yaml.safe_load(open(path))
inv["all"]["children"]["lab"]["hosts"]["guest"]["hostkit_overrides"] = {
    "reserve_per_node": 1, "allow_virtual": True, "containerd": {"enabled": False}, "kubelet": {"enabled": False}}
open(path, "w").write(yaml.safe_dump(inv, sort_keys=False))
PY
  step "apply --reboot: tune the guest, reboot it into the planned kernel arguments, re-check /proc/cmdline"
  $HOSTKIT apply -i "$VMLAB/inventory.yml" --reboot
  step "the live guest kernel: its command line and its isolated CPUs"
  ssh -F "$VMLAB/ssh_config" guest 'cat /proc/cmdline; echo "isolated: $(cat /sys/devices/system/cpu/isolated)  nohz_full: $(cat /sys/devices/system/cpu/nohz_full)"'
else
  step "real-kernel lab skipped: needs root, qemu-system-x86 and mmdebstrap (make setup installs them)"
fi
