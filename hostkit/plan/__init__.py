"""Facts + profile -> a typed tuning plan (:func:`build_plan` -> :class:`Plan`); :func:`make_plan`
returns its JSON document (:meth:`Plan.to_dict`)."""

from hostkit.plan.model import IrqPlan, NodePartition, Plan
from hostkit.plan.planner import ISOLATION_ARGS, build_plan, make_plan

__all__ = ["build_plan", "make_plan", "Plan", "NodePartition", "IrqPlan", "ISOLATION_ARGS"]
