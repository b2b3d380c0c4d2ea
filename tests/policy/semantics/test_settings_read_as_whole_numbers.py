"""`to_int` is how the compiler and the suite runner read a decided number: what int() takes from
a setting or a suite's YAML (a number, or its text), and a TypeError naming anything else."""

import pytest

from policy.units import to_int


@pytest.mark.parametrize(("value", "expected"), [(3, 3), (2.0, 2), ("50", 50), (True, 1)])
def test_to_int_reads_numbers_and_their_text_as_int_does(value: object, expected: int) -> None:
    assert to_int(value) == expected


def test_to_int_of_a_list_names_the_type_and_the_value() -> None:
    with pytest.raises(TypeError, match=r"expected a number, got list \[1\]"):
        to_int([1])


def test_to_int_of_bad_text_is_ints_value_error() -> None:
    with pytest.raises(ValueError, match="'fifty'"):
        to_int("fifty")
