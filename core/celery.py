"""A typed face for Celery's ``shared_task`` (Celery ships no type information): ``@task(...)`` makes
a task as ``shared_task`` does, typed as callable like the function with ``delay``,
``apply_async`` and ``apply``, so scheduling it checks its keyword arguments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, ParamSpec, Protocol, TypeVar, cast

from celery import shared_task

P = ParamSpec("P")
R_co = TypeVar("R_co", covariant=True)


class Task(Protocol, Generic[P, R_co]):
    """What a Celery task offers: a call runs it here, ``delay`` sends it to the broker."""

    name: str

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R_co: ...

    def delay(self, *args: P.args, **kwargs: P.kwargs) -> Any: ...

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any: ...

    def apply(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any: ...


def task(**options: Any) -> Callable[[Callable[P, R_co]], Task[P, R_co]]:
    """``shared_task(**options)``, typed."""

    def decorate(function: Callable[P, R_co]) -> Task[P, R_co]:
        return cast(Task[P, R_co], shared_task(**options)(function))

    return decorate
