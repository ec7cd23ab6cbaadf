"""The judge hands the original's autotune picks to the candidate's runner and names them."""

from __future__ import annotations

from typing import Any

from kernelband.evaluate.verified_timing import TimingRejected
from kernelband.profile.paired_autotune import differing_picks, share_picks
from kernelband.profile.paired_runners import OriginalRunnerError

PICKS = {"kernel": {"fingerprint": "f", "picks": [["(1,)", 2]], "configs": ["num_warps: 8"]}}


class Runners:
    """Replies per role and command, and the commands the judge sent."""

    def __init__(self, replies: dict[tuple[str, str], Any]) -> None:
        self.replies = replies
        self.sent: list[tuple[str, dict[str, Any]]] = []

    def ask(self, role: str, command: dict[str, Any]) -> tuple[dict[str, Any], float]:
        self.sent.append((role, command))
        reply = self.replies[(role, command["cmd"])]
        if isinstance(reply, Exception):
            raise reply
        return reply, 1.0


def test_the_originals_picks_go_to_the_candidate_and_the_pinned_kernels_are_named() -> None:
    runners = Runners({("original", "autotune_picks"): {"picks": PICKS},
                       ("candidate", "pin_autotune"): {"pinned": ["kernel"]}})
    assert share_picks(runners.ask) == ["unchanged autotuned kernels ran the original's configs: "
                                        "kernel num_warps: 8"]
    assert runners.sent[1] == ("candidate", {"cmd": "pin_autotune", "pins": PICKS})


def test_nothing_autotuned_sends_nothing_to_the_candidate() -> None:
    runners = Runners({("original", "autotune_picks"): {"picks": {}}})
    assert share_picks(runners.ask) == []
    assert [role for role, _ in runners.sent] == ["original"]


def test_a_runner_that_refuses_leaves_the_kernels_to_autotune_on_their_own() -> None:
    refused = Runners({("original", "autotune_picks"): OriginalRunnerError("original_runner_error", "no")})
    assert share_picks(refused.ask) == []
    rejected = Runners({("original", "autotune_picks"): {"picks": PICKS},
                        ("candidate", "pin_autotune"): TimingRejected("runner_error", "will not")})
    assert share_picks(rejected.ask)[0].startswith("autotune picks not taken")


def test_picks_that_differ_for_the_same_kernel_are_noted_and_others_are_not() -> None:
    other = {"kernel": {**PICKS["kernel"], "picks": [["(1,)", 0]], "configs": ["num_warps: 1"]},
             "changed": {"fingerprint": "g", "picks": [["(1,)", 0]]}}
    runners = Runners({("original", "autotune_picks"): {"picks": {**PICKS, "changed": {"fingerprint": "h"}}},
                       ("candidate", "autotune_picks"): {"picks": other}})
    notes = differing_picks(runners.ask)
    assert len(notes) == 1 and "kernel differ" in notes[0] and "num_warps: 1" in notes[0]
    same = Runners({("original", "autotune_picks"): {"picks": PICKS},
                    ("candidate", "autotune_picks"): {"picks": PICKS}})
    assert differing_picks(same.ask) == []
