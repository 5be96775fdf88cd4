"""The one way a process of Overseer connects to Temporal (the API and the worker alike)."""

from __future__ import annotations

import dataclasses
import typing
import weakref
from typing import Any

import temporalio.converter
from temporalio.client import Client
from temporalio.converter import (
    CompositePayloadConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
    JSONTypeConverter,
    value_to_type,
)

from observability.tracing import temporal_tracing_plugin
from overseer.settings import Settings


async def connect_client(settings: Settings, runtime: Any = None) -> Client:
    """A Temporal client for the configured address and namespace, with tracing.

    Args:
        settings: address (``temporal_address``, else the embedded dev server's
            ``127.0.0.1:<temporal_port>``) and namespace.
        runtime: a ``temporalio.runtime.Runtime`` (e.g. one whose SDK metrics feed
            ``/metrics``, from :func:`observability.metrics_temporal.temporal_runtime`); default: the SDK's.

    Raises:
        RuntimeError: Temporal could not be reached (the SDK's connection error).
    """
    address = settings.temporal_address or f"127.0.0.1:{settings.temporal_port}"
    return await Client.connect(address, namespace=settings.temporal_namespace,
                                plugins=[temporal_tracing_plugin()], runtime=runtime,
                                data_converter=DATA_CONVERTER)


_FIELDS: weakref.WeakKeyDictionary[type, list[tuple[str, Any]] | None] = \
    weakref.WeakKeyDictionary()
"""A dataclass's ``(name, type)`` per field (None: it has an ``init=False`` field), for every
:class:`DataclassFields`: the SDK makes a payload converter per workflow and per activity."""


class DataclassFields(JSONTypeConverter):
    """Decodes a dataclass as the SDK's JSON converter does, its field types read once per class.

    The SDK calls ``typing.get_type_hints`` on every dataclass it decodes, which evaluates
    each string annotation again (``from __future__ import annotations``): ~0.2–0.5 ms for
    a segment's call or result, about 3 % of the worker's CPU per run under load
    (docs/performance-history.md). The result is the same object the SDK makes: known
    fields converted with :func:`temporalio.converter.value_to_type`, unknown keys ignored,
    a missing required field a ``TypeError``. A dataclass with an ``init=False`` field is
    left to the SDK.
    """

    def __init__(self) -> None:
        self._converters: list[JSONTypeConverter] = [self]

    def to_typed_value(self, hint: type, value: Any) -> Any:
        """``hint(**converted fields)`` for a dataclass ``hint`` and a ``dict``, else unhandled.

        Raises:
            TypeError: a field's value does not convert, or a required one is missing.
        """
        if not (isinstance(hint, type) and dataclasses.is_dataclass(hint)
                and isinstance(value, dict)):
            return JSONTypeConverter.Unhandled
        fields = _FIELDS.get(hint, dataclasses.MISSING)
        if fields is dataclasses.MISSING:
            every = dataclasses.fields(hint)
            hints = typing.get_type_hints(hint)
            fields = [(f.name, hints[f.name]) for f in every] if all(f.init for f in every) \
                else None
            _FIELDS[hint] = fields
        if fields is None:
            return JSONTypeConverter.Unhandled
        given: dict[str, Any] = {}
        for name, field_hint in fields:
            if name in value:
                try:
                    given[name] = value_to_type(field_hint, value[name], self._converters)
                except Exception as err:
                    raise TypeError(f"Failed converting field {name} on dataclass {hint}") \
                        from err
        return hint(**given)


class PayloadConverter(CompositePayloadConverter):
    """The SDK's default payload converter, its JSON decoding with :class:`DataclassFields`.

    The same payloads on the wire: a process with the SDK's default converter reads and
    writes them alike.
    """

    def __init__(self) -> None:
        json = JSONPlainPayloadConverter(custom_type_converters=[DataclassFields()])
        super().__init__(*(json if isinstance(c, JSONPlainPayloadConverter) else c
                           for c in DefaultPayloadConverter.default_encoding_payload_converters))


DATA_CONVERTER = dataclasses.replace(temporalio.converter.default(),
                                     payload_converter_class=PayloadConverter)
"""Every Overseer client's (and so worker's) data converter: :class:`PayloadConverter`."""
