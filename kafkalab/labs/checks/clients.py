"""Checks for lab 08 part 3, the clients: the producer's batches, the order records
land in when requests are retried, what a consumer's crash does with each commit
strategy, and the reliability checklist.

Every check works its answer out from what the notebook built: the partition's
files on the broker, the values in the log, the history checker's verdict on a
run (kafkalab.cluster.history).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kafkalab.cluster.history import History, check
from kafkalab.labs.checks import Verdict, answered, compare, verdict
from kafkalab.records.record_batch import iter_headers

__all__ = [
    "batches_in_log",
    "crash_outcome",
    "landing_order",
    "outcome",
    "reliability_checklist",
    "CHECKLIST",
]


def _batches(partition_dir: Path) -> list[int]:
    """The number of records of each batch in a partition directory, in log order."""
    counts = []
    for log_path in sorted(Path(partition_dir).glob("*.log")):
        for _, header in iter_headers(log_path.read_bytes()):
            counts.append(header.last_offset - header.base_offset + 1)
    return counts


def batches_in_log(answer: Any, partition_dir: Path) -> Verdict:
    """How many batches the producer's records made, counted in the broker's log.

    The rule (the teaching producer's RecordAccumulator): a batch starts with its
    61-byte header, and each record is counted as 21 bytes plus its key and value.
    A record that would take the open batch past `batch.size` starts a new one;
    `linger.ms` only decides when a batch that is not full goes out.
    """
    counts = _batches(partition_dir)
    sizes = ", ".join(str(n) for n in counts)
    return compare(
        answer,
        len(counts),
        what="the number of batches in the log",
        why=f"the broker's log holds batches of {sizes} records: a batch takes "
        "records until the next one would pass batch.size (61 bytes of header, "
        "21 + key + value per record)",
        hint="count how many records fit under batch.size: 61 bytes of batch header, "
        "then 21 bytes plus the value for each record; the record that does not "
        "fit opens the next batch, and the last batch goes out part full at flush()",
    )


def landing_order(
    answer: Any, log_values: Sequence[bytes], batches: Mapping[str, Sequence[bytes]]
) -> Verdict:
    """The order the batches sit in the log, each named by the letter it was sent as.

    `log_values`: the partition's values in offset order; `batches`: each batch's
    name and the values it was sent with. A batch refused and retried goes to the
    back of the log when later batches were already in flight and were appended.
    """
    name_of = {value: name for name, values in batches.items() for value in values}
    order: list[str] = []
    for value in log_values:
        name = name_of.get(bytes(value))
        if name is not None and name not in order:
            order.append(name)
    if not answered(answer):
        return compare(answer, order, what="the order", why="")
    sent = list(batches)
    if order == sent:
        why = (
            "the batches landed in the order they were sent: only one batch of the "
            "partition was in flight, or the broker refused the ones after the gap "
            "(OUT_OF_ORDER_SEQUENCE_NUMBER) so the producer resent them in order"
        )
    else:
        why = (
            "the refused batch was retried after the batches behind it were already "
            "in flight and appended: without idempotence the broker has no sequence "
            "numbers to notice the gap, so the retry lands at the end"
        )
    return compare(
        [str(x) for x in answer] if isinstance(answer, list | tuple) else answer,
        order,
        what="the order of the batches in the log",
        why=why,
        hint="the broker appends each Produce request as it comes; which requests were "
        "already on the wire when the first one was refused, and does the broker know "
        "that a batch is missing in front of them (enable.idempotence)?",
    )


OUTCOMES = ("lost", "duplicated", "both", "neither")


def outcome(history: History) -> str:
    result = check(history)
    lost, dup = bool(result.lost), bool(result.duplicated_committed or result.duplicated)
    return {(True, True): "both", (True, False): "lost", (False, True): "duplicated"}.get(
        (lost, dup), "neither"
    )


def crash_outcome(answer: Any, history: History) -> Verdict:
    """What the history checker finds after a consumer app crashed and restarted:
    input records `"lost"` (never processed), `"duplicated"` (processed twice),
    `"both"` or `"neither"`.

    The rule: after a restart the consumer starts at the committed offset. A
    crash between committing and processing loses the records between the two; a
    crash between processing and committing processes them again.
    """
    if answered(answer) and answer not in OUTCOMES:
        return Verdict(False, f"answer one of {', '.join(map(repr, OUTCOMES))}, not {answer!r}")
    expected = outcome(history)
    result = check(history)
    evidence = (
        f"{len(result.lost)} inputs without an output, "
        f"{len(result.duplicated_committed)} with two or more"
    )
    because = {
        "lost": "the committed offset had moved past records the app had not yet processed "
        "when it crashed, so the restarted app skipped them",
        "duplicated": "the committed offset was behind records the app had already processed, "
        "so the restarted app processed them again",
        "both": "some records were committed before they were processed, others processed "
        "before they were committed",
        "neither": "the committed offset was exactly where the processing stopped",
    }[expected]
    return compare(
        answer,
        expected,
        what="the checker's verdict",
        why=f"{evidence}: {because}",
        hint="the restarted consumer starts at the last committed offset. Was that "
        "offset past records the app had not yet processed (they are skipped), "
        "or before records it had already written out (they are done again)?",
    )


#: The reliability checklist: each setting, the value that loses nothing, and the
#: run (a key of `runs`) that shows what the other values do.
CHECKLIST: dict[str, tuple[Any, str, str]] = {
    "acks": (
        "all",
        "acks=1",
        "acks=1 answers once the leader alone has the record; if it dies before the "
        "followers copy it, a follower without it becomes leader",
    ),
    "min.insync.replicas": (
        2,
        "unclean",
        "with min.insync.replicas=1, acks=all is satisfied by an ISR of the leader alone: "
        "acknowledged records then live on one broker",
    ),
    "unclean.leader.election.enable": (
        False,
        "unclean",
        "an unclean election makes a replica outside the ISR leader, and it lacks what "
        "the ISR acknowledged",
    ),
    "enable.idempotence": (
        True,
        "no idempotence",
        "without producer ids and sequence numbers a retry of a request that was written "
        "but not answered is written again",
    ),
    "commit": (
        "after processing",
        "auto commit",
        "a commit before the processing is done (by hand, or by the auto-commit timer while "
        "a batch is still being worked on) makes a restarted consumer skip what was "
        "committed but not processed",
    ),
}

_COMMITS = ("before processing", "after processing", "auto")


def _same(setting: str, answer: Any, safe: Any) -> bool:
    if setting == "acks":
        return str(answer).lower() in ("all", "-1")
    if setting == "min.insync.replicas":
        return isinstance(answer, int) and 2 <= answer <= 3
    if setting == "commit":
        return answer == safe
    return answer is safe or (isinstance(answer, str) and answer.lower() == str(safe).lower())


def reliability_checklist(answer: Any, runs: Mapping[str, History], replicas: int = 3) -> Verdict:
    """Settings (a dict) that lose no acknowledged record on a topic with `replicas`
    replicas, write nothing twice on a retry, and leave no input unprocessed after
    a consumer crash.

    Each setting is judged by its rule, with the evidence of the run on the live
    cluster that broke it (`runs`: the histories, named as in CHECKLIST).
    """
    if not answered(answer):
        return compare(answer, None, what="", why="")
    if not isinstance(answer, Mapping):
        return Verdict(False, f"answer a dict of settings, one per line of {list(CHECKLIST)}")
    missing = [s for s in CHECKLIST if s not in answer]
    if missing:
        return Verdict(False, f"the checklist also has {', '.join(missing)}: give a value for each")
    if answer["commit"] not in _COMMITS:
        return Verdict(False, f"commit is one of {', '.join(map(repr, _COMMITS))}")
    wrong = []
    for setting, (safe, run, rule) in CHECKLIST.items():
        if setting == "min.insync.replicas" and isinstance(answer[setting], int):
            if answer[setting] > replicas:
                wrong.append(
                    f"min.insync.replicas={answer[setting]} is more than the {replicas} "
                    "replicas: every acks=all write would be refused"
                )
                continue
        if not _same(setting, answer[setting], safe):
            result = check(runs[run])
            inputs = [item for item in result.lost if "input" in item]
            if inputs:
                shown = f"{len(inputs)} inputs never processed"
            elif result.lost:
                shown = f"{len(result.lost)} acknowledged records lost"
            else:
                twice = len(result.duplicated) + len(result.duplicated_committed)
                shown = f"{twice} records written twice"
            wrong.append(f"{setting}={answer[setting]!r}: {rule} (the '{run}' run: {shown})")
    return verdict(
        not wrong,
        "acks=all with min.insync.replicas=2 of 3 makes an acknowledgement mean two "
        "copies; clean elections only pick replicas that have them; idempotence drops "
        "the retries the broker already wrote; committing after processing means a "
        "crash can only repeat work, never skip it (transactions, lab 05, remove the "
        "repeats too)",
        "; ".join(wrong),
    )
