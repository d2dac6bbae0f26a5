"""The deploy plan (pure): kept, started and stopped slots, each kept slot's gains and losses, moved cells."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from geokernel.contracts.plan import PlanStatus, SwapMode
from geokernel.geo.tiles import Tile, quadkey, quadkey_to_tile
from geokernel.partition_spec.index import SpecIndex
from geokernel.partition_spec.model import HASH_BUCKETS, Partition, Spec, Worker, shard_hash_key
from lambdas.deploy.plan import DeployPlan, plan_from_item, plan_item, plan_swap

Row = tuple[str, Sequence[str]] | tuple[str, Sequence[str], tuple[int, int]]


def spec(version: int, rows: Sequence[Row], catch_all: str = "w1") -> Spec:
    """A spec from (worker, quadkeys[, hash_range]) rows, one partition each, plus the catch-all on ``catch_all``."""
    parts = [Partition(id=f"p{i:04d}", worker=r[0], quadkeys=tuple(r[1]), load=1.0,
                       hash_range=r[2] if len(r) > 2 else None)  # type: ignore[misc]
             for i, r in enumerate(rows, start=1)]
    parts.append(Partition(id="p9999", worker=catch_all, quadkeys=("",), load=0.0))
    ids = list(dict.fromkeys(p.worker for p in parts))
    workers = tuple(Worker(id=w, load=1.0, hash_key=shard_hash_key(i, len(ids))) for i, w in enumerate(ids))
    return Spec(version=version, max_load=10.0, partitions=tuple(parts), workers=workers)


A, B, C = "0231", "0232", "0233"  # three zoom-4 squares


def test_first_deploy_starts_every_slot_and_moves_nothing() -> None:
    # GIVEN no deployed spec WHEN v1 is planned THEN every slot starts, nothing is kept, stopped or moved
    plan = plan_swap(None, spec(1, [("w1", [A]), ("w2", [B])]))
    assert (plan.from_version, plan.to_version, plan.kept, plan.stopped, plan.moved_cells) == (None, 1, (), (), ())
    assert plan.started == ("w1", "w2") and (plan.old_slots, plan.new_slots, plan.peak_workers) == (0, 2, 2)


def test_carry_keeps_common_slots_with_their_gains_and_losses() -> None:
    # GIVEN v1: w1 owns A and the catch-all, w2 owns B, w3 owns C; v2: w2 takes A, w3 is gone, w4 owns C
    v1 = spec(1, [("w1", [A]), ("w2", [B]), ("w3", [C])])
    v2 = spec(2, [("w2", [A, B]), ("w4", [C])])
    # WHEN planned in carry mode
    plan = plan_swap(v1, v2, SwapMode.CARRY)
    # THEN w1 and w2 are kept, w4 starts, w3 stops, and A and C moved
    assert plan.kept_ids == ("w2", "w1") and plan.started == ("w4",) and plan.stopped == ("w3",)
    kept = {k.worker_id: k for k in plan.kept}
    assert (kept["w2"].gains, kept["w2"].losses) == ((A,), ())
    assert kept["w2"].gained_partitions == ("p0001",) and kept["w2"].lost_partitions == ("p0002",)  # ids by row
    assert (kept["w1"].gains, kept["w1"].losses) == ((), (A,))
    assert plan.moved_cells == (A, C) and plan.peak_workers == 4 and plan.new_slots == 3


def test_whole_mode_keeps_nothing_but_moves_the_same_cells() -> None:
    # GIVEN the same two specs WHEN planned whole-fleet THEN every slot stops and starts; the moved cells are the same
    v1 = spec(1, [("w1", [A]), ("w2", [B]), ("w3", [C])])
    v2 = spec(2, [("w2", [A, B]), ("w4", [C])])
    whole, carry = plan_swap(v1, v2, "whole"), plan_swap(v1, v2, "carry")
    assert whole.kept == () and whole.started == ("w2", "w4", "w1") and whole.stopped == ("w1", "w2", "w3")
    assert whole.moved_cells == carry.moved_cells and whole.peak_workers == 6


def test_relisting_a_region_with_other_squares_moves_nothing() -> None:
    # GIVEN w2 owning A as its four children in v1 and as A itself in v2, and the catch-all unchanged
    v1 = spec(1, [("w2", [A + d for d in "0123"])])
    v2 = spec(2, [("w2", [A])])
    # WHEN planned THEN no cell moved and both slots are kept unchanged
    plan = plan_swap(v1, v2)
    assert plan.moved_cells == () and all(k.unchanged for k in plan.kept)


def test_a_carved_hole_moves_only_the_hole() -> None:
    # GIVEN w1 owning A; in v2 w2 owns one child of A (a hole carved out of w1's square)
    v1 = spec(1, [("w1", [A]), ("w2", [B])])
    v2 = spec(2, [("w1", [A]), ("w2", [B, A + "3"])])
    # WHEN planned THEN only the child moved: w1 keeps A (minus the hole) and loses A itself partly
    plan = plan_swap(v1, v2)
    kept = {k.worker_id: k for k in plan.kept}
    assert plan.moved_cells == (A + "3",)
    assert kept["w2"].gains == (A + "3",) and kept["w1"].losses == (A,) and kept["w1"].gains == ()


def test_hash_split_shares_move_by_overlapping_range() -> None:
    # GIVEN a hot cell split half and half between w1 and w2, then split at a quarter
    half, quarter = HASH_BUCKETS // 2, HASH_BUCKETS // 4
    v1 = spec(1, [("w1", [A], (0, half)), ("w2", [A], (half, HASH_BUCKETS))])
    v2 = spec(2, [("w1", [A], (0, quarter)), ("w2", [A], (quarter, HASH_BUCKETS))])
    # WHEN planned THEN w2's new share moved (part of it was w1's), w1's smaller share did not
    plan = plan_swap(v1, v2)
    assert plan.moved_cells == (f"{A}/{quarter}-{HASH_BUCKETS}",)
    assert {k.worker_id: k.losses for k in plan.kept}["w1"] == (f"{A}/0-{half}",)


def test_moving_the_catch_all_moves_it() -> None:
    # GIVEN the catch-all moving from w1 to w2 WHEN planned THEN it is a moved cell labelled '*'
    plan = plan_swap(spec(1, [("w2", [A])], catch_all="w1"), spec(2, [("w1", [A])], catch_all="w2"))
    assert plan.moved_cells == ("*", A)


def test_splitting_the_catch_all_by_entity_hash_moves_only_the_shares_that_change_worker() -> None:
    # GIVEN the catch-all whole on w1, then split half and half between w1 and a new w3
    half = HASH_BUCKETS // 2
    old = spec(1, [("w2", [A])], catch_all="w1")
    shares = (Partition(id="p9999", worker="w1", quadkeys=("",), load=0.0, hash_range=(0, half)),
              Partition(id="p9998", worker="w3", quadkeys=("",), load=0.0, hash_range=(half, HASH_BUCKETS)))
    new = Spec(version=2, max_load=10.0, partitions=(*old.partitions[:-1], *shares),
               workers=(*old.workers, Worker(id="w3", load=0.0, hash_key=shard_hash_key(2, 3))))
    # WHEN planned THEN only w3's half of the root moved; w1 lost that half and kept its own
    plan = plan_swap(old, new)
    assert plan.moved_cells == (f"*/{half}-{HASH_BUCKETS}",)
    assert plan.started == ("w3",)
    assert {k.worker_id: k.losses for k in plan.kept}["w1"] == ("*",)


def test_the_stored_plan_reads_back_without_the_specs() -> None:
    # GIVEN a carry plan stored as the control item WHEN read back THEN slot ids, counts and mode survive
    v1 = spec(1, [("w1", [A]), ("w2", [B]), ("w3", [C])])
    plan = plan_swap(v1, spec(2, [("w2", [A, B]), ("w4", [C])]))
    item = plan_item(plan, PlanStatus.STARTED, 123.0)
    back = plan_from_item(item)
    assert (item["status"], item["moved_cells"], item["gains"]) == ("started", 2, {"w2": 1, "w1": 0})
    assert isinstance(back, DeployPlan) and back.kept_ids == plan.kept_ids
    assert (back.started, back.stopped, back.mode, back.old_slots, back.new_slots) == (
        plan.started, plan.stopped, plan.mode, plan.old_slots, plan.new_slots)


# ---------------------------------------------------------------------------------------------------------------------
# Property: a point that changes worker lies in a moved cell (checked with the spec index the router uses)
# ---------------------------------------------------------------------------------------------------------------------

ROOT = "0231"
CELLS = [ROOT + a + b for a in "0123" for b in "0123"]  # 16 zoom-6 squares, some listed finer below


@st.composite
def two_specs(draw: st.DrawFn) -> tuple[Spec, Spec]:
    def one(version: int) -> Spec:
        rows: list[Row] = []
        for cell in draw(st.lists(st.sampled_from(CELLS), min_size=1, max_size=10, unique=True)):
            if draw(st.booleans()):
                rows.append((draw(st.sampled_from(["w1", "w2", "w3"])), [cell]))
            else:  # listed as children, maybe by two workers
                for d in "0123":
                    rows.append((draw(st.sampled_from(["w1", "w2", "w3"])), [cell + d]))
        return spec(version, rows, catch_all=draw(st.sampled_from(["w1", "w2", "w3"])))
    return one(1), one(2)


@settings(max_examples=60, deadline=None)
@given(two_specs())
def test_every_point_that_changes_worker_is_in_a_moved_cell(specs: tuple[Spec, Spec]) -> None:
    # GIVEN two random specs over the same area WHEN planned
    old, new = specs
    plan = plan_swap(old, new)
    moved = set(plan.moved_cells)
    # THEN each zoom-8 tile whose owner worker differs (by the router's index) lies in a moved entry of the new spec
    root = quadkey_to_tile(ROOT)
    n = 1 << (8 - root.z)
    xs, ys = (a.ravel() for a in np.meshgrid(np.arange(root.x * n, (root.x + 1) * n),
                                             np.arange(root.y * n, (root.y + 1) * n)))
    before = SpecIndex(old).locate_xy(xs, ys, 8)
    after = SpecIndex(new).locate_xy(xs, ys, 8)
    for x, y, i, j in zip(xs, ys, before, after, strict=True):
        was, now = old.partitions[int(i)], new.partitions[int(j)]
        if was.worker != now.worker:
            label = now.quadkeys[0] or "*"
            assert label in moved, f"{quadkey(Tile(int(x), int(y), 8))}: {was.worker} -> {now.worker}, {label} kept"
    # AND a spec against itself moves nothing
    assert plan_swap(new, new).moved_cells == ()
