"""The Ansible collection hostkit.tuning, assembled from the repository by scripts/build_collection.py:
what it holds, that `ansible-galaxy collection build` gives the same files, that every module's
documentation matches its argument_spec and renders with ansible-doc, and `ansible-test sanity`."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

import hostkit
from hostkit import paths
from hostkit.actions import ARG_SPECS
from hostkit.ansible import settings as st
from hostkit.ansible.reboot import DEFAULT_TIMEOUT as REBOOT_TIMEOUT
from tests.modules.runner import load_module

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
MODULES = sorted(p.stem for p in (REPO / "library").glob("*.py"))


def _build_script():
    spec = importlib.util.spec_from_file_location("build_collection", REPO / "scripts" / "build_collection.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


build = _build_script()


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    return build.assemble(tmp_path_factory.mktemp("collections"))


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by its relative path (through symlinked directories too)."""
    return {
        str(Path(d, f).relative_to(root)): Path(d, f).read_bytes()
        for d, _, names in os.walk(root, followlinks=True)
        for f in names
    }


def ansible_env(collection: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        ANSIBLE_COLLECTIONS_PATH=str(collection.parents[2]),
        ANSIBLE_NOCOLOR="1",
        PATH=f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    return env


# ----------------------------------------------------------------------------- what the collection holds


def test_the_collection_is_the_repository_in_collection_layout(collection):
    assert collection.parts[-3:] == ("ansible_collections", "hostkit", "tuning")
    for src, dest in (("library", "plugins/modules"), ("module_utils", "plugins/module_utils")):
        sources = sorted((REPO / src).glob("*.py"))
        assert sorted(p.name for p in (collection / dest).glob("*.py")) == [p.name for p in sources]
        for p in sources:
            copy = collection / dest / p.name
            assert not copy.is_symlink()  # module_utils links into hostkit/agent/ are shipped as files
            assert copy.read_text() == build.rewrite_imports(p.resolve().read_text()), p
            assert "ansible.module_utils.hostkit_" not in copy.read_text(), p
    for tree in ("roles", "playbooks"):
        assert files_of(collection / tree) == {k: v for k, v in files_of(REPO / tree).items() if "__pycache__" not in k}
    assert (collection / "LICENSE").read_bytes() == (REPO / "LICENSE").read_bytes()


def test_the_checkouts_view_is_the_same_collection(collection):
    """The collection view a checkout's runs give Ansible (symlinks into the checkout) holds the
    same files as the built collection: the same rule (hostkit.paths.COLLECTION_SOURCES) makes
    both; only the built one's module_utils imports and galaxy version are rewritten."""
    view = paths.collection_dir(paths.checkout_collection_view(REPO))
    assert view.parts[-3:] == ("ansible_collections", "hostkit", "tuning")
    seen = {k: v for k, v in files_of(view).items() if "__pycache__" not in k and not k.startswith("tests/output")}
    built = files_of(collection)
    assert sorted(seen) == sorted(built)
    for name, content in built.items():
        if name == "galaxy.yml":
            continue
        if name.startswith(build.PYTHON_DIRS):
            assert build.rewrite_imports(seen[name].decode()).encode() == content, name
        else:
            assert seen[name] == content, name


def _tasks(node):
    """Every task of a play, a task list or a block, nested blocks included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        if "hosts" in node or "import_playbook" in node:  # a play
            for key in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                yield from _tasks(node.get(key) or [])
            return
        yield node
        for key in ("block", "rescue", "always"):
            yield from _tasks(node.get(key) or [])


def test_playbooks_and_roles_call_hostkits_modules_by_fqcn():
    """``hostkit.tuning.<module>``, never the short name: a checkout and the installed collection
    resolve hostkit's modules the same way (ANSIBLE_COLLECTIONS_PATH, no ANSIBLE_LIBRARY)."""
    files = sorted(
        [*REPO.glob("playbooks/*.yml"), *REPO.glob("roles/*/tasks/*.yml"), *REPO.glob("roles/*/handlers/*.yml")]
    )
    fqcn, short = [], []
    for f in files:
        for task in _tasks(yaml.safe_load(f.read_text()) or []):
            for key in task:
                if key in MODULES:
                    short.append(f"{f.relative_to(REPO)}: {key}")
                elif key.startswith("hostkit.tuning."):
                    assert key.removeprefix("hostkit.tuning.") in MODULES, f"{f.relative_to(REPO)}: {key}"
                    fqcn.append(key)
    assert not short, "call hostkit's modules as hostkit.tuning.<name>: " + ", ".join(short)
    assert "hostkit.tuning.hostkit_changes" in fqcn and "hostkit.tuning.hostkit_lock" in fqcn  # the walk finds tasks


# An FQCN: a task's module or action, a role's name, a filter, test or lookup plugin.
FQCN = re.compile(r"^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_.]*$")
INLINE_FQCN = re.compile(
    r"(?:\|\s*|\bis\s+(?:not\s+)?|(?:lookup|query|q)\(\s*['\"])([a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*)"
)
ROLE_INCLUDES = {"include_role", "import_role", "ansible.builtin.include_role", "ansible.builtin.import_role"}


def _fqcns(node, parent=None):
    """Every FQCN a playbook, task file or scenario names (not under ``vars:``, where dotted keys
    are sysctls)."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str) and FQCN.match(key) and parent != "vars":
                yield key
            if key == "name" and parent in ROLE_INCLUDES and isinstance(value, str) and FQCN.match(value):
                yield value
            yield from _fqcns(value, key)
    elif isinstance(node, list):
        for item in node:
            if parent == "roles" and isinstance(item, str) and FQCN.match(item):
                yield item
            yield from _fqcns(item, parent)
    elif isinstance(node, str):
        yield from INLINE_FQCN.findall(node)


def test_galaxy_dependencies_name_every_collection_the_roles_and_playbooks_use():
    """galaxy.yml's ``dependencies`` hold every collection the roles, playbooks and molecule
    scenarios call, but ansible.builtin (ansible-core) and hostkit.tuning itself."""
    galaxy = yaml.safe_load((REPO / paths.COLLECTION_META / "galaxy.yml").read_text())
    files = [p for d in ("roles", "playbooks", "extensions") for p in sorted((REPO / d).rglob("*.yml"))]
    used = {
        ".".join(name.split(".")[:2])
        for f in files
        for doc in yaml.safe_load_all(f.read_text())
        for name in _fqcns(doc)
    }
    assert {"ansible.builtin", "hostkit.tuning"} <= used  # the scan finds what is there
    assert used - {"ansible.builtin", "hostkit.tuning"} <= set(galaxy["dependencies"] or {}), used
    assert isinstance(galaxy["dependencies"], dict) and galaxy["license"] == ["Apache-2.0"]


def test_the_sdist_carries_every_source_of_the_collection():
    """MANIFEST.in names every checkout path the wheel's collection is assembled from (make dist
    builds the wheel from the sdist: a path missing here fails there)."""
    manifest = (REPO / "MANIFEST.in").read_text()
    named = set(re.findall(r"^(?:recursive-include|include)\s+(.*)$", manifest, re.M))
    words = {w for line in named for w in line.split()}
    for source in [*paths.COLLECTION_SOURCES.values(), paths.COLLECTION_META]:
        assert source in words, f"MANIFEST.in: {source} (a source of the collection) is missing"


def test_the_import_rewrite_keeps_names_and_changes_only_hostkit_module_utils():
    src = (
        "from ansible.module_utils.basic import AnsibleModule\n"
        "from ansible.module_utils.hostkit_journal_io import (Journal, JournalError,\n"
        "                                                  file_state)\n"
        "    from ansible.module_utils.hostkit_sysroot import is_live  # noqa: F401\n"
    )
    assert build.rewrite_imports(src) == (
        "from ansible.module_utils.basic import AnsibleModule\n"
        "from ansible_collections.hostkit.tuning.plugins.module_utils.hostkit_journal_io import (\n"
        "    Journal, JournalError, file_state)\n"
        "    from ansible_collections.hostkit.tuning.plugins.module_utils.hostkit_sysroot import is_live  # noqa: F401\n"
    )


def test_the_version_has_one_place_and_everything_follows_it(collection):
    """``hostkit.__version__``: the distribution's (pyproject reads it), ``hostkit --version``'s, the
    assembled collection's and the checkout's galaxy.yml (the collection view links it)."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    project = pyproject["project"]
    assert project["name"] == "hostkit-tuning" and "version" not in project and "version" in project["dynamic"]
    assert pyproject["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "hostkit.__version__"}
    assert re.fullmatch(r"\d+\.\d+\.\d+", hostkit.__version__)
    assert build.version() == hostkit.__version__
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True
    )
    assert (proc.returncode, proc.stdout) == (0, f"hostkit {hostkit.__version__}\n"), proc.stderr
    for galaxy_yml in (collection / "galaxy.yml", REPO / paths.COLLECTION_META / "galaxy.yml"):
        galaxy = yaml.safe_load(galaxy_yml.read_text())
        assert (galaxy["namespace"], galaxy["name"], galaxy["version"]) == ("hostkit", "tuning", hostkit.__version__)


def test_galaxy_license_and_requires_ansible_follow_pyproject(collection):
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    galaxy = yaml.safe_load((collection / "galaxy.yml").read_text())
    assert galaxy["license"] == [project["license"]]
    (floor,) = [
        re.fullmatch(r"ansible-core>=([0-9.]+)", d).group(1)
        for d in project["dependencies"]
        if d.startswith("ansible-core")
    ]
    runtime = yaml.safe_load((collection / "meta" / "runtime.yml").read_text())
    assert runtime["requires_ansible"] == f">={floor}.0"


def test_ansible_galaxy_collection_build_gives_the_same_files(collection, tmp_path):
    tarball = build.galaxy_build(collection, tmp_path / "out")
    with tarfile.open(tarball) as tar:
        built = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    tree = files_of(collection)
    galaxy = yaml.safe_load(tree.pop("galaxy.yml"))  # ansible-galaxy turns it into MANIFEST.json
    info = json.loads(built.pop("MANIFEST.json"))["collection_info"]
    assert {k: info[k] for k in ("namespace", "name", "version", "license")} == {
        k: galaxy[k] for k in ("namespace", "name", "version", "license")
    }
    built.pop("FILES.json")
    assert built == tree


# ----------------------------------------------------------------------------- module documentation


class _Spec(Exception):
    def __init__(self, kwargs):
        super().__init__("argument spec")
        self.kwargs = kwargs


def argument_spec(module: str) -> dict:
    """The argument_spec ``library/<module>.py`` hands AnsibleModule (its main() run up to there)."""
    mod = load_module(module)

    def capture(**kwargs):
        raise _Spec(kwargs)

    real = mod.AnsibleModule
    mod.AnsibleModule = capture
    try:
        mod.main()
    except _Spec as got:
        return got.kwargs
    finally:
        mod.AnsibleModule = real
    raise AssertionError(f"{module}: main() never built an AnsibleModule")


@pytest.fixture(scope="module")
def docs(collection) -> dict[str, dict]:
    """``ansible-doc --json`` of every module, one call."""
    proc = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "module", "--json"] + [f"hostkit.tuning.{m}" for m in MODULES],
        env=ansible_env(collection),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return {name.split(".")[-1]: doc for name, doc in json.loads(proc.stdout).items()}


@pytest.mark.parametrize("module", MODULES)
def test_documented_options_are_the_argument_spec(module, docs):
    kwargs = argument_spec(module)
    spec = kwargs["argument_spec"]
    options = docs[module]["doc"]["options"]
    assert sorted(options) == sorted(spec)
    for name, want in spec.items():
        doc = options[name]
        for key, default in (
            ("type", "raw"),
            ("required", False),
            ("default", None),
            ("choices", None),
            ("elements", None),
        ):
            assert doc.get(key, default) == want.get(key, default), f"{module} {name}: {key}"
        assert doc["description"] and all(isinstance(d, str) for d in doc["description"]), (module, name)
    attributes = docs[module]["doc"]["attributes"]
    # the modules of hostkit.actions run as action plugins (the attribute "action" says so)
    assert set(attributes) == {"check_mode", "diff_mode"} | ({"action"} if module in ARG_SPECS else set()), module
    assert (attributes["check_mode"]["support"] != "none") == bool(kwargs.get("supports_check_mode")), module


@pytest.mark.parametrize("module", MODULES)
def test_examples_return_and_author(module, docs):
    doc = docs[module]
    assert doc["doc"]["author"] and doc["doc"]["short_description"]
    tasks = yaml.safe_load(doc["examples"])
    assert tasks and all(f"hostkit.tuning.{module}" in t for t in tasks), module
    for t in tasks:
        assert set(t[f"hostkit.tuning.{module}"] or {}) <= set(argument_spec(module)["argument_spec"]), t
    assert doc["return"], module


def test_the_reboot_timeout_has_one_default_in_the_cli_and_the_roles():
    """hostkit.ansible.reboot.DEFAULT_TIMEOUT is the CLI's and the api's; the roles keep it in YAML."""
    tune = yaml.safe_load((REPO / "roles/tune/defaults/main.yml").read_text())
    assert tune["hostkit_reboot_timeout"] == REBOOT_TIMEOUT
    specs = yaml.safe_load((REPO / "roles/tune/meta/argument_specs.yml").read_text())["argument_specs"]
    defaults = {
        name: ep["options"]["hostkit_reboot_timeout"].get("default")
        for name, ep in specs.items()
        if "hostkit_reboot_timeout" in ep.get("options", {})
    }
    assert defaults and set(defaults.values()) == {REBOOT_TIMEOUT}, defaults
    isolcpus = yaml.safe_load((REPO / "roles/isolcpus/defaults/main.yml").read_text())
    assert isolcpus["isolcpus_reboot_timeout"] == f"{{{{ hostkit_reboot_timeout | default({REBOOT_TIMEOUT}) | int }}}}"


def test_tolerate_refused_renders_as_one_sentence(collection):
    proc = subprocess.run(
        [str(BIN / "ansible-doc"), "hostkit.tuning.hostkit_values"],
        env=ansible_env(collection),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert (
        "tolerate_refused Report writes the kernel refuses (EIO, EPERM, EINVAL) in `refused' instead of "
        "failing. default: false type: bool" in text
    )


@pytest.mark.parametrize("module", MODULES)
def test_ansible_doc_renders_each_module(module, collection):
    proc = subprocess.run(
        [str(BIN / "ansible-doc"), f"hostkit.tuning.{module}"],
        env=ansible_env(collection),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "[WARNING]" not in proc.stderr, proc.stderr
    assert proc.stdout.startswith(f"> MODULE hostkit.tuning.{module}"), proc.stdout[:200]
    assert "EXAMPLES:" in proc.stdout and "RETURN VALUES:" in proc.stdout


# ----------------------------------------------------------------------------- ansible-test


def test_ansible_test_sanity_is_clean(collection):
    """Every sanity test of ansible-test (pep8, pylint, validate-modules, yamllint, import, ...);
    ignores only in collection/tests/sanity/ignore-*.txt, each with its reason. The first run
    installs ansible-test's pinned tools into ~/.cache/hostkit/ansible-test-home
    (scripts/build_collection.py's SANITY_HOME); later runs, other checkouts too, are offline."""
    proc = build.sanity(collection)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, "\n".join(line for line in out.splitlines() if "ERROR" in line or "FATAL" in line)
    assert "ERROR" not in out
    assert re.search(r'Running sanity test "validate-modules"', out)
    assert re.search(r'Running sanity test "pylint"', out)


# ----------------------------------------------------------------------------- a user's own playbook


@pytest.mark.parametrize("layout", ["collection", "checkout"])
def test_a_users_playbook_runs_a_role_of_the_collection_by_its_fqcn(collection, tmp_path, layout):
    """The role is found by its FQCN and its tasks' module FQCNs (hostkit.tuning.hostkit_file,
    .hostkit_values) resolve: in the built collection with only ANSIBLE_COLLECTIONS_PATH (its
    modules import their module_utils by collection name), in the checkout's view with what
    hostkit's runs give Ansible (hostkit.ansible.settings.runner_env)."""
    sysroot = tmp_path / "host"
    (sysroot / "proc/sys/kernel").mkdir(parents=True)
    (sysroot / "proc/sys/kernel/sched_rt_runtime_us").write_text("950000\n")
    playbook = tmp_path / "site.yml"
    playbook.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Tune",
                    "hosts": "localhost",
                    "connection": "local",
                    "gather_facts": False,
                    "vars": {
                        "hostkit_sysroot": str(sysroot),
                        "hostkit_run_id": "user-run-1",
                        "ansible_python_interpreter": sys.executable,
                    },
                    "roles": [{"role": "hostkit.tuning.rt_runtime", "rt_runtime_us": 900000}],
                }
            ]
        )
    )
    env = ansible_env(collection)
    if layout == "checkout":
        ours = st.runner_env(REPO, str(tmp_path / "cp"), operator=st.OperatorSettings(None))
        env.update({k: ours[k] for k in ("ANSIBLE_COLLECTIONS_PATH", "ANSIBLE_MODULE_UTILS")})
        assert env["ANSIBLE_COLLECTIONS_PATH"].split(os.pathsep)[0] == str(REPO / paths.CHECKOUT_COLLECTIONS)
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", "localhost,", str(playbook)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert (sysroot / "proc/sys/kernel/sched_rt_runtime_us").read_text() == "900000\n"
    assert "kernel.sched_rt_runtime_us = 900000" in (sysroot / "etc/sysctl.d/60-hostkit-rt.conf").read_text()
    journal = json.loads((sysroot / "var/lib/hostkit/journal/user-run-1.json").read_text())
    assert [(e["kind"], e["role"]) for e in journal["entries"]] == [("file", "rt_runtime"), ("values", "rt_runtime")]


# ----------------------------------------------------------------------------- installed from the wheel's face


def test_hostkit_collection_install_makes_ansible_doc_list_every_module_and_role(tmp_path):
    """`hostkit collection install -p PATH` (what a user runs after `pip install hostkit-tuning`),
    called as a CI job may call it, with a non-blocking stdin (ansible-galaxy refuses one: hostkit
    gives it /dev/null): then ansible-doc lists every module of library/ and the tune role's entry
    points, by FQCN. (tests/lab/test_wheel.py runs it from the wheel with stdin closed too.)"""
    read, write = os.pipe()
    os.set_blocking(read, False)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "hostkit.cli", "collection", "install", "-p", str(tmp_path), "--json"],
            stdin=read,
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        os.close(read)
        os.close(write)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["collection"] == "hostkit.tuning" and doc["path"] == str(paths.collection_dir(tmp_path))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(tmp_path), ANSIBLE_NOCOLOR="1")
    listed = subprocess.run(
        [str(BIN / "ansible-doc"), "-l", "hostkit.tuning"], env=env, capture_output=True, text=True, timeout=120
    )
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()) == sorted(
        f"hostkit.tuning.{m}" for m in MODULES
    ), listed.stdout + listed.stderr
    role = subprocess.run(
        [str(BIN / "ansible-doc"), "-t", "role", "hostkit.tuning.tune"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert (
        role.returncode == 0 and "hostkit_smoke_duration" in role.stdout and "ENTRY POINT: *rollout" not in role.stdout
    )
    for entry in ("main", "plan", "baseline", "apply", "gate", "revert"):
        assert f"ENTRY POINT: *{entry}*" in role.stdout, entry


def test_hostkit_collection_install_refuses_a_file_as_the_path(tmp_path):
    (tmp_path / "f").write_text("")
    proc = subprocess.run(
        [sys.executable, "-m", "hostkit.cli", "collection", "install", "-p", str(tmp_path / "f")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stderr.strip().endswith("not a directory"), proc.stderr


def requirement_names(path: Path) -> list[str]:
    """The distributions a pip requirements file names."""
    lines = [line.split("#")[0].strip() for line in path.read_text().splitlines()]
    return [Requirement(line).name for line in lines if line]


def ee_context(definition: Path, context: Path) -> subprocess.CompletedProcess:
    """`ansible-builder create` of an execution environment definition (no container engine needed)."""
    return subprocess.run(
        [str(BIN / "ansible-builder"), "create", "-f", str(definition), "--context", str(context)]
        + ["--output-filename", "Containerfile"],
        cwd=definition.parent,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_execution_environment_names_hostkit_tuning_and_takes_the_checkouts_wheel(tmp_path):
    """ee/requirements.txt and execution-environment.yml name the distribution hostkit-tuning (the
    index's `hostkit` is another project); the build context takes dist/'s wheel, pip finds it there
    and the final stage installs it; its Galaxy requirements are the playbooks' collections, and its
    last step installs hostkit.tuning from the package and lists its modules.
    (tests/lab/test_wheel.py makes the context with a wheel `make dist` built and resolves it.)"""
    assert requirement_names(REPO / "ee" / "requirements.txt") == ["hostkit-tuning"]
    ee = yaml.safe_load((REPO / "execution-environment.yml").read_text())
    assert ee["dependencies"]["python"] == "ee/requirements.txt"
    assert ee["additional_build_files"] == [{"src": "dist/hostkit_tuning-*.whl", "dest": "wheels"}]
    steps = ee["additional_build_steps"]
    assert "COPY _build/wheels/ /output/hostkit-wheels/" in steps["prepend_builder"]
    for stage in ("prepend_builder", "prepend_final"):
        assert "ARG PIP_FIND_LINKS=/output/hostkit-wheels" in steps[stage], stage

    proc = ee_context(REPO / "execution-environment.yml", tmp_path / "ctx")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    build = tmp_path / "ctx" / "_build"
    assert requirement_names(build / "requirements.txt") == ["hostkit-tuning"]
    assert [c["name"] for c in yaml.safe_load((build / "requirements.yml").read_text())["collections"]] == [
        "kubernetes.core"
    ]
    # dist/'s wheels, if `make dist` ran in this checkout (none: the COPY fails, no image is built)
    assert sorted(p.name for p in (build / "wheels").glob("*")) == sorted(
        p.name for p in (REPO / "dist").glob("hostkit_tuning-*.whl")
    )
    containerfile = (tmp_path / "ctx" / "Containerfile").read_text()
    # ansible-builder 3.1 (the floor) writes "FROM base as final", 3.2 "FROM base AS final"
    final = containerfile[containerfile.lower().index("from base as final") :]
    assert "ARG PIP_FIND_LINKS=/output/hostkit-wheels" in final
    assert final.index("COPY --from=builder /output/ /output/") < final.index("install-from-bindep")
    install = final.index("--no-deps --force-reinstall /output/hostkit-wheels/hostkit_tuning-*.whl")
    last = final.index(
        "RUN hostkit collection install -p /usr/share/ansible/collections && ansible-doc -l hostkit.tuning"
    )
    assert final.index("install-from-bindep") < install < last < final.index("RUN rm -rf /output")
