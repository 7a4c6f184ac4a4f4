"""hostkit's core: the parsers and rules every layer shares, below all of them.

CPU lists and masks (``cpulist``), reading a host's files under a sysroot (``sysroot``), how a
kernel value compares (``values``), kernel command-line words (``kernel_args``), the boot loaders'
files (``boot_loader``), which kernel threads may move (``kthreads``), IRQ affinity rules
(``irq_affinity``). Standard library only, Python 2-compatible syntax: the same files run on the
controller, on hosts inside the agent zipapp, and inside hostkit's Ansible modules (linked as
``module_utils/hostkit_<name>.py``). Nothing here imports another hostkit package.
"""
