"""The container image agrees with the code: the Dockerfile copies every package the components
and annexctl import and nothing of the simulator or the demo, pyproject.toml declares what each
package imports in the group its installation gets (the image gets the runtime dependencies and
the `cli` and `tracing` extras), requirements/image.txt pins all of those with hashes, and the
labels carry the version and the commit the components report."""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = frozenset(path.parent.name for path in ROOT.glob("*/__init__.py")) - {"tests"}
# What runs in the image: the components and annexctl (the charts' hooks run it).
IMAGE_COMMANDS = ("home_agent", "home_controller", "remote_enforcer", "annexctl")
# The dependency groups whose installation each package needs, beyond the runtime dependencies.
EXTRAS_OF = {"annex": ("tracing",), "annexctl": ("cli",), "kubesim": ("sim",),
             "annex_demo": ("demo",), "bench": ("bench",)}
REGENERATE_LOCK = "run the pip-compile command at the top of requirements/image.txt"


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


IMPORT_LINE = re.compile(r"^[ \t]*(?:import|from)[ \t]")


def uncommented(line: str) -> str:
    return line.partition("#")[0].strip()  # an import statement holds no "#" but in a comment


def import_statements(source: str) -> Iterator[ast.stmt]:
    """The import statements of a module, parsed alone (parsing whole modules costs seconds
    over the repository): each line starting with import/from, with its parenthesised or
    backslash-continued rest; a prose line that only looks like one does not parse."""
    lines = source.splitlines()
    for number, line in enumerate(lines):
        if not IMPORT_LINE.match(line):
            continue
        statement = uncommented(line)
        rest = iter(lines[number + 1:])
        while statement.endswith("\\") or statement.count("(") > statement.count(")"):
            statement = statement.rstrip("\\") + " " + uncommented(next(rest, ")"))
        try:
            yield from ast.parse(statement).body
        except SyntaxError:
            continue


@functools.cache
def imported_names(package: str) -> frozenset[str]:
    """The modules (and names from them) the package's modules import, dotted in full."""
    names: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in import_statements(path.read_text()):
            if isinstance(node, ast.Import):
                names.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return frozenset(names)


def imported_modules(package: str) -> frozenset[str]:
    """The top-level names the package's modules import (absolute imports)."""
    return frozenset(name.split(".")[0] for name in imported_names(package))


def project_closure(packages: Iterable[str]) -> set[str]:
    """The project's packages these import, directly or through each other."""
    found: set[str] = set()
    pending = list(packages)
    while pending:
        package = pending.pop()
        if package not in found:
            found.add(package)
            pending.extend(imported_modules(package) & PACKAGES)
    return found


def requirements(*extras: str) -> list[Requirement]:
    """The runtime dependencies and these extras, self-references (kube-annex[cli]) expanded."""
    found = [Requirement(text) for text in PYPROJECT["project"]["dependencies"]]
    for extra in extras:
        for requirement in map(Requirement, PYPROJECT["project"]["optional-dependencies"][extra]):
            if normalized(requirement.name) == normalized(PYPROJECT["project"]["name"]):
                found += requirements(*requirement.extras)
            else:
                found.append(requirement)
    return found


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuations joined and comments dropped."""
    lines = [line for line in (ROOT / "Dockerfile").read_text().splitlines()
             if not line.lstrip().startswith("#")]
    joined = re.sub(r"\\\n", " ", "\n".join(lines))
    return [(match[1].upper(), match[2].strip())
            for match in re.finditer(r"^\s*([A-Za-z]+)\s+(.*)$", joined, re.MULTILINE)]


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    start = max(i for i, (name, _) in enumerate(instructions) if name == "FROM")
    return instructions[start:]


def locked() -> dict[str, tuple[str, list[str]]]:
    """requirements/image.txt: distribution → (pinned version, its hashes)."""
    text = re.sub(r"\\\n", " ", (ROOT / "requirements" / "image.txt").read_text())
    pins: dict[str, tuple[str, list[str]]] = {}
    for line in text.splitlines():
        match = re.match(r"^([A-Za-z0-9._-]+)==(\S+)(.*)$", line)
        if match:
            pins[normalized(match[1])] = (match[2], re.findall(r"--hash=(sha256:\w+)", match[3]))
    return pins


def test_the_image_copies_the_packages_its_commands_import_and_no_other() -> None:
    copied = {args.split()[0] for name, args in dockerfile_instructions()
              if name == "COPY" and not args.startswith("--from")} & PACKAGES
    needed = project_closure(IMAGE_COMMANDS)
    assert copied == needed, f"the Dockerfile copies {sorted(copied)}; the image needs " \
                             f"{sorted(needed)}"
    assert not {"kubesim", "annex_demo"} & needed


def removed_paths() -> set[str]:
    return {word for name, args in dockerfile_instructions() if name == "RUN"
            for command in args.split("&&") if command.split()[:1] == ["rm"]
            for word in command.split()[1:] if word.startswith("/")}


def test_the_image_drops_the_scripts_of_the_packages_it_leaves_out() -> None:
    needed = project_closure(IMAGE_COMMANDS)
    left_out = {f"/opt/annex/bin/{script}" for script, target in
                PYPROJECT["project"]["scripts"].items() if target.split(".")[0] not in needed}
    assert left_out and left_out <= removed_paths(), \
        f"remove {sorted(left_out - removed_paths())} in the build"


def test_the_third_party_modules_the_build_deletes_are_not_imported() -> None:
    site_packages = "/opt/annex/lib/python3.11/site-packages/"
    pruned = {path.removeprefix(site_packages).replace("/", ".")
              for path in removed_paths() if path.startswith(site_packages)}
    for package in project_closure(IMAGE_COMMANDS):
        for name in imported_names(package):
            assert not any(name == module or name.startswith(f"{module}.")
                           for module in pruned), f"{package} imports {name}"


def test_each_package_declares_what_it_imports_in_the_group_it_is_installed_with() -> None:
    distributions = importlib.metadata.packages_distributions()
    everything = tuple(PYPROJECT["project"]["optional-dependencies"])
    scripts = {path.stem for path in (ROOT / "scripts").glob("*.py")}
    # the tests and scripts run where `pip install -e ".[test]"` (and [bench]) installed
    groups = {**{package: EXTRAS_OF.get(package, ()) for package in PACKAGES},
              "tests": everything, "scripts": everything}
    problems = []
    for package, extras in sorted(groups.items()):
        declared = {normalized(r.name) for r in requirements(*extras)}
        third_party = (imported_modules(package) - PACKAGES - scripts
                       - {"tests", "conftest"} - set(sys.stdlib_module_names))
        for module in sorted(third_party):
            names = {normalized(name) for name in distributions.get(module, [])}
            if not names & declared:
                found = ", ".join(sorted(names)) or "not installed"
                problems.append(f"{package} imports {module} ({found}), not declared for it in "
                                f"pyproject.toml")
    assert not problems, "\n".join(problems)


def test_the_lock_pins_every_dependency_of_the_image_with_hashes() -> None:
    pins = locked()
    assert all(hashes for _, hashes in pins.values()), "every pin needs --hash"
    for requirement in requirements("cli", "tracing"):
        name = normalized(requirement.name)
        assert name in pins, f"{requirement} is not in requirements/image.txt: {REGENERATE_LOCK}"
        assert requirement.specifier.contains(pins[name][0], prereleases=True), \
            f"requirements/image.txt pins {name}=={pins[name][0]}, pyproject.toml asks for " \
            f"{requirement}: {REGENERATE_LOCK}"


def test_the_image_installs_from_the_lock_with_hashes() -> None:
    runs = [args for name, args in dockerfile_instructions() if name == "RUN"]
    assert any(re.search(r"pip install --require-hashes .*-r requirements/image\.txt", run)
               for run in runs)
    # the project itself goes in without its dependencies: only the lock's
    assert any(re.search(r"pip install --no-deps /wheels/", run) for run in runs)


def test_the_labels_name_the_version_and_the_commit_the_components_report() -> None:
    stage = final_stage()
    args = dict(a.partition("=")[::2] for n, a in stage if n == "ARG")
    labels = dict(re.findall(r'(org\.opencontainers\.image\.\w+)="([^"]*)"',
                             " ".join(a for n, a in stage if n == "LABEL")))
    env = " ".join(a for n, a in stage if n == "ENV")
    assert args["ANNEX_VERSION"] == PYPROJECT["project"]["version"]
    assert labels["org.opencontainers.image.version"] == "${ANNEX_VERSION}"
    assert labels["org.opencontainers.image.revision"] == "${ANNEX_GIT_COMMIT}"
    assert labels["org.opencontainers.image.licenses"] == PYPROJECT["project"]["license"]["text"]
    assert labels["org.opencontainers.image.source"].startswith("https://")
    assert labels["org.opencontainers.image.title"] == PYPROJECT["project"]["name"]
    # annex.kube.user_agent reads it: the commit the components name themselves with
    assert "ANNEX_GIT_COMMIT=${ANNEX_GIT_COMMIT}" in env
    assert "ANNEX_GIT_COMMIT" in (ROOT / "annex" / "kube.py").read_text()


def test_the_build_context_keeps_what_the_dockerfile_copies() -> None:
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text()
               .splitlines() if line.strip() and not line.startswith("#")}
    copied = {source for name, args in dockerfile_instructions()
              if name == "COPY" and not args.startswith("--from")
              for source in args.split()[:-1]}
    assert copied and not copied & ignored, f".dockerignore drops {sorted(copied & ignored)}"


def test_the_locks_fit_the_image_python_and_the_build_system() -> None:
    lock = (ROOT / "requirements" / "image.txt").read_text()
    compiled_for = re.search(r"autogenerated by pip-compile with Python (\d+\.\d+)", lock)
    assert compiled_for, "requirements/image.txt names the Python it was compiled for"
    site_packages = {f"python{compiled_for[1]}/site-packages"}
    assert site_packages <= set(re.findall(r"python\d+\.\d+/site-packages",
                                           (ROOT / "Dockerfile").read_text())), \
        "the image's Python (distroless Debian 12: 3.11) is not the lock's"
    build = (ROOT / "requirements" / "build.txt").read_text()
    for text in PYPROJECT["build-system"]["requires"]:
        requirement = Requirement(text)
        pinned = re.search(rf"^{re.escape(requirement.name)}==(\S+) \\", build, re.MULTILINE)
        assert pinned and requirement.specifier.contains(pinned[1]), \
            f"requirements/build.txt does not pin {requirement}"
