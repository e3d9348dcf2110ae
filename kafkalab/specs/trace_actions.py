"""Naming the steps of a trace: which spec action led from one state to the next.

The built-in checker (like TLC) records every step only as `Next`; Apalache
names the action. `infer_action` names a KafkaReplication step from what
changed (each action changes a different set of variables), and
`action_label` gives the name to show for any step of a trace.
"""

from __future__ import annotations

from kafkalab.specs.trace import Trace

#: The spec's value for "no leader".
NONE = "none"

#: The actions of KafkaRaft's Next, with their number of voter parameters: a
#: KafkaRaft step is named by the action instance that takes it
#: (kafkalab.specs.runner.follow_counterexample).
KRAFT_ACTIONS = {
    "Timeout": 1,
    "RequestVote": 2,
    "BeginQuorumEpoch": 2,
    "Resign": 1,
    "ClientWrite": 1,
    "Fetch": 1,
    "Restart": 1,
}


def infer_action(before: dict, after: dict) -> tuple[str, tuple]:
    """Which KafkaReplication action leads from `before` to `after` (each action
    changes a different set of variables)."""
    replicas = sorted(before["log"])

    def changed(var: str) -> list[str]:
        return [r for r in replicas if before[var][r] != after[var][r]]

    bq, aq = before["quorum"], after["quorum"]
    if after["crashes"] > before["crashes"]:
        local = [r for v in ("epoch", "leader", "log", "hw", "cache", "isr") for r in changed(v)]
        gone = sorted(set(bq["isr"]) - set(aq["isr"]))
        return "Crash", ((local or gone or [""])[0],)  # "": a crash that changed nothing
    for r in changed("epoch"):
        return ("BecomeLeader" if after["leader"][r] == r else "BecomeFollower"), (r,)
    if after["nextId"] > before["nextId"]:
        return "LeaderWrite", (changed("log")[0],)
    if aq["isr"] != bq["isr"] and aq["epoch"] == bq["epoch"]:
        (f,) = set(aq["isr"]) ^ set(bq["isr"])
        if f in aq["isr"]:  # only the leader adds (AlterPartition)
            return "LeaderExpandIsr", (aq["leader"], f)
        if changed("isr"):  # the leader's own view shrank with the controller's
            return "LeaderShrinkIsr", (changed("isr")[0], f)
        return "ControllerFence", (f,)
    if changed("isr") and aq == bq:
        return "LeaderLearnsIsr", (changed("isr")[0],)
    leaders_hw = [r for r in changed("hw") if after["leader"][r] == r]
    if leaders_hw:
        return "LeaderIncreaseHw", (leaders_hw[0],)
    if changed("log") or changed("hw"):
        return "FollowerFetch", ((changed("log") or changed("hw"))[0],)
    if aq["epoch"] != bq["epoch"] and aq["leader"] != NONE:
        return "ControllerElect", (aq["leader"],)
    if aq != bq:
        gone = set(bq["isr"]) - set(aq["isr"])
        return "ControllerFence", (gone.pop() if gone else bq["leader"],)
    return "Stutter", ()


def action_label(trace: Trace, step: int) -> str | None:
    """The action that led to `step` (None for the initial state): the one the
    checker recorded, or, where it recorded only `Next`, the one inferred."""
    action = trace.actions[step] if step < len(trace.actions) else None
    if step > 0 and action in (None, "Next"):
        name, args = infer_action(trace.states[step - 1], trace.states[step])
        action = f"{name}({', '.join(args)})"
    return action
