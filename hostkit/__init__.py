"""hostkit: tune Linux hosts for latency-critical CPU inference, audit them, roll back, and prove
the result. Distributed as ``hostkit-tuning``; this is the one place its version is written
(pyproject.toml reads it, ``hostkit --version`` prints it, the collection's galaxy.yml follows it)."""

__version__ = "0.2.0"
