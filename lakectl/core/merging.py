"""The verbs that move a branch to a commit made from others (merge, revert, cherry-pick) or drop
its staged changes (reset)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakectl.core import protection
from lakectl.core.events import Event, Verb, announced, making
from lakectl.core.graph.commits import CommitRequest, Moved, merge_base
from lakectl.core.graph.refs import new_staging_token
from lakectl.core.graph.tree import Update
from lakectl.core.journal import replayorder
from lakectl.core.kv.retry import AGAIN, STAGING_TOKEN, Again, retry
from lakectl.core.lake import Lake, branch_target, default_committer, now, write_target
from lakectl.core.limits import check_metadata, check_name
from lakectl.core.model import Branch, BranchId, Commit, MetaRangeId, RepositoryId, ResetKind
from lakectl.core.porcelain import check_message, commit_record, resolve, stage_updates
from lakectl.core.protection import Move
from lakectl.core.uri import check_path
from lakectl.errors import DirtyBranch, InvalidArgument, MergeConflict, PredicateFailed

if TYPE_CHECKING:
    from lakectl.core import tablemerge
    from lakectl.core.graph.merge import MergePlan
    from lakectl.core.tables import deltamerge


@dataclass(frozen=True, slots=True)
class MergeResult:
    commit: Commit
    changed: bool
    """False when there was nothing to merge (the destination already had the source)."""


def merge(
    lake: Lake,
    repo: str,
    source: str,
    dest: str,
    strategies: Sequence[str] = (),
    message: str | None = None,
    committer: str | None = None,
    metadata: Mapping[str, str] | None = None,
    squash: bool = False,
    through_pull: bool = False,
    rows_runner: tablemerge.UnitRunner | None = None,
    onto: str | None = None,
) -> MergeResult:
    """Three-way merge of ``source`` into the destination branch, as a merge commit; with
    ``squash`` (lakeFS's ``squash_merge``), as a commit whose one parent is the destination's.
    A destination whose protection rule gates pull requests takes only merges made
    ``through_pull`` (by :func:`lakectl.core.workflow.pulls.merge_pull`, which checked the gate), and
    with ``onto`` only onto that head of the destination (``PredicateFailed`` once it moved):
    the one whose actions the gate found, which the merge runs.
    ``rows_runner`` runs the ``rows`` strategy's merges (in-process by default; on Spark with
    :func:`lakectl.sparkjobs.tablemerge.runner`)."""
    from lakectl.core.graph.merge import StrategyRules, plan_merge

    rid, bid = branch_target(lake, repo, dest)
    # What was given is checked first: a merge with nothing to do refuses bad input as well.
    check_message(message or "-")
    check_name(committer or "", "committer")
    check_metadata(metadata or {}, "commit metadata")
    protection.guard(lake.kv, rid, bid, Move.MERGE, through_pull)
    row_rules: list[tablemerge.RowRule] = []
    if any(s == "rows" or "=rows" in s for s in strategies):
        from lakectl.core import tablemerge

        def declared() -> dict[str, tuple[str, ...]]:  # the source's declarations win
            from lakectl.core.tables.declared import in_tree

            at_dest = lake.refs.get_commit(rid, lake.refs.get_branch(rid, bid).commit_id).meta_range_id
            at_source = resolve(lake, repo, source).commit.meta_range_id
            return {**in_tree(lake, at_dest, dest), **in_tree(lake, at_source, source)}

        row_rules, strategies = tablemerge.split_strategies(strategies, declared)
    rules = StrategyRules.parse(strategies)
    src = resolve(lake, repo, source).commit
    branch = lake.refs.get_branch(rid, bid)
    if onto is not None and branch.commit_id != onto:
        raise PredicateFailed(f"branch {dest!r} moved since the merge was checked: try again")
    if lake.staging.is_dirty(rid, branch):
        raise DirtyBranch(f"branch {dest!r} has uncommitted changes; commit or reset them first")
    dst = lake.refs.get_commit(rid, branch.commit_id)
    base = merge_base(lake.refs, rid, src, dst)
    if base is not None and base.id == src.id:
        return MergeResult(dst, changed=False)
    base_mid = base.meta_range_id if base is not None else lake.trees.empty()
    plan = plan_merge(lake.trees, base_mid, src.meta_range_id, dst.meta_range_id, rules)
    noted = dict(metadata or {})
    what = f"merge of {source!r} into {dest!r}"
    mids = (base_mid, src.meta_range_id, dst.meta_range_id)
    about = {"source": source, "sourceCommit": src.id}
    tables = _delta_tables(lake, mids, plan, about, what, (row_rules, rows_runner))
    noted.update(tables.note() if tables is not None else {})
    if row_rules:
        from lakectl.core import tablemerge

        skip = tables.roots if tables is not None else ()
        noted.update(tablemerge.settle(lake, *mids, plan, row_rules, rows_runner, what, skip=skip))
    if plan.conflicts:
        raise MergeConflict(f"{what} has {len(plan.conflicts)} conflicting path(s)", paths=plan.conflicts)
    return _commit_merge(lake, rid, bid, (source, src), (dest, dst), plan, message, committer, noted, squash)


def _delta_tables(
    lake: Lake,
    mids: tuple[MetaRangeId, MetaRangeId, MetaRangeId],
    plan: MergePlan,
    about: dict[str, str],
    what: str,
    rows: tuple[Sequence[tablemerge.RowRule], tablemerge.UnitRunner | None],
) -> deltamerge.Settled | None:
    """The Delta tables both sides wrote, their source versions replayed after the destination's
    (:func:`lakectl.core.tables.deltamerge.settle`); ``MergeConflict`` with each table's conflicts as
    data (``details.delta``) when one cannot be."""
    from lakectl.core.tables import deltalog

    if not any(deltalog.table_root(p) is not None for p in plan.conflicts):
        return None  # no Delta table written on both sides: nothing of deltalake's to import
    from lakectl.core.tables import deltamerge

    settled = deltamerge.settle(lake, *mids, plan, about, deltamerge.RowsRules(*rows))
    if settled.conflicts:
        paths = sorted({*plan.conflicts, *(f"{root}_delta_log/" for root in settled.conflicts)})
        raise MergeConflict(
            f"{what} has {len(paths)} conflicting path(s), {len(settled.conflicts)} Delta table(s) "
            "written on both sides in ways that cannot both stand",
            paths=paths,
            delta=settled.conflicts,
        )
    return settled


def _commit_merge(
    lake: Lake,
    rid: RepositoryId,
    bid: BranchId,
    source_commit: tuple[str, Commit],
    dest_commit: tuple[str, Commit],
    plan: MergePlan,
    message: str | None,
    committer: str | None,
    noted: dict[str, str],
    squash: bool,
) -> MergeResult:
    """Commit a merge's plan (conflict-free) onto the destination's head, announced as the
    merge of the source (each: the ref as given, and its commit)."""
    (source, src), (dest, dst) = source_commit, dest_commit
    req = CommitRequest(
        message=check_message(message or f"Merge '{source}' into '{dest}'"),
        committer=check_name(committer or default_committer(), "committer"),
        metadata=check_metadata(noted, "commit metadata"),
        creation_date=now(),
    )
    parents = [dst] if squash else [dst, src]
    event = Event(
        Verb.MERGE,
        rid,
        bid,
        source_ref=source,
        commit_message=req.message,
        committer=req.committer,
        metadata=req.metadata,
        payload={
            "source_commit_id": src.id,
            "destination_commit_id": dst.id,
            "squash": squash,
            "creation_date": req.creation_date,
        },
    )
    with announced(lake.events, event):
        moved = Moved(making=making(event))
        new = lake.committer.commit_tree(rid, bid, parents, plan.updates, req, dst.id, moved)
        made = {
            **event.payload,
            "commit": commit_record(new),
            **replayorder.moved(moved.branch, moved.dropped),
        }
    lake.events.after(event.done(commit_id=new.id, payload=made))
    return MergeResult(new, changed=True)


def _apply_commit_change(
    lake: Lake,
    repo: str,
    branch: str,
    ref: str,
    parent_number: int,
    revert: bool,
    committer: str | None,
) -> Commit:
    from lakectl.core.graph.merge import StrategyRules, plan_merge

    # A revert or cherry-pick is a merge of one commit's change: what a rule lets a merge do.
    rid, bid = branch_target(lake, repo, branch)
    protection.guard(lake.kv, rid, bid, Move.MERGE)
    target = resolve(lake, repo, ref).commit
    if len(target.parents) > 1 and parent_number < 1:
        raise InvalidArgument(
            f"commit {target.id[:12]} is a merge commit: give -m/--parent-number "
            f"(1..{len(target.parents)}) to say which parent the change is relative to"
        )
    number = parent_number or 1
    if target.parents and not 1 <= number <= len(target.parents):
        raise InvalidArgument(f"commit {target.id[:12]} has no parent number {number}")
    parent_mid = (
        lake.refs.get_commit(rid, target.parents[number - 1]).meta_range_id
        if target.parents
        else lake.trees.empty()
    )
    head_branch = lake.refs.get_branch(rid, bid)
    if lake.staging.is_dirty(rid, head_branch):
        raise DirtyBranch(f"branch {branch!r} has uncommitted changes; commit or reset them first")
    head = lake.refs.get_commit(rid, head_branch.commit_id)
    # Revert = merge the parent's tree with the commit as base; cherry-pick the reverse.
    base, source = (target.meta_range_id, parent_mid) if revert else (parent_mid, target.meta_range_id)
    plan = plan_merge(lake.trees, base, source, head.meta_range_id, StrategyRules())
    verb = "revert" if revert else "cherry-pick"
    if plan.conflicts:
        raise MergeConflict(
            f"{verb} of {target.id[:12]} conflicts on {len(plan.conflicts)} path(s)",
            paths=plan.conflicts,
        )
    message = f'Revert "{target.message}"' if revert else target.message
    req = CommitRequest(
        message=message,
        committer=committer or default_committer(),
        metadata={} if revert else dict(target.metadata),
        creation_date=now(),
    )
    verb_of = Verb.REVERT if revert else Verb.CHERRY_PICK
    event = Event(
        verb_of,
        rid,
        bid,
        source_ref=ref,
        commit_message=req.message,
        committer=req.committer,
        payload={"creation_date": req.creation_date},
    )
    with announced(lake.events, event):
        moved = Moved(making=making(event))
        new = lake.committer.commit_tree(rid, bid, [head], plan.updates, req, head.id, moved)
        made = {"commit": commit_record(new), **replayorder.moved(moved.branch, moved.dropped)}
    lake.events.after(event.done(commit_id=new.id, payload=made))
    return new


def revert(
    lake: Lake,
    repo: str,
    branch: str,
    ref: str,
    parent_number: int = 0,
    committer: str | None = None,
) -> Commit:
    return _apply_commit_change(lake, repo, branch, ref, parent_number, True, committer)


def cherry_pick(
    lake: Lake,
    repo: str,
    branch: str,
    ref: str,
    parent_number: int = 0,
    committer: str | None = None,
) -> Commit:

    return _apply_commit_change(lake, repo, branch, ref, parent_number, False, committer)


def reset(lake: Lake, repo: str, branch: str, kind: ResetKind = ResetKind.ALL, path: str = "") -> int:
    """Discard uncommitted changes (all, under a prefix, or one object); returns how many."""
    rid, bid = write_target(lake, repo, branch, Move.STAGE)
    if kind is ResetKind.ALL:

        def attempt() -> int | Again:
            b, raw = lake.refs.get_branch_raw(rid, bid)
            n = sum(1 for _ in lake.staging.changes(rid, b))
            payload = {"kind": kind.value, "staging_token": b.staging_token}
            event = Event(Verb.RESET, rid, bid, payload=payload)
            lake.events.before(event)
            fresh = Branch(b.name, b.commit_id, new_staging_token())
            try:
                lake.refs.swap_branch(rid, raw, fresh)
            except PredicateFailed:
                return AGAIN
            lake.events.after(event.done(payload={**event.payload, **replayorder.moved(fresh, b.tokens)}))
            lake.staging.drop_tokens(rid, b.tokens)
            return n

        return retry(STAGING_TOKEN, attempt, f"could not reset branch {branch!r}: it kept changing")
    check_path(path, allow_empty=kind is ResetKind.PREFIX)
    b = lake.refs.get_branch(rid, bid)
    if kind is ResetKind.OBJECT:
        changed = [c for c in lake.staging.changes(rid, b, path) if c.path == path]
    else:
        changed = list(lake.staging.changes(rid, b, path))
    # Sealed tokens are immutable (a commit may be reading them): restage committed values.
    updates: list[Update] = [(c.path, c.old) for c in changed]
    if updates:
        stage_updates(lake, rid, bid, updates, Verb.RESET)
    return len(updates)
