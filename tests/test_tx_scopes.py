"""Scopes: parsing, `*` one segment, `**` any suffix, hierarchy; overlap and cover checked
against a brute-force reading over concrete resources."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daybook import ConfigError
from daybook.tx.scope import covers, for_call, outside, overlaps, parse

LITERALS = ["a", "b", "c"]
segment = st.sampled_from([*LITERALS, "*"])


@st.composite
def scopes(draw: st.DrawFn) -> str:
    body = draw(st.lists(segment, min_size=1, max_size=3))
    if draw(st.booleans()):
        body.append("**")
    kind = draw(st.sampled_from(["fs", "api"]))
    return kind + ":" + "/".join(body)


def _concrete() -> list[str]:
    """Every concrete resource of up to four segments over the literals and one fresh name."""
    names = [*LITERALS, "z"]
    out = []
    for kind in ("fs", "api"):
        for n in range(1, 5):
            out += [kind + ":" + "/".join(p) for p in itertools.product(names, repeat=n)]
    return out


CONCRETE = _concrete()


def _brute_overlap(a: str, b: str) -> bool:
    return any(covers(a, r) and covers(b, r) for r in CONCRETE)


def test_a_scope_is_type_then_segments_split_at_colons_and_slashes() -> None:
    assert parse("fs:/srv/shop/**").segments == ("fs", "srv", "shop", "**")
    assert parse("api:stripe:customers:cust_1").segments == ("api", "stripe", "customers", "cust_1")
    assert overlaps("fs:/srv/a", "fs:srv/a")


@pytest.mark.parametrize("bad", ["", "fs", "FS:/a", "fs:", "fs:/a/**/b", "fs:/a*", "*:/a", ["fs:/a"]])
def test_a_malformed_scope_is_refused_saying_why(bad: object) -> None:
    with pytest.raises(ConfigError):
        parse(bad)  # type: ignore[arg-type]


def test_star_is_one_segment_and_double_star_any_suffix() -> None:
    assert covers("api:hotel:holds:*", "api:hotel:holds:H1")
    assert not covers("api:hotel:holds:*", "api:hotel:rooms:H1")
    assert covers("fs:/srv/**", "fs:/srv/a/b/c")
    assert covers("fs:/srv", "fs:/srv/a/b")  # hierarchy: a scope covers what is below it
    assert not covers("fs:/srv/a", "fs:/srv")
    assert overlaps("fs:/srv/*/x", "fs:/srv/y/**")
    assert not overlaps("fs:/srv/a", "fs:/srv/b")
    assert not overlaps("fs:/a", "api:/a")
    assert covers("**", "api:hotel:holds:H1") and overlaps("fs:/a", "**") and not covers("fs:**", "**")


@settings(max_examples=300, deadline=None)
@given(a=scopes(), b=scopes())
def test_overlap_is_symmetric_and_agrees_with_concrete_resources(a: str, b: str) -> None:
    assert overlaps(a, b) == overlaps(b, a)
    assert overlaps(a, b) == _brute_overlap(a, b)


@settings(max_examples=300, deadline=None)
@given(a=scopes(), b=scopes(), c=scopes())
def test_cover_is_a_preorder_and_implies_overlap(a: str, b: str, c: str) -> None:
    assert covers(a, a) and overlaps(a, a)
    if covers(a, b):
        assert overlaps(a, b)
        assert all(covers(a, r) for r in CONCRETE if covers(b, r))
        if covers(b, c):
            assert covers(a, c)


def test_a_tool_derives_its_scopes_from_templates_or_a_function() -> None:
    assert [str(s) for s in for_call("fs:/srv/{path}", {"path": "x.html"}, "w")] == ["fs:/srv/x.html"]
    spec = lambda hotel, **_: [f"api:hotel:holds:{hotel}"]  # noqa: E731
    assert [str(s) for s in for_call(spec, {"hotel": "H1", "night": "n"}, "h")] == ["api:hotel:holds:H1"]
    assert [str(s) for s in for_call(lambda a: f"api:x:{a['id']}", {"id": 7}, "h")] == ["api:x:7"]
    with pytest.raises(ConfigError, match="could not be derived"):
        for_call("fs:/{missing}", {"path": "x"}, "w")
    assert outside([parse("fs:/srv/**")], [parse("fs:/etc/passwd")]) == [parse("fs:/etc/passwd")]
