"""The common base for every API model: camelCase on the wire, snake_case in Python."""

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class ApiModel(BaseModel):
    """Serialises with the Kubernetes field names (`by_alias`) and accepts either spelling.

    Unknown fields are kept (`extra="allow"`): objects written by a newer annex, or embedded
    Kubernetes structures we do not model in full, must survive a read-modify-write unchanged.
    Attribute docstrings become field descriptions, which the generated CRDs carry for
    `kubectl explain`.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        use_attribute_docstrings=True,
    )

    def to_wire(self) -> dict[str, object]:
        """The JSON-ready form a Kubernetes API server expects (aliases, no unset/None fields)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")
