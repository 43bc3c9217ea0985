"""The filter tree compiled for pyiceberg keeps the same rows as the tree compiled for pyarrow.

pyiceberg filters the rows of a scan by turning its bound row filter into a
pyarrow expression; doing the same here on an in-memory table checks the
Iceberg compiler against the pyarrow one on every kind of node.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware.core.filter import parse_filter
from hypaware.core.filter_bind import bind_filter, to_arrow
from tests.core.test_filter import SCHEMA, TABLE, combine, leaf

pytestmark = pytest.mark.iceberg

pyiceberg = pytest.importorskip("pyiceberg")

from pyiceberg.expressions.visitors import bind  # noqa: E402
from pyiceberg.io.pyarrow import expression_to_pyarrow  # noqa: E402

from hypaware.iceberg.filter import to_iceberg  # noqa: E402
from hypaware.iceberg.schema import dataset_schema  # noqa: E402

ICEBERG = dataset_schema(SCHEMA)


@settings(max_examples=150)
@given(st.recursive(leaf(), combine, max_leaves=6))
def test_iceberg_and_arrow_compilers_keep_the_same_rows(case: tuple[str, Any]) -> None:
    tree = bind_filter(parse_filter(case[0]), SCHEMA)
    arrow_rows = TABLE.filter(to_arrow(tree, SCHEMA)).column("n").to_pylist()
    bound = bind(ICEBERG, to_iceberg(tree, ICEBERG), case_sensitive=True)
    iceberg_rows = TABLE.filter(expression_to_pyarrow(bound)).column("n").to_pylist()
    assert iceberg_rows == arrow_rows, case[0]
