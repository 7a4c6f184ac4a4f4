"""One CLI: every command's options read and behave the same. --json in the same words everywhere;
-i, --limit, --forks, -v and --log on every command that works on an inventory; those refused
(exit 2, one line, nothing run) where they mean nothing (a --sysroot, this machine)."""

from __future__ import annotations

import argparse

import pytest

from hostkit.cli.args import JSON_HELP
from hostkit.cli.main import build_parser, main


def commands() -> dict[str, argparse.ArgumentParser]:
    """Every command and sub-command's parser, by its name ("hostkit lab up")."""
    out = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        out[name] = parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}")

    walk(build_parser(), "hostkit")
    return out


def options(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: a for a in parser._actions for flag in a.option_strings}


# Commands whose text is a document of its own or a file, with no JSON to give: why.
NO_JSON = {
    "hostkit fixtures make": "writes a sysroot tree and prints its path",
    "hostkit fixtures capture": "writes a fixture JSON file (its argument) and prints one line",
}
# A fleet command without --forks, and why.
NO_FORKS = {"hostkit rollout": "hosts at a time are its waves (--batch, --max-unavailable)"}


def leaves() -> dict[str, argparse.ArgumentParser]:
    """The commands that run (a parser without sub-commands)."""
    return {
        n: p for n, p in commands().items() if not any(isinstance(a, argparse._SubParsersAction) for a in p._actions)
    }


def test_every_command_with_a_document_has_json_in_the_same_words():
    runs = leaves()
    assert len(runs) >= 15, sorted(runs)
    for name, parser in runs.items():
        opts = options(parser)
        if name in NO_JSON:
            assert "--json" not in opts, f"{name} has --json now: drop it from NO_JSON"
            continue
        assert "--json" in opts, f"{name} has no --json"
        assert opts["--json"].help == JSON_HELP, f"{name}: --json says {opts['--json'].help!r}"


def test_every_fleet_command_takes_limit_forks_verbose_and_log():
    fleet = {n: p for n, p in leaves().items() if "-i" in options(p)}
    assert {
        "hostkit facts",
        "hostkit plan",
        "hostkit apply",
        "hostkit history",
        "hostkit rollback",
        "hostkit rollout",
        "hostkit smoke",
        "hostkit gaps",
        "hostkit unlock",
        "hostkit audit",
    } <= set(fleet)
    for name, parser in fleet.items():
        wanted = {"--limit", "-v", "--log"} | (set() if name in NO_FORKS else {"--forks"})
        assert wanted <= set(options(parser)), f"{name} lacks {wanted - set(options(parser))}"
    for name in NO_FORKS:
        assert "--forks" not in options(fleet[name])


def _run(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exc:
        raise SystemExit(main(list(argv)))
    return int(exc.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(
    "argv,message",
    [
        (
            ["facts", "--sysroot", "{root}", "--limit", "web"],
            "--limit with --sysroot {root}: it acts on the hosts of an",
        ),
        (["plan", "--sysroot", "{root}", "--forks", "4"], "--forks with --sysroot {root}: it acts on"),
        (["facts", "--limit", "web", "-v"], "--limit, -v without -i INVENTORY: they act on"),
        (["plan", "--sysroot", "{root}", "--log", "{root}/a.log"], "--log with --sysroot"),
        (["smoke", "--limit", "web", "--duration", "1"], "--limit without -i INVENTORY: it acts on"),
        (["smoke", "--forks", "2", "--duration", "1"], "without -i the smoke test runs on this machine"),
        (["gaps", "-v", "--duration", "1"], "without -i the probe runs on this machine"),
    ],
    ids=["facts-limit", "plan-forks", "facts-limit-v", "plan-log", "smoke-limit", "smoke-forks", "gaps-v"],
)
def test_fleet_options_without_an_inventory_are_bad_input(tmp_path, capsys, argv, message):
    """Nothing runs: no facts read, no smoke test started; one line on stderr, exit 2."""
    root = str(tmp_path)
    rc, err = _run(capsys, *[a.format(root=root) for a in argv])
    assert rc == 2 and err.count("\n") == 1 and err.startswith("hostkit: error: "), err
    assert message.format(root=root) in err, err
    assert not (tmp_path / "a.log").exists()


@pytest.mark.parametrize("value", ["0", "-3", "many", "10001", "9" * 5000])
def test_forks_is_a_whole_number_of_hosts(capsys, value):
    rc, err = _run(capsys, "history", "-i", "nowhere.yml", "--forks", value)
    assert rc == 2 and "argument --forks: hosts at a time: a whole number 1-10000" in err, err
    assert err.count("hostkit: error:") == 1


def test_fleet_options_with_an_inventory_reach_the_request(monkeypatch, tmp_path):
    """--forks and --limit are handed to the operation (the api's request), with -i."""
    from hostkit import api

    seen = {}

    def history(req):
        seen["req"] = req
        return api.HistoryResult({}, None)

    monkeypatch.setattr(api, "history", history)
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    h1:\n")
    assert main(["history", "-i", str(inv), "--limit", "h1", "--forks", "3", "--json"]) == 0
    assert (seen["req"].limit, seen["req"].forks) == ("h1", 3)
