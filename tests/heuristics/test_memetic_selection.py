"""Tournament selection and steady-state elitist replacement."""

from __future__ import annotations

import numpy as np

from heuristics.memetic.selection import replace_worst, tournament


def test_tournament_winner_is_the_best_entrant() -> None:
    obj = np.array([5.0, 1.0, 3.0, 4.0, 2.0, 6.0])
    winners = tournament(np.random.default_rng(7), obj, 1000, 3)
    # Same stream: the entrants are the first draw the function makes.
    entrants = np.random.default_rng(7).integers(0, 6, size=(1000, 3))
    assert np.array_equal(obj[winners], obj[entrants].min(axis=1))


def test_tournament_size_controls_pressure() -> None:
    obj = np.arange(50, dtype=float)
    rng = np.random.default_rng(0)
    uniform = tournament(rng, obj, 20_000, 1)
    strong = tournament(rng, obj, 20_000, 8)
    assert abs(uniform.mean() - 24.5) < 1.0  # k = 1: uniform choice
    assert strong.mean() < 8.0  # k = 8: expected minimum of 8 draws ~ 5
    assert strong.min() == 0


def test_generational_replacement_keeps_elites_and_replaces_the_worst() -> None:
    X = np.arange(5)[:, None].repeat(2, axis=1)  # row r = [r, r]
    obj = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    C = np.array([[10, 10], [11, 11], [12, 12]])
    cobj = np.array([2.5, 0.5, 9.0])
    newX, newobj, entered = replace_worst(X, obj, C, cobj, elite=2)
    assert entered == 3
    # Elites 1.0 and 2.0 stay; the three worst (3, 4, 5) are replaced.
    assert newobj.tolist() == [0.5, 1.0, 2.0, 2.5, 9.0]
    assert newX[:, 0].tolist() == [11, 0, 1, 10, 12]


def test_improving_replacement_only_lets_better_offspring_in() -> None:
    X = np.arange(5)[:, None].repeat(2, axis=1)
    obj = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    C = np.array([[10, 10], [11, 11], [12, 12]])
    cobj = np.array([2.5, 0.5, 9.0])
    _, newobj, entered = replace_worst(X, obj, C, cobj, elite=2, unconditional=False)
    assert entered == 2
    assert newobj.tolist() == [0.5, 1.0, 2.0, 2.5, 3.0]


def test_elites_survive_even_worse_offspring_floods() -> None:
    X = np.arange(4)[:, None]
    obj = np.array([1.0, 2.0, 3.0, 4.0])
    C = np.arange(10, 20)[:, None]
    cobj = np.full(10, 100.0)
    newX, newobj, entered = replace_worst(X, obj, C, cobj, elite=2)
    assert entered == 2  # at most P - E offspring enter
    assert newX[:2, 0].tolist() == [0, 1] and newobj.tolist() == [1.0, 2.0, 100.0, 100.0]


def test_a_short_population_fills_up_first() -> None:
    X = np.array([[0], [1]])
    obj = np.array([1.0, 2.0])
    C = np.array([[5], [6], [7]])
    cobj = np.array([7.0, 6.0, 0.5])
    newX, newobj, entered = replace_worst(X, obj, C, cobj, elite=1, capacity=4,
                                          unconditional=False)
    assert newobj.tolist() == [0.5, 1.0, 2.0, 6.0]
    assert entered == 2
    assert newX.shape == (4, 1)


def test_no_offspring_changes_nothing() -> None:
    X = np.array([[0], [1]])
    obj = np.array([1.0, 2.0])
    newX, newobj, entered = replace_worst(X, obj, np.empty((0, 1), np.int64), np.empty(0), 1)
    assert entered == 0 and newX is X and newobj is obj
