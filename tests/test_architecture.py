"""The house reads top to bottom: every import of the project's code runs one way.

Between apps: ``core`` < ``users`` < ``social`` < ``feed`` < ``datatools``
(and ``config``, the wiring, above all). Inside the project, by module role:
views/api/admin/urls/commands/apps -> tasks -> services, outbox, receivers
-> mechanisms -> policy and selectors -> primitives (models, keys, signals,
errors, the Redis client, paging, parsing). A module may import its own
layer or a lower one, in its own app or a lower one. The only circles left
are the Celery-normal outbox <-> tasks pairs (the outbox schedules the task,
the task calls the outbox), which import each other inside a function.

The check reads the source with ``ast`` (imports inside functions count
too), so it needs no Django set-up.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
APPS = ["core", "users", "social", "notifications", "feed", "datatools", "client_api", "config"]
APP_RANK = {app: rank for rank, app in enumerate(APPS)}

PRIMITIVES, POLICY, MECHANISM, SERVICE, TASK, EDGE = range(6)
LAYER_OF = {
    # primitives
    "models": PRIMITIVES, "redis_keys": PRIMITIVES, "signals": PRIMITIVES, "exit_codes": PRIMITIVES,
    "errors": PRIMITIVES, "serializers": PRIMITIVES, "redis": PRIMITIVES, "paging": PRIMITIVES,
    "parsing": PRIMITIVES, "celery": PRIMITIVES, "cluster": PRIMITIVES, "replica": PRIMITIVES, "routers": PRIMITIVES,
    "transactions": PRIMITIVES, "metrics": PRIMITIVES,
    # pure policy and reads
    "layout": POLICY, "selectors": POLICY, "admin_tools": POLICY, "formatting": POLICY, "forms": POLICY,
    "http": POLICY, "scopes": POLICY, "timeline": POLICY, "limits": POLICY, "visibility": POLICY, "derived": POLICY,
    # mechanisms
    "mirror": MECHANISM, "rebuild": MECHANISM, "reconcile": MECHANISM, "sharding": MECHANISM,
    "delivery": MECHANISM, "edges": MECHANISM, "health": MECHANISM, "embedded": MECHANISM,
    "importer": MECHANISM, "celebrity": MECHANISM, "simulate": MECHANISM, "datasets": MECHANISM,
    "cache": MECHANISM, "runs": MECHANISM, "control_mirror": MECHANISM, "sender": MECHANISM, "validators": MECHANISM,
    # writes and their side effects
    "services": SERVICE, "outbox": SERVICE, "receivers": SERVICE, "controls": SERVICE, "transfer": SERVICE, "suggestions": SERVICE,
    "tasks": TASK,
    # the edge
    "views": EDGE, "context_processors": EDGE, "arguments": EDGE, "api": EDGE, "admin": EDGE, "urls": EDGE, "api_urls": EDGE, "apps": EDGE, "oauth": EDGE,
    "monitoring": EDGE,
}
# Celery needs these: the outbox schedules the task by object, the task calls the outbox.
ALLOWED_UPWARD = {("core.outbox", "core.tasks")}


def project_modules() -> dict[str, Path]:
    """``{dotted name: path}`` of every project module (migrations left out: Django generates them)."""
    found: dict[str, Path] = {}
    for app in APPS:
        for path in sorted((ROOT / app).rglob("*.py")):
            if "migrations" in path.parts or path.name == "__init__.py":
                continue
            found[".".join(path.relative_to(ROOT).with_suffix("").parts)] = path
    return found


def layer(module: str) -> int:
    """The layer of a dotted module name; config and management commands are the edge."""
    parts = module.split(".")
    if parts[0] == "config" or "commands" in parts:
        return EDGE
    return LAYER_OF[parts[-1]]


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules ``module`` imports, resolving ``from . import x`` and ``from .x import y``."""
    package = module.rsplit(".", 1)[0]
    tree = ast.parse(path.read_text(), filename=str(path))
    targets: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
        for name in names:
            if name in known:
                targets.add(name)
    targets.discard(module)
    return targets


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    known = set(modules)
    return {module: imports_of(module, path, known) for module, path in modules.items()}


class TestImportDirection:
    def test_every_module_has_a_known_layer(self) -> None:
        unknown = []
        for module in project_modules():
            try:
                layer(module)
            except KeyError:
                unknown.append(module)

        assert unknown == []  # give a new module's role a layer in LAYER_OF

    def test_no_import_runs_against_the_direction(self) -> None:
        wrong = []
        for module, targets in import_graph().items():
            for target in targets:
                if (module, target) in ALLOWED_UPWARD:
                    continue
                app, target_app = module.split(".")[0], target.split(".")[0]
                if APP_RANK[target_app] > APP_RANK[app]:
                    wrong.append(f"{module} -> {target} (app {app} is below {target_app})")
                elif layer(target) > layer(module):
                    wrong.append(f"{module} -> {target} (layer {layer(module)} imports layer {layer(target)})")

        assert sorted(wrong) == []

    def test_no_import_cycle_but_the_outbox_and_task_pairs(self) -> None:
        graph = import_graph()
        for module, target in ALLOWED_UPWARD:
            graph[module].discard(target)
        cycles = [sorted(component) for component in strongly_connected(graph) if len(component) > 1]

        assert cycles == []

    def test_the_allowed_pairs_are_real(self) -> None:
        # The exceptions must not outlive the code that needed them.
        graph = import_graph()

        assert all(target in graph[module] for module, target in ALLOWED_UPWARD)

    @pytest.mark.parametrize(
        ("module", "target", "expected"),
        [
            ("feed.services", "social.models", True),
            ("social.models", "feed.models", False),  # a lower app importing a higher one
            ("social.mirror", "social.tasks", False),  # a mechanism scheduling a task
            ("social.selectors", "social.mirror", False),  # a read importing a writer
            ("core.outbox", "core.tasks", True),
        ],
    )
    def test_the_rule_itself(self, module: str, target: str, expected: bool) -> None:
        app, target_app = module.split(".", maxsplit=1)[0], target.split(".", maxsplit=1)[0]
        allowed = (module, target) in ALLOWED_UPWARD or (
            APP_RANK[target_app] <= APP_RANK[app] and layer(target) <= layer(module)
        )

        assert allowed is expected


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of ``graph`` (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    edges = defaultdict(set, graph)
    for root in list(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components
