"""Stream fields to an Arrow schema, and rows to a pyarrow.Table column by column."""

import datetime

import pyarrow as pa
import pytest

from squall.client.spark.schema import (SchemaError, arrow_schema, infer_type, parse_type,
                                        to_arrow_table)

MAP_SL = pa.map_(pa.string(), pa.int64())


@pytest.mark.parametrize("declared, expected", [
    (int, pa.int64()), (float, pa.float64()), (str, pa.string()), (bool, pa.bool_()),
    (bytes, pa.binary()),
    ("long", pa.int64()), ("double", pa.float64()), ("string", pa.string()),
    ("boolean", pa.bool_()), ("binary", pa.binary()), ("LONG", pa.int64()),
    ("array<long>", pa.list_(pa.int64())),
    ("map<string,long>", MAP_SL),
    ("map<string, array<map<long,double>>>",
     pa.map_(pa.string(), pa.list_(pa.map_(pa.int64(), pa.float64())))),
    (list[str], pa.list_(pa.string())),
    (dict[str, list[int]], pa.map_(pa.string(), pa.list_(pa.int64()))),
    (pa.timestamp("us"), pa.timestamp("us")),
])
def test_declared_types(declared, expected):
    assert parse_type(declared) == expected


@pytest.mark.parametrize("declared, message", [
    ("integer", r"field 'f': unknown type 'integer' \(known: binary, boolean, double, long"),
    ("array<lng>", "unknown type 'array<lng>'"),
    ("map<long>", "unknown type 'map<long>'"),
    ("map<array<long>,long>", "a map key must be a primitive type"),
    (complex, "field 'f': cannot use <class 'complex'> as a type"),
])
def test_declared_type_errors_name_the_field(declared, message):
    with pytest.raises(SchemaError, match=message) as info:
        arrow_schema(["f"], types={"f": declared})
    assert info.value.field == "f"


@pytest.mark.parametrize("values, expected", [
    ([1, 2], pa.int64()),
    ([1.5], pa.float64()),
    (["a"], pa.string()),
    ([True, False], pa.bool_()),  # bool is checked before int
    ([b"x", bytearray(b"y")], pa.binary()),
    ([1, 2.5, None], pa.float64()),  # int + float widens
    ([[1, 2], [], [None, 3.0]], pa.list_(pa.float64())),
    ([{"a": 1}, {"b": None}, {}], MAP_SL),
    ([[{"a": [True]}]], pa.list_(pa.map_(pa.string(), pa.list_(pa.bool_())))),
    ([(1, 2)], pa.list_(pa.int64())),
    ([None, None], pa.null()),
    ([], pa.null()),
    ([[]], pa.list_(pa.null())),
])
def test_inference(values, expected):
    assert infer_type(values, "f") == expected


@pytest.mark.parametrize("values, message", [
    ([True, 1], r"field 'f': mixed types boolean and long \(value 1 of type int\)"),
    ([1, "1"], "mixed types long and string"),
    ([[1], ["a"]], "mixed types long and string"),
    ([1, [1]], "mixed types long and array<long>"),
    ([{1: "a"}], "a dict infers as map<string, V>, but f has a int key 1"),
    ([datetime.date(2024, 1, 2)], "cannot infer a type for a date value at f"),
    ([[{1, 2}]], r"cannot infer a type for a set value at f\[\]"),
    ([1 << 64], "does not fit in a long"),
])
def test_inference_errors_name_the_field_and_value_type(values, message):
    with pytest.raises(SchemaError, match=message) as info:
        arrow_schema(["x", "f"], sample_rows=[("ok", v) for v in values])
    assert info.value.field == "f" and str(info.value).startswith("field 'f': ")


def test_schema_mixes_declared_and_inferred_fields_in_declared_order():
    schema = arrow_schema(["word", "count", "tags", "extra"], types={"count": "double"},
                          sample_rows=[("a", 1, ["x"], None), ("b", 2, None, None)])
    assert schema == pa.schema([("word", pa.string()), ("count", pa.float64()),
                                ("tags", pa.list_(pa.string())), ("extra", pa.null())])
    assert all(f.nullable for f in schema)


def test_schema_rejects_unknown_duplicate_fields_and_ragged_rows():
    with pytest.raises(SchemaError, match="field 'cnt': has a declared type but is not a "
                                          r"field of the stream \(word, count\)"):
        arrow_schema(["word", "count"], types={"cnt": int})
    with pytest.raises(SchemaError, match="field 'a': declared twice"):
        arrow_schema(["a", "b", "a"])
    with pytest.raises(SchemaError, match=r"row 1 has 1 values, the stream declares 2 fields"):
        arrow_schema(["a", "b"], sample_rows=[(1, 2), (3,)])


def test_table_round_trips_every_type_column_wise():
    rows = [
        (1, 1.5, "a", True, b"\x00", [1, None], {"k": 1}, [{"n": [1.0]}]),
        (None, 2, None, False, bytearray(b"z"), [], {}, None),
        (-(1 << 63), None, "", None, None, None, {"k": None}, [{}]),
    ]
    schema = arrow_schema(
        ["l", "d", "s", "b", "bin", "arr", "m", "nested"],
        types={"d": float, "arr": "array<long>", "m": "map<string,long>",
               "nested": "array<map<string,array<double>>>"},
        sample_rows=rows)
    table = to_arrow_table(rows, schema)
    assert table.schema == schema and table.num_rows == 3
    assert table.column("d").to_pylist() == [1.5, 2.0, None]  # an int fits a double
    assert table.column("bin").to_pylist() == [b"\x00", b"z", None]
    assert table.column("m").to_pylist() == [[("k", 1)], [], [("k", None)]]
    assert table.column("nested").to_pylist() == [[[("n", [1.0])]], None, [[]]]
    assert table.column("l").to_pylist() == [1, None, -(1 << 63)]


def test_empty_batch_gives_an_empty_table_of_the_schema():
    schema = arrow_schema(["a", "b"], types={"a": int, "b": "array<string>"})
    table = to_arrow_table([], schema)
    assert table.num_rows == 0 and table.schema == schema


@pytest.mark.parametrize("declared, value, message", [
    # pyarrow alone would truncate 1.5 to 1, or encode str as binary: refused here.
    ("long", 1.5, "row 1: expected long, got float 1.5"),
    ("long", True, "row 1: expected long, got bool True"),
    ("long", 1 << 63, "row 1: int 9223372036854775808 does not fit in a long"),
    ("double", False, "row 1: expected double, got bool False"),
    ("double", "1.0", "row 1: expected double, got str '1.0'"),
    ("string", b"a", "row 1: expected string, got bytes b'a'"),
    ("binary", "a", "row 1: expected binary, got str 'a'"),
    ("boolean", 1, "row 1: expected boolean, got int 1"),
    ("array<long>", [1, 2.5], r"row 1\[\]: expected long, got float 2.5"),
    ("array<long>", 3, "row 1: expected array<long>, got int 3"),
    ("map<string,long>", {"a": "b"}, r"row 1\{\}: expected long, got str 'b'"),
    ("map<string,long>", {1: 1}, "row 1 key: expected string, got int 1"),
    ("map<string,long>", {None: 1}, "row 1: None map key"),
    ("map<string,long>", [("a", 1)], "row 1: expected map<string,long>, got list"),
])
def test_a_value_that_does_not_fit_names_field_row_and_type(declared, value, message):
    schema = arrow_schema(["id", "v"], types={"id": int, "v": declared})
    with pytest.raises(SchemaError, match=r"field 'v': " + message) as info:
        to_arrow_table([(0, None), (1, value)], schema)
    assert info.value.field == "v"


def test_pyarrow_errors_outside_the_vocabulary_are_wrapped_with_the_field():
    schema = arrow_schema(["ts"], types={"ts": pa.timestamp("us")})
    with pytest.raises(SchemaError, match="field 'ts': cannot convert to timestamp"):
        to_arrow_table([("not a time",)], schema)


def test_table_rejects_ragged_rows():
    schema = arrow_schema(["a", "b"], types={"a": int, "b": int})
    with pytest.raises(SchemaError, match="row 0 has 3 values"):
        to_arrow_table([(1, 2, 3)], schema)
