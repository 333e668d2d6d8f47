"""KAG's typed schema: the shipped default and validation of a user's schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from quillian.components.kag.schema import (
    CHUNK,
    CONCEPT,
    OTHERS,
    SchemaError,
    default_schema,
    load_schema,
)


def test_default_schema_has_the_open_domain_classes() -> None:
    schema = default_schema()
    assert schema.entity_types[-1] == OTHERS
    assert len(schema.entity_types) == 16
    assert {"Person", "Organization", "GeographicLocation", "Works", "Date"} <= set(
        schema.entity_types
    )
    assert CHUNK in schema.classes and CONCEPT in schema.classes
    person = schema.classes["Person"]
    assert person.properties == {"desc": "Text", "semanticType": CONCEPT}
    assert person.relations["officialName"] == "Person"  # $self resolved
    assert person.relations["source"] == CHUNK
    assert schema.classes[CONCEPT].relations["isA"] == CONCEPT


def test_unknown_labels_map_to_others() -> None:
    schema = default_schema()
    assert schema.entity_type("person") == "Person"
    assert schema.entity_type("Spaceship") == OTHERS
    assert schema.entity_type("") == OTHERS
    assert schema.entity_type("Chunk") == OTHERS  # built-ins are not entity classes


def _write(tmp_path: Path, text: str, name: str = "schema.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_user_schema_with_relations_and_json(tmp_path: Path) -> None:
    yaml_path = _write(
        tmp_path,
        "namespace: Med\ntypes:\n  Disease:\n    description: An illness.\n"
        "    relations: {treatedBy: Drug}\n  Drug: {description: A medicine.}\n",
    )
    schema = load_schema(yaml_path)
    assert schema.relation_target("Disease", "treatedBy") == "Drug"
    assert schema.entity_types == ["Disease", "Drug", OTHERS]
    json_path = _write(tmp_path, '{"types": {"Drug": {"description": "x"}}}', "s.json")
    assert load_schema(json_path).entity_types == ["Drug", OTHERS]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "types:\n  Disease:\n    relations: {treatedBy: Drug}\n",
            "target class 'Drug' is not declared",
        ),
        ("types:\n  Disease:\n    properties: {dose: Quantity}\n", "unknown type 'Quantity'"),
        ("types:\n  Disease:\n    colour: red\n", "unknown keys ['colour']"),
        ("types:\n  9Bad: {}\n", "is not an identifier"),
        ("types: {}\n", "declares no types"),
        ("namespace: X\n", "declares no types"),
        ("types:\n  - Disease\n", "must be a mapping"),
        ("types: [unclosed\n", "not valid yaml"),
    ],
)
def test_bad_schemas_fail_with_a_clear_error(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(SchemaError) as err:
        load_schema(path)
    assert message in str(err.value)
    assert str(path) in str(err.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="cannot read schema"):
        load_schema(tmp_path / "none.yaml")
