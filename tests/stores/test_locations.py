"""A location as people see it: never a password, whatever form the URL takes."""

from __future__ import annotations

import pytest

from quillian.index.layout import location_name

SECRET = "s3cr3t-Pa55"


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        (
            f"postgresql://ann:{SECRET}@db.example:5433/kg?workspace=w&sslmode=require",
            "postgresql://ann@db.example:5433/kg?workspace=w",
        ),
        (
            f"postgres://ann@/kg?host=/run/pg&password={SECRET}&workspace=w",
            "postgresql://ann@/run/pg/kg?workspace=w",
        ),
        (f"postgresql://ann:{SECRET}@db:notaport/kg", "postgresql://db:notaport/kg"),
        ("/data/index", "/data/index"),
    ],
)
def test_a_location_is_shown_without_its_password(location: str, shown: str) -> None:
    assert location_name(location) == shown
    assert SECRET not in location_name(location)
