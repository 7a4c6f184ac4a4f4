"""Facts + profile -> a concrete, validated tuning plan (:func:`make_plan`)."""

from hostkit.plan.planner import ISOLATION_ARGS, make_plan

__all__ = ["make_plan", "ISOLATION_ARGS"]
