"""`fast_init`: a quicker `__init__` for frozen, slotted dataclasses built by the hundred thousand.

A frozen dataclass's generated `__init__` stores each field with `object.__setattr__(self,
name, value)`, which looks the attribute up again on every call; a policy of 10,000 rules builds
half a million syntax nodes and decisions that way.  `fast_init` replaces that `__init__` with
one that calls each slot's descriptor directly: same parameters, same defaults, same object
(still frozen: assignment after construction raises as before), about half the time.
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

__all__ = ["fast_init"]

T = TypeVar("T")


def fast_init(cls: type[T]) -> type[T]:
    """Class decorator, applied above `@dataclass(frozen=True, slots=True)`."""
    params = getattr(cls, "__dataclass_params__", None)
    if params is None or not params.frozen or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init: {cls.__name__} is not a frozen dataclass with slots")
    if getattr(cls, "__post_init__", None) is not None:
        raise TypeError(f"fast_init: {cls.__name__} has a __post_init__")
    namespace: dict[str, Any] = {}
    args: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]  # checked dataclass above
        if f.default_factory is not dataclasses.MISSING or f.kw_only:
            raise TypeError(f"fast_init: {cls.__name__}.{f.name} has a default factory or is "
                            "keyword-only")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
        if not f.init:
            if f.default is dataclasses.MISSING:
                raise TypeError(f"fast_init: {cls.__name__}.{f.name} has no value")
            body.append(f"    _set_{f.name}(self, _default_{f.name})")
            continue
        has_default = f.default is not dataclasses.MISSING
        args.append(f"{f.name}=_default_{f.name}" if has_default else f.name)
        body.append(f"    _set_{f.name}(self, {f.name})")
    source = f"def __init__(self, {', '.join(args)}):\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(source, namespace)  # generated from the field names, as dataclasses does itself
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[method-assign]  # replacing __init__ is this decorator's job
    return cls
