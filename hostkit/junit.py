"""JUnit XML, the one writer behind ``hostkit audit --junit`` and ``hostkit drift --junit``: one test
suite of cases, each passed (with a note as its ``system-out``, or none), failed, in error or skipped."""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape, quoteattr


@dataclass(frozen=True)
class Case:
    classname: str
    name: str
    outcome: str | None = None  # None: passed; "failure", "error" or "skipped"
    message: str = ""
    text: str = ""  # the outcome's body; of a passed case, its system-out

    def xml(self) -> str:
        attrs = f"classname={quoteattr(self.classname)} name={quoteattr(self.name)}"
        if self.outcome is None:
            body = f"<system-out>{escape(self.text)}</system-out>" if self.text else ""
        elif self.text:
            body = f"<{self.outcome} message={quoteattr(self.message)}>{escape(self.text)}</{self.outcome}>"
        else:
            body = f"<{self.outcome} message={quoteattr(self.message)}/>"
        return f"  <testcase {attrs}>{body}</testcase>"


def suite(name: str, cases: list[Case]) -> str:
    """The document: a ``testsuite`` with its counts, then its cases in the order given."""
    counts = {o: sum(c.outcome == o for c in cases) for o in ("failure", "error", "skipped")}
    return (
        f'<?xml version="1.0" encoding="utf-8"?>\n<testsuite name={quoteattr(name)} tests="{len(cases)}" '
        f'failures="{counts["failure"]}" errors="{counts["error"]}" skipped="{counts["skipped"]}">\n'
        + "\n".join(c.xml() for c in cases)
        + "\n</testsuite>\n"
    )
