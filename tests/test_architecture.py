"""The house reads top to bottom: every import of the project's code runs one way.

Between apps: ``core`` < ``users`` < ``social`` < ``notifications`` < ``feed``
< ``datatools`` < ``client_api`` (and ``config``, the wiring, above all). Inside the project, by what a
module does (``LAYERS``, lowest first): the entry points (views, API,
admin, urls, commands, apps) -> tasks -> writes (services, outbox,
receivers) -> mirror upkeep (mirrors, rebuilds, reconciles, fan-out
delivery, imports) -> reads (selectors, visibility, limits, forms; the home
timeline's page reader, the note cache its reads fill and the database
fallback) -> foundations (models, keys, signals, errors, the Redis and
database plumbing, parsing, paging order and positions). A module may
import its own layer or a lower one, in its own app or a lower one
(``allowed``, the one rule every test here calls). The only cycle left
is the Celery-normal ``core.outbox`` <-> ``core.tasks`` pair (the outbox
schedules the task, the task calls the outbox), which import each other
inside a function.

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

# The layers, lowest first: each named for what its modules do, with the roles (a module's
# last name: ``feed.note_cache`` is a "note_cache") that belong to it.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "foundations: models, keys, signals, errors, the Redis and database plumbing, parsing, paging order",
        {
            "models",
            "redis_keys",
            "signals",
            "exit_codes",
            "errors",
            "serializers",
            "redis",
            "paging",
            "parsing",
            "celery",
            "cluster",
            "replica",
            "routers",
            "transactions",
            "metrics",
            "connections",
            "responses",
            "sql",
        },
    ),
    (
        "reads: what pages read (Redis or the database) and the rules they apply, and the caches their reads fill",
        {
            "layout",
            "selectors",
            "admin_tools",
            "formatting",
            "rows",
            "jinja2",
            "forms",
            "http",
            "scopes",
            "limits",
            "visibility",
            "derived",
            "page_reader",
            "note_cache",
            "account_cache",
            "account_rows",
            "fallback",
            "backends",
        },
    ),
    (
        "mirror upkeep: keeping Redis and the data in step (mirrors, rebuilds, reconciles, delivery, imports, servers)",
        {
            "mirror",
            "rebuild",
            "reconcile",
            "note_counts",
            "sharding",
            "delivery",
            "streaming",
            "edges",
            "health",
            "embedded",
            "importer",
            "celebrity",
            "simulate",
            "datasets",
            "cache",
            "sessions",
            "runs",
            "control_mirror",
            "sender",
            "validators",
        },
    ),
    ("writes: a change and its side effects", {"services", "outbox", "receivers", "controls", "transfer", "suggestions"}),
    ("tasks: Celery's thin wrappers", {"tasks"}),
    (
        "entry points: views, the API, the admin, urls, commands, app set-up, monitoring endpoints",
        {
            "views",
            "streams",
            "context_processors",
            "arguments",
            "api",
            "admin",
            "urls",
            "api_urls",
            "apps",
            "oauth",
            "monitoring",
        },
    ),
]
LAYER_OF = {role: rank for rank, (_, roles) in enumerate(LAYERS) for role in roles}
ENTRY_POINTS = len(LAYERS) - 1
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
    """The layer (rank in ``LAYERS``) of a dotted module name; config and management commands are entry points.

    :raises KeyError: its role is in no layer.
    """
    parts = module.split(".")
    if parts[0] == "config" or "commands" in parts:
        return ENTRY_POINTS
    return LAYER_OF[parts[-1]]


def layer_name(module: str) -> str:
    """What the modules of ``module``'s layer do (the first words of its ``LAYERS`` entry)."""
    return LAYERS[layer(module)][0].split(":")[0]


def allowed(module: str, target: str) -> bool:
    """The rule: ``module`` may import ``target`` when ``target``'s app is ``module``'s or a lower one
    and its layer is ``module``'s or a lower one, or when the pair is one of ``ALLOWED_UPWARD``."""
    if (module, target) in ALLOWED_UPWARD:
        return True
    return APP_RANK[target.split(".", maxsplit=1)[0]] <= APP_RANK[module.split(".", maxsplit=1)[0]] and layer(target) <= layer(
        module
    )


def why_not(module: str, target: str) -> str:
    """Why ``allowed(module, target)`` is False, for the failure message."""
    app, target_app = module.split(".", maxsplit=1)[0], target.split(".", maxsplit=1)[0]
    if APP_RANK[target_app] > APP_RANK[app]:
        return f"app {app} is below {target_app}"
    return f"{layer_name(module)} imports {layer_name(target)}"


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

        assert unknown == []  # give a new module's role a layer in LAYERS

    def test_every_role_is_in_one_layer(self) -> None:
        roles = [role for _, layer_roles in LAYERS for role in layer_roles]

        assert sorted(role for role in set(roles) if roles.count(role) > 1) == []

    def test_no_import_runs_against_the_direction(self) -> None:
        wrong = [
            f"{module} -> {target} ({why_not(module, target)})"
            for module, targets in import_graph().items()
            for target in targets
            if not allowed(module, target)
        ]

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
            ("feed.services", "users.models", True),
            ("feed.selectors", "feed.page_reader", True),  # a read using the timeline's reader
            ("feed.page_reader", "feed.note_cache", True),
            ("feed.rebuild", "feed.fallback", True),  # a rebuild reading the database as pages do
            ("core.outbox", "core.tasks", True),  # the one pair allowed upward
            ("social.models", "feed.models", False),  # a lower app importing a higher one
            ("social.mirror", "social.tasks", False),  # mirror upkeep scheduling a task
            ("social.selectors", "social.mirror", False),  # a read importing a writer
            ("feed.paging", "feed.note_cache", False),  # the paging order importing a cache that talks to Redis
            ("feed.note_cache", "feed.outbox", False),  # a cache the reads fill importing a write's side effects
        ],
    )
    def test_the_rule_itself(self, module: str, target: str, expected: bool) -> None:
        # Real modules, and the code agrees with the example: an allowed import is made, a forbidden one is not.
        graph = import_graph()

        assert module in graph and target in graph
        assert allowed(module, target) is expected
        assert (target in graph[module]) is expected


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
