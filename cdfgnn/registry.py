"""Named plug-in registries (datasets, partitioners, methods, models).

Adding a technique is one module that calls ``REGISTRY.register(name)`` plus one
config entry; unknown names fail with the list of valid ones.
"""
from __future__ import annotations

from typing import Callable, Generic, Iterator, TypeVar

from cdfgnn.errors import CdfgnnError

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str) -> Callable[[T], T]:
        def deco(obj: T) -> T:
            if name in self._items:
                raise RuntimeError(f"{self.kind} {name!r} registered twice")
            self._items[name] = obj
            return obj

        return deco

    def get(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            valid = ", ".join(sorted(self._items))
            raise CdfgnnError(f"unknown {self.kind} {name!r}; valid: {valid}") from None

    def names(self) -> list[str]:
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())
