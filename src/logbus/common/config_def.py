"""Typed configuration definitions, parsed from strings the way Kafka parses them.

The shape of Kafka's `org.apache.kafka.common.config.ConfigDef`: a `ConfigDef` holds one
`ConfigKey` per setting (type, default, validator, importance, doc, dynamic update mode);
`ConfigDef.parse` turns a `name -> str` mapping into typed values and raises `ConfigError`
naming the setting when a name is unknown or a value is invalid. `render_value` turns a
typed value back into the string Kafka shows in DescribeConfigs. Pure code: no I/O.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Final, NamedTuple, Protocol, overload

__all__ = [
    "NO_DEFAULT",
    "Check",
    "ConfigDef",
    "ConfigEntry",
    "ConfigError",
    "ConfigKey",
    "ConfigSource",
    "ConfigSynonym",
    "ConfigType",
    "ConfigValue",
    "Importance",
    "ListOf",
    "OneOf",
    "Password",
    "Range",
    "UpdateMode",
    "Validator",
    "parse_value",
    "render_value",
]


class _Missing(enum.Enum):
    TOKEN = 0


_NO_VALUE: Final = _Missing.TOKEN


class ConfigError(ValueError):
    """A setting is unknown, missing or has an invalid value: the one configuration error
    of the broker, the client, the CLI and the Spark source.

    `ConfigError(name, message[, value])` words it as Kafka's `ConfigException` does
    ("Invalid value abc for configuration num.partitions: Not a number of type INT"); the
    broker's definitions and the TLS settings use this form. `ConfigError(text)` keeps a
    message already written for a reader ("unknown producer config 'lingr.ms'; did you
    mean 'linger.ms'?"), the form of the client's settings. `name` is the setting ("" when
    the text names it itself) and `message` the complaint.
    """

    value: object

    @overload
    def __init__(self, text: str, /) -> None: ...

    @overload
    def __init__(self, name: str, message: str, value: object = ..., /) -> None: ...

    def __init__(self, *args: object) -> None:
        if len(args) == 1:
            self.name, self.message, self.value = "", str(args[0]), _NO_VALUE
            super().__init__(self.message)
            return
        name, message, value = (*args, _NO_VALUE)[:3]
        self.name = str(name)
        self.message = str(message)
        self.value = value
        if value is _NO_VALUE:
            text = f"Invalid configuration {name}: {message}"
        else:
            text = f"Invalid value {value} for configuration {name}: {message}"
        super().__init__(text)


class ConfigType(enum.IntEnum):
    """A setting's type; the values are DescribeConfigs' `ConfigType` ids (v3+)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7
    CLASS = 8
    PASSWORD = 9


class Importance(enum.Enum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class UpdateMode(enum.Enum):
    """Whether a broker setting can change without a restart (Kafka's dynamic update mode)."""

    READ_ONLY = "read-only"
    PER_BROKER = "per-broker"
    CLUSTER_WIDE = "cluster-wide"


class ConfigSource(enum.IntEnum):
    """Where a value came from; the ids of DescribeConfigs' `ConfigSource`."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6


@dataclass(frozen=True)
class Password:
    """A secret value; its repr and str never show it."""

    value: str = field(repr=False)

    def __str__(self) -> str:
        return "[hidden]"

    def __repr__(self) -> str:
        return "Password([hidden])"


ConfigValue = bool | int | float | str | list[str] | Password | None
"""A parsed value: bool, int (INT/SHORT/LONG), float, str (STRING/CLASS), list[str],
Password, or None for an optional setting that is not set."""

NO_DEFAULT: Final = _Missing.TOKEN
"""Default of a required setting: parsing fails when it is absent."""


# --- validators -------------------------------------------------------------------------


class Validator(Protocol):
    """Checks a parsed, non-None value; raises `ConfigError` when it is not acceptable."""

    def __call__(self, name: str, value: ConfigValue) -> None: ...


@dataclass(frozen=True)
class Range:
    """A number between `min` and `max` inclusive (either bound optional)."""

    min: float | None = None
    max: float | None = None

    def __call__(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(name, "Value must be a number", value)
        if self.min is not None and value < self.min:
            raise ConfigError(name, f"Value must be at least {_num(self.min)}", value)
        if self.max is not None and value > self.max:
            raise ConfigError(name, f"Value must be no more than {_num(self.max)}", value)

    def __str__(self) -> str:
        if self.min is None:
            return f"[...,{_num(self.max)}]" if self.max is not None else "[...]"
        if self.max is None:
            return f"[{_num(self.min)},...]"
        return f"[{_num(self.min)},...,{_num(self.max)}]"


def _num(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(bound)


@dataclass(frozen=True)
class OneOf:
    """A string from a fixed set."""

    options: tuple[str, ...]
    case_sensitive: bool = True

    def __call__(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, str) or not self._allows(value):
            qualifier = "" if self.case_sensitive else " (case insensitive)"
            raise ConfigError(name, f"String must be one of{qualifier}: {self._listing()}", value)

    def _allows(self, value: str) -> bool:
        if self.case_sensitive:
            return value in self.options
        return value.lower() in {option.lower() for option in self.options}

    def _listing(self) -> str:
        return ", ".join(self.options)

    def __str__(self) -> str:
        return f"[{self._listing()}]"


@dataclass(frozen=True)
class ListOf:
    """A list whose every item comes from a fixed set."""

    options: tuple[str, ...]

    def __call__(self, name: str, value: ConfigValue) -> None:
        if not isinstance(value, list):
            raise ConfigError(name, "Value must be a list", value)
        for item in value:
            if item not in self.options:
                raise ConfigError(name, f"String must be one of: {', '.join(self.options)}", item)

    def __str__(self) -> str:
        return f"[{', '.join(self.options)}]"


@dataclass(frozen=True)
class Check:
    """A custom rule: `test` returns an error message, or None when the value is fine."""

    test: Callable[[ConfigValue], str | None]
    description: str

    def __call__(self, name: str, value: ConfigValue) -> None:
        problem = self.test(value)
        if problem is not None:
            raise ConfigError(name, problem, value)

    def __str__(self) -> str:
        return self.description


# --- parsing and rendering --------------------------------------------------------------

_INT_RANGES: Final[dict[ConfigType, tuple[int, int]]] = {
    ConfigType.SHORT: (-(2**15), 2**15 - 1),
    ConfigType.INT: (-(2**31), 2**31 - 1),
    ConfigType.LONG: (-(2**63), 2**63 - 1),
}
# Java's Integer/Long.parseLong accept an optional sign and ASCII digits only.
_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java's Double.parseDouble, without hexadecimal literals.
_JAVA_DOUBLE = re.compile(
    r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)"
)
_LIST_SEPARATOR: Final = re.compile(r"\s*,\s*")


def parse_value(name: str, config_type: ConfigType, raw: object) -> ConfigValue:
    """Parse `raw` (a string from a file or request, or an already typed value) as
    `config_type`, with Kafka's rules; raise `ConfigError` naming `name` when it does not fit.

    Strings are trimmed; booleans are "true"/"false" in any case; lists are split on commas
    with surrounding whitespace dropped ("" is the empty list).
    """
    if raw is None:
        return None
    shown = "[hidden]" if config_type is ConfigType.PASSWORD else raw
    if isinstance(raw, str):
        text = raw.strip()
        if config_type is ConfigType.BOOLEAN:
            if text.lower() == "true":
                return True
            if text.lower() == "false":
                return False
            raise ConfigError(name, "Expected value to be either true or false", shown)
        if config_type in _INT_RANGES:
            low, high = _INT_RANGES[config_type]
            if _JAVA_INTEGER.fullmatch(text) and low <= int(text) <= high:
                return int(text)
            raise ConfigError(name, f"Not a number of type {config_type.name}", shown)
        if config_type is ConfigType.DOUBLE:
            if _JAVA_DOUBLE.fullmatch(text):
                return float(text.rstrip("fFdD").replace("Infinity", "inf"))
            raise ConfigError(name, "Not a number of type DOUBLE", shown)
        if config_type is ConfigType.LIST:
            return _LIST_SEPARATOR.split(text) if text else []
        if config_type is ConfigType.PASSWORD:
            return Password(raw)
        if config_type is ConfigType.CLASS and not text:
            raise ConfigError(name, "Expected a class name", shown)
        return text
    return _check_typed(name, config_type, raw, shown)


def _check_typed(name: str, config_type: ConfigType, raw: object, shown: object) -> ConfigValue:
    """Accept a value given as a Python object when its type fits `config_type`."""
    if config_type is ConfigType.BOOLEAN and isinstance(raw, bool):
        return raw
    if config_type in _INT_RANGES and isinstance(raw, int) and not isinstance(raw, bool):
        low, high = _INT_RANGES[config_type]
        if low <= raw <= high:
            return raw
        raise ConfigError(name, f"Not a number of type {config_type.name}", shown)
    if (
        config_type is ConfigType.DOUBLE
        and isinstance(raw, int | float)
        and not isinstance(raw, bool)
    ):
        return float(raw)
    if (
        config_type is ConfigType.LIST
        and isinstance(raw, list | tuple)
        and all(isinstance(item, str) for item in raw)
    ):
        return [item.strip() for item in raw]
    if config_type is ConfigType.PASSWORD and isinstance(raw, Password):
        return raw
    kind = "true or false" if config_type is ConfigType.BOOLEAN else config_type.name
    raise ConfigError(name, f"Expected a value of type {kind}", shown)


def render_value(config_type: ConfigType, value: ConfigValue) -> str | None:
    """The string Kafka shows for a parsed value: lists comma-joined, booleans lowercase,
    doubles as Java prints them; None stays None; passwords are hidden."""
    if value is None:
        return None
    if isinstance(value, Password):
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(value)
    if isinstance(value, float) or config_type is ConfigType.DOUBLE:
        return _java_double(float(value))
    return str(value)


def _java_double(value: float) -> str:
    """`Double.toString`: shortest round-trip digits, scientific outside [1e-3, 1e7)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)
        return text if ("." in text or "e" in text) else text + ".0"
    number = Decimal(repr(value)).normalize()
    sign, digits, _ = number.as_tuple()
    mantissa = "".join(map(str, digits))
    return f"{'-' if sign else ''}{mantissa[0]}.{mantissa[1:] or '0'}E{number.adjusted()}"


# --- definitions ------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One setting: its type, default (already typed; `NO_DEFAULT` when required, None
    when optional), validator, importance, short doc and dynamic update mode."""

    name: str
    type: ConfigType
    default: ConfigValue | _Missing
    validator: Validator | None = None
    importance: Importance = Importance.MEDIUM
    doc: str = ""
    update_mode: UpdateMode = UpdateMode.READ_ONLY

    @property
    def is_sensitive(self) -> bool:
        return self.type is ConfigType.PASSWORD

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT

    @property
    def default_value(self) -> ConfigValue:
        """The default, or None for a required setting."""
        return None if isinstance(self.default, _Missing) else self.default

    def parse(self, raw: object) -> ConfigValue:
        """Parse and validate one value for this setting."""
        value = parse_value(self.name, self.type, raw)
        if value is not None and self.validator is not None:
            self.validator(self.name, value)
        return value

    def render(self, value: ConfigValue) -> str | None:
        return render_value(self.type, value)


class ConfigDef:
    """An ordered set of `ConfigKey`s. Built once at import time, then read-only: safe to
    share between tasks and threads."""

    def __init__(self, keys: Iterable[ConfigKey] = ()) -> None:
        self._keys: dict[str, ConfigKey] = {}
        for key in keys:
            self.add(key)

    def add(self, key: ConfigKey) -> ConfigDef:
        if key.name in self._keys:
            raise ValueError(f"configuration {key.name} is defined twice")
        if not isinstance(key.default, _Missing) and key.default is not None:
            # A default must satisfy its own validator; this catches slips in definitions.
            key.parse(key.default)
        self._keys[key.name] = key
        return self

    def define(
        self,
        name: str,
        config_type: ConfigType,
        default: ConfigValue | _Missing,
        validator: Validator | None = None,
        importance: Importance = Importance.MEDIUM,
        doc: str = "",
        update_mode: UpdateMode = UpdateMode.READ_ONLY,
    ) -> ConfigDef:
        """Add a setting; returns self so definitions chain."""
        return self.add(
            ConfigKey(name, config_type, default, validator, importance, doc, update_mode)
        )

    def __getitem__(self, name: str) -> ConfigKey:
        return self._keys[name]

    def get(self, name: str) -> ConfigKey | None:
        return self._keys.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._keys

    def __iter__(self) -> Iterator[ConfigKey]:
        return iter(self._keys.values())

    def __len__(self) -> int:
        return len(self._keys)

    def names(self) -> list[str]:
        return list(self._keys)

    def parse_one(self, name: str, raw: object, *, unknown_message: str = "") -> ConfigValue:
        key = self._keys.get(name)
        if key is None:
            raise ConfigError(name, unknown_message or "Unknown configuration name")
        return key.parse(raw)

    def parse(
        self,
        props: Mapping[str, object],
        *,
        unknown_message: str = "",
    ) -> dict[str, ConfigValue]:
        """Typed values for every defined setting: parsed from `props` when present there,
        the default otherwise. Raises `ConfigError` for an unknown name, an invalid value or
        a missing required setting."""
        values: dict[str, ConfigValue] = {}
        for name, raw in props.items():
            values[name] = self.parse_one(name, raw, unknown_message=unknown_message)
        for key in self._keys.values():
            if key.name in values:
                continue
            if key.required:
                raise ConfigError(key.name, "Missing required configuration, it has no default")
            values[key.name] = key.default_value
        return {key.name: values[key.name] for key in self._keys.values()}

    def defaults(self) -> dict[str, ConfigValue]:
        """Every non-required setting's default (None for optional ones)."""
        return {key.name: key.default_value for key in self._keys.values() if not key.required}


# --- DescribeConfigs results ------------------------------------------------------------


class ConfigSynonym(NamedTuple):
    """One place a value could come from: (name, value, source), highest precedence first."""

    name: str
    value: str | None
    source: ConfigSource


@dataclass(frozen=True)
class ConfigEntry:
    """One row of a DescribeConfigs result. `value` is None for sensitive or unset settings;
    `config_type` and `source` use the protocol's ids."""

    name: str
    value: str | None
    read_only: bool
    source: ConfigSource
    is_sensitive: bool
    synonyms: list[ConfigSynonym]
    config_type: ConfigType
    documentation: str

    @property
    def is_default(self) -> bool:
        return self.source is ConfigSource.DEFAULT_CONFIG
