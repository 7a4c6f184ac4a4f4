"""``hostkit rollout``: a rolling, SLO-gated rollout of the tuning over a fleet, in batches.

A driver loop over :mod:`hostkit.api` (apply, audit, smoke, rollback, history): the hosts of one
batch run in parallel (one Ansible run with ``limit``), batches strictly one after the other.

* :mod:`hostkit.rollout.batches`: which hosts go together (canaries first, then N or P% at a time);
* :mod:`hostkit.rollout.hooks`: the inventory's pre/post-batch commands, run on the controller;
* :mod:`hostkit.rollout.state`: the rollout's state file, rewritten atomically after every step;
* :mod:`hostkit.rollout.driver`: the loop, ``--resume`` and ``--abort``;
* :mod:`hostkit.rollout.report`: the fleet report (Markdown; PNG and Prometheus through
  :mod:`hostkit.smoke.prometheus` and :mod:`hostkit.smoke.plots`).
"""
