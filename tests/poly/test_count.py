"""poly.count: exact point counts, symbolic and concrete, against isl's point scan."""

from __future__ import annotations

import random

import islpy as isl
import pytest

from polyopt.poly.count import Uncountable, count, count_at, try_count

# Polytopes of the shapes TC domains and access images take: boxes, triangles, strides
# (floors of the sizes), sums of sets, unions with overlaps.
SETS = [
    "[M, N, K] -> { S[i, j, k] : 0 <= i < M and 0 <= j < N and 0 <= k < K }",
    "[N] -> { S[i, j] : 0 <= i < N and 0 <= j <= i }",
    "[N, M] -> { S[i, j] : 0 <= i < N and i <= j < M }",
    "[N] -> { S[i, j] : 0 <= i < N and 0 <= j <= i and 2j <= N }",
    "[H, KH] -> { S[o, k] : 0 <= k < KH and 0 <= o and 3o <= H - KH }",
    "[N, M] -> { S[i, j] : 0 <= i < N and 0 <= j < M and i + j <= N; T[i] : 0 <= i < 2M }",
    "[N] -> { S[i] : 0 <= i < N; S[i] : 5 <= i < N + 5 }",
    "[N, M] -> { S[i, j, k] : 0 <= i < N and 0 <= j < M and j <= k < j + 3 and k < M }",
]


def _fixed(s: isl.UnionSet, values: dict[str, int]) -> isl.UnionSet:
    space = s.get_space()
    names = [space.get_dim_name(isl.dim_type.param, i) for i in range(space.dim(
        isl.dim_type.param))]
    cons = " and ".join(f"{n} = {values[n]}" for n in names)
    return s.intersect_params(isl.Set(f"[{', '.join(names)}] -> {{ : {cons} }}"))


def _scanned(s: isl.UnionSet) -> int:
    sets: list[isl.Set] = []
    s.foreach_set(sets.append)
    return sum(int(x.count_val().to_python()) for x in sets)


@pytest.mark.parametrize("text", SETS)
def test_symbolic_counts_match_the_scan(text: str) -> None:
    s = isl.UnionSet(text)
    c = count(s)
    assert c.value is None and c.qpoly is not None
    rng = random.Random(17)
    for _ in range(12):
        values = {n: rng.randint(0, 9) for n in ("M", "N", "K", "H", "KH")}
        assert count_at(c, values) == _scanned(_fixed(s, values)), values


def test_concrete_counts_are_ints_and_fast_for_large_boxes() -> None:
    box = isl.Set("{ S[i, j, k] : 0 <= i < 4096 and 0 <= j < 4096 and 0 <= k < 4096 }")
    assert count(box).value == 4096 ** 3
    tri = isl.Set("{ S[i, j] : 0 <= i < 1000 and 0 <= j <= i }")
    assert count(tri).value == 1000 * 1001 // 2


def test_sets_with_holes_and_floor_bounds_are_counted_through_their_floors() -> None:
    assert count(isl.Set("{ S[i] : 0 <= i < 100 and i mod 3 = 0 }")).value == 34
    # Strided reads: every other element, and a 2x2 pool's rows (the last odd one unread).
    for text in ("[N] -> { S[i] : 0 <= i < N and i mod 2 = 0 }",
                 "[N] -> { S[i, j] : 0 <= i < N and 0 <= j < 3 and (i + j) mod 3 = 1 }",
                 "[H] -> { I[i] : 0 <= i < H and 2*floor(i/2) <= H - 2 }"):
        s = isl.UnionSet(text)
        c = count(s)
        for n in range(0, 12):
            values = {"N": n, "H": n}
            assert count_at(c, values) == _scanned(_fixed(s, values)), (text, n)


def test_unbounded_sets_are_not_counted() -> None:
    with pytest.raises(Uncountable, match="unbounded"):
        count(isl.Set("[N] -> { S[i] : i >= N }"))
    missing = try_count(isl.Set("[N] -> { S[i] : i >= N }"))
    assert missing.value is None and missing.qpoly is None and "unbounded" in missing.missing
    assert str(missing) == "not counted"


def test_printed_quasi_polynomial() -> None:
    c = count(isl.Set("[M, N, K] -> { S[i, j, k] : 0 <= i < M and 0 <= j < N and "
                      "0 <= k < K }"))
    assert "M * N * K" in str(c)
    strided = count(isl.Set("[H] -> { S[o] : 0 <= o and 2o <= H - 3 }"))
    assert "floor" in str(strided)
    assert [count_at(strided, {"H": h}) for h in range(3, 9)] == [1, 1, 2, 2, 3, 3]


def _random_set(rng: random.Random) -> isl.Set:
    """A bounded polytope over sizes N, M: boxes cut by random affine constraints, some
    with a stride (a mod) or a floor bound."""
    dims = ["i", "j", "k"][:rng.randint(1, 3)]
    cons = [f"0 <= {d} < {rng.choice(['N', 'M', 'N + 2', '5'])}" for d in dims]
    for _ in range(rng.randint(0, 2)):
        terms = [f"{rng.choice([-2, -1, 1, 2, 3])}*{v}" for v in [*dims, "N", "M"]
                 if rng.random() < 0.5]
        cons.append(f"{' + '.join([*terms, str(rng.randint(-3, 3))])} >= 0")
    if rng.random() < 0.4:
        cons.append(f"({rng.choice(dims)} + {rng.randint(0, 2)}) mod {rng.randint(2, 3)} = 0")
    return isl.Set(f"[N, M] -> {{ S[{', '.join(dims)}] : {' and '.join(cons)} }}")


def test_random_polytopes_against_the_scan() -> None:
    rng = random.Random(5)
    counted = 0
    for _ in range(60):
        s = _random_set(rng)
        try:
            c = count(s)
        except Uncountable:  # a floor of a summed dimension in a bound: said, not guessed
            continue
        counted += 1
        for _ in range(4):
            values = {"N": rng.randint(0, 7), "M": rng.randint(0, 7)}
            assert count_at(c, values) == _scanned(_fixed(isl.UnionSet(s), values)), (s, values)
    assert counted >= 50
