"""Baselines and drift: a tuned host's effective state (:mod:`.state`) and its latency signature
recorded (:mod:`.store`), then re-read and re-measured and judged against them: state differences
by layer with what the plan says of each, the tail's movement with its interval and test
(:mod:`.latency`), and a verdict (:mod:`.fleet`)."""
