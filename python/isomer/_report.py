"""The optimize report: the fields of `isomer optimize --report-json`, as attributes.

The object is made from the JSON the C++ pipeline writes (OptimizeReport::to_json),
so its fields are the CLI's fields by construction; nothing here lists them.
"""

import json

# Fields the JSON carries only when they have a value; read as None otherwise.
_OPTIONAL_FIELDS = ("culprit_rule",)


class Report:
    """What `isomer.optimize` did: node counts before and after, rules applied,
    timings and the check's verdict. Attributes are the keys of the CLI's
    --report-json document (`nodes_before`, `rules_applied`, `check`, ...);
    `str(report)` is the table the CLI prints."""

    __slots__ = ("_fields", "_text")

    def __init__(self, fields, text=""):
        object.__setattr__(self, "_fields", dict(fields))
        object.__setattr__(self, "_text", text)

    @classmethod
    def from_json(cls, document, text=""):
        return cls(json.loads(document), text)

    def __getattr__(self, name):
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        if name in _OPTIONAL_FIELDS:
            return None
        raise AttributeError(f"Report has no field '{name}' (fields: {', '.join(fields)})")

    def __setattr__(self, name, value):
        raise AttributeError("Report is read-only")

    def __dir__(self):
        return sorted(set(self._fields) | set(_OPTIONAL_FIELDS) | {"fields", "passed", "to_dict", "to_json"})

    @property
    def fields(self):
        """Field names in the order of the JSON document."""
        return tuple(self._fields)

    @property
    def passed(self):
        """True when the check ran and the outputs matched."""
        return self._fields.get("check") == "passed"

    def to_dict(self):
        """A copy of the fields, exactly the --report-json document."""
        return json.loads(json.dumps(self._fields))

    def to_json(self, indent=2):
        return json.dumps(self._fields, indent=indent) + "\n"

    def __eq__(self, other):
        return isinstance(other, Report) and self._fields == other._fields

    def __hash__(self):
        return hash(self.to_json())

    def __repr__(self):
        shown = ", ".join(f"{k}={v!r}" for k, v in self._fields.items())
        return f"Report({shown})"

    def __str__(self):
        return self._text or self.to_json()
