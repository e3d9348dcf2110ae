"""Checks for lab 08 (inside the broker): the request path, the purgatory, zero copy.

Each check works its answer out from what the notebook built: a broker's socket
server and the answers it sent, a ReplicaManager stepped by hand, a real log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kafkalab.labs.checks import UNANSWERED, Verdict, answered, compare, run_student_code

__all__ = [
    "answer_order",
    "channel_bound",
    "delayed_fetch_outcomes",
    "delayed_produce_completion",
    "sendfile_range",
]


def answer_order(answer: Sequence[int], arrivals: Callable[[], Sequence[int]]) -> Verdict:
    """The order in which the answers (their correlation ids) reach the client.

    `arrivals()` sends the notebook's requests to the live broker and returns the
    correlation ids in the order their answers arrived. The rule: a connection's
    answers come back in the order its requests were sent (its processor reads the
    next request only once the previous one is answered), even when the first one
    waits in a purgatory; another connection is not held up by that.
    """
    if not answered(answer):
        return UNANSWERED
    observed = list(arrivals())
    if sorted(answer) != sorted(observed):
        return Verdict(
            False,
            f"your order {list(answer)!r} does not name each correlation id sent "
            f"exactly once ({sorted(observed)!r})",
        )
    return compare(
        list(answer),
        observed,
        what="the order of the answers",
        why=(
            "on one connection the broker answers in request order, so a request queued "
            "behind a parked fetch waits for it; the other connection's requests go "
            "through the channel meanwhile"
        ),
        hint=(
            "one connection is answered strictly in the order it sent; a fetch with "
            "nothing to return waits up to max_wait_ms, and whatever that connection sent "
            "after it waits too. Other connections have their own processors"
        ),
    )


def channel_bound(bound: Callable[[int, int], int], runs: Iterable[Mapping[str, Any]]) -> Verdict:
    """The most requests the RequestChannel can hold, as a function of the number
    of connections and queued.max.requests.

    `runs`: the notebook's bursts, each with `connections` and the broker's
    `server` (its SocketServer, whose channel has `maxsize` = queued.max.requests
    and whose `channel_peak` is the deepest the channel got). The rule: a
    connection has at most one request in the channel (its processor waits for the
    answer before it reads the next), and a full channel makes processors wait, so
    the bound is min(connections, queued.max.requests); every burst's peak stays
    within it.
    """
    cases = []
    for run in runs:
        server = run["server"]
        cases.append((run["connections"], server.channel.maxsize, server.channel_peak))
    # The same rule on settings around the bursts' (no live peak for these).
    connections = {c for c, _, _ in cases}
    limits = {q for _, q, _ in cases}
    extra = [(c, q, None) for c in sorted(connections) for q in (1, max(connections) * 4)]
    extra += [(1, q, None) for q in sorted(limits)]
    for c, q, peak in cases + extra:
        if peak is not None and peak > min(c, q):
            return Verdict(
                False,
                f"a burst on {c} connections with queued.max.requests={q} peaked at "
                f"{peak}: the broker broke the rule this check knows (a bug to report)",
            )
        got, failed = run_student_code(bound, c, q)
        if failed is not None:
            return failed
        expected = min(c, q)
        if got != expected:
            too_high = got > expected
            return Verdict(
                False,
                f"with {c} connections and queued.max.requests={q} your bound is {got!r}: "
                + (
                    "too high; "
                    + (
                        "a processor reads a connection's next request only after the "
                        "previous one is answered, so each connection has at most one "
                        "request in the channel"
                        if got > c
                        else "a full channel makes the processor that wants to add "
                        "one wait (the queue is bounded)"
                    )
                    if too_high
                    else "too low: nothing stops every connection from having its one "
                    "request waiting while the channel has room"
                ),
            )
    peaks = ", ".join(f"{c} connections, limit {q}: peak {p}" for c, q, p in cases)
    return Verdict(
        True,
        "at most min(connections, queued.max.requests) requests wait in the channel: "
        f"one per muted connection, and no more than the bounded queue holds ({peaks})",
    )


def delayed_produce_completion(
    completed_by: Any, hw_then: Any, replay: Callable[[], Mapping[str, Any]]
) -> Verdict:
    """Which fetch completes an acks=all produce, and the HW when it does.

    `replay()` builds the notebook's leader and followers afresh, parks the
    produce in the ReplicaManager's purgatory and runs the scripted fetches; it
    returns `{"completed_by": step, "hw": high watermark then}` (step None if none
    did). The rule: the produce completes once the HW reaches its last offset + 1;
    the HW is the smallest LEO over the ISR, and the leader learns a follower's LEO
    from that follower's next fetch offset. Replicas outside the ISR do not count.
    """
    if not answered(completed_by, hw_then):
        return UNANSWERED
    outcome = replay()
    step = compare(
        completed_by,
        outcome["completed_by"],
        what="the fetch that completes the produce",
        why=(
            "the produce waits until every ISR member has fetched from an offset past "
            "its records: the leader learns what a follower holds from its next fetch"
        ),
        hint=(
            "a follower that just received the records has not told the leader yet: "
            "the leader learns its LEO from its next fetch offset. And only ISR "
            "members count"
        ),
    )
    if not step:
        return step
    return compare(
        hw_then,
        outcome["hw"],
        what="the high watermark when it completes",
        why="the smallest LEO over the ISR, as the leader knows them",
        hint="the HW is the smallest LEO the leader knows over the ISR, not over all replicas",
    )


def delayed_fetch_outcomes(
    answer: Mapping[int, str], play: Callable[[int], str], events: Sequence[str]
) -> Verdict:
    """For each fetch.min.bytes the notebook asks about: what answers the fetch.

    `play(min_bytes)` sets the partition up afresh, parks a consumer's fetch and
    runs the events in order, returning the first that completed it (or
    "at once", or "timeout" when max_wait_ms ran out first). The rule: a fetch
    returns once at least min_bytes are readable; a consumer reads only below the
    high watermark, so an append alone does not count until the followers have it.
    """
    if not answered(answer):
        return UNANSWERED
    if not isinstance(answer, Mapping):
        return Verdict(False, "answer with a dict: {min_bytes: what answers the fetch}")
    choices = ["at once", *events, "timeout"]
    for said in answer.values():
        if said not in choices:
            return Verdict(False, f"{said!r} is not one of {choices!r}")
    expected = {}
    for min_bytes in answer:
        expected[min_bytes] = play(min_bytes)
    for min_bytes, said in answer.items():
        if said != expected[min_bytes]:
            return Verdict(
                False,
                f"with fetch.min.bytes={min_bytes} it is not {said!r}: a fetch is answered "
                "as soon as min_bytes are readable, else at max_wait_ms; a consumer's "
                "readable bytes end at the high watermark, which moves only when the "
                "leader learns the followers have the records: from their next fetch",
            )
    return Verdict(
        True,
        "; ".join(f"min_bytes={m}: {e}" for m, e in expected.items())
        + " (readable bytes for a consumer are those below the HW)",
    )


def sendfile_range(answer: Any, log: Any, fetch_offset: int, max_bytes: int) -> Verdict:
    """The byte range of the segment file a consumer's fetch sends with sendfile:
    `(position, size)`.

    Worked out from the live log (UnifiedLog.read as the broker calls it for a
    consumer: up to the high watermark, at least one whole batch). The rule: the
    range starts at the batch holding `fetch_offset` (the offset index, then a
    scan), is at most `max_bytes` long (but the whole first batch even if larger),
    and ends where the high watermark's batch begins; it may end inside a batch.
    """
    if not answered(answer):
        return UNANSWERED
    info = log.read(fetch_offset, max_bytes, max_offset=log.high_watermark, min_one_message=True)
    if info.records is None:
        expected = None
    else:
        expected = (info.records.start, info.records.size_in_bytes())
    if answered(answer) and not (isinstance(answer, tuple) and len(answer) == 2):
        return Verdict(False, "answer with a tuple (position, size) in bytes")
    if expected is not None and answer[0] != expected[0]:
        return Verdict(
            False,
            f"the range does not start at byte {answer[0]!r}: it starts where the batch "
            f"holding offset {fetch_offset} starts (a fetch sends whole batches from the "
            "front; the client skips records before its offset)",
        )
    return compare(
        answer,
        expected,
        what="the (position, size) sendfile sends",
        why=(
            f"from the batch holding offset {fetch_offset}, max_bytes={max_bytes} (at least "
            "the first whole batch), and never past the batch where the HW starts"
        ),
        hint=(
            "the size is max_bytes, or the whole first batch if that is larger, cut at "
            "the position where the high watermark's batch starts: a consumer reads "
            "nothing at or past the HW, and the range may end inside a batch"
        ),
    )
