"""Policy state: everything a policy needs between calls, serializable to JSON."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kernelband.bandit.types import Decision, FrontierEntry, PolicyStateError

STATE_VERSION = 1
_FROM_DIGITS = bytes.maketrans(b"0123456789", bytes(range(10)))


def rng_to_json(rng: np.random.Generator) -> dict[str, Any]:
    """The bit generator state with its 128-bit integers as strings (JSON readers lose them)."""
    raw = rng.bit_generator.state
    if raw.get("bit_generator") != "PCG64":
        raise PolicyStateError("kernelband: only the PCG64 bit generator can be serialized")
    return {
        "bit_generator": "PCG64",
        "state": str(raw["state"]["state"]),
        "inc": str(raw["state"]["inc"]),
        "has_uint32": int(raw["has_uint32"]),
        "uinteger": int(raw["uinteger"]),
    }


def rng_from_json(data: dict[str, Any]) -> np.random.Generator:
    """Rebuild a Generator exactly where `rng_to_json` left it."""
    return _generator_at(np.random.PCG64(), data)


def _generator_at(bit_generator: np.random.PCG64, data: dict[str, Any]) -> np.random.Generator:
    """A Generator over `bit_generator`, set to the state `rng_to_json` wrote."""
    bit_generator.state = {
        "bit_generator": "PCG64",
        "state": {"state": int(data["state"]), "inc": int(data["inc"])},
        "has_uint32": int(data["has_uint32"]),
        "uinteger": int(data["uinteger"]),
    }
    return np.random.Generator(bit_generator)


_REUSABLE = threading.local()


def rng_restore(data: dict[str, Any]) -> np.random.Generator:
    """`rng_from_json` on this thread's one reusable bit generator: no fresh seeding per call.

    The generator is valid until the next call on the same thread; `Policy.select` and
    `Policy.update` draw from it, then store its state with `rng_to_json`, before returning.
    """
    bit_generator = getattr(_REUSABLE, "pcg64", None)
    if bit_generator is None:
        bit_generator = _REUSABLE.pcg64 = np.random.PCG64(0)
    return _generator_at(bit_generator, data)


def parse_labels(value: Any) -> list[int]:
    """Cluster labels: a list, or a string of one digit per frontier entry (how track rows
    store them while every label is 0-9); the string is decoded in C."""
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return list(value.encode("ascii").translate(_FROM_DIGITS))
    return [int(v) for v in value]


@dataclass
class PolicyState:
    """Mutable bookkeeping of one bandit track; policies return fresh copies, never mutate input."""

    policy: str
    seed: int
    rng: dict[str, Any]
    frontier: list[FrontierEntry]
    arm_n: list[list[float]]  # [cluster][strategy] pull counts, starting at 1 (paper's prior)
    arm_mu: list[list[float]]  # [cluster][strategy] mean rewards, starting at 0.5
    t: int = 0  # completed updates
    labels: list[int] = field(default_factory=list)  # cluster of each frontier entry
    n_clusters: int = 1
    centroids: list[list[float]] = field(default_factory=list)  # z-space, one per cluster
    z_mean: list[float] = field(default_factory=list)
    z_std: list[float] = field(default_factory=list)
    since_recluster: int = 0  # the tau counter: frontier additions since the last clustering
    pending: dict[str, Decision] = field(default_factory=dict)
    next_decision: int = 0
    prior_buffer: list[list[float]] = field(default_factory=list)  # [h0, h1, h2, s, success]
    prior_coef: list[float] = field(default_factory=list)  # fitted logistic model, [bias, w...]
    signed: list[str] = field(default_factory=list)  # kernels that served as a cluster representative
    prompts: dict[str, list[int]] = field(default_factory=dict)  # kernel -> prompts issued per strategy
    # Values derived from the frontier and labels (`frontier_index`), shared by copies and
    # checked against them before use; never serialized, never compared.
    derived: Any = field(default=None, compare=False, repr=False)

    def copy(self) -> PolicyState:
        """A copy whose containers can be changed without touching this state.

        Built by one constructor call with every field named (`dataclasses.replace` looked
        each field up again first); a constructed state keeps its attributes in the layout
        Python's attribute access is fastest on, which a copy through `__dict__` gave up."""
        new = self.copy_without_frontier()
        new.frontier, new.labels = list(self.frontier), list(self.labels)
        return new

    def successor(self) -> PolicyState:
        """`copy` for the state a policy returns: the same frontier and labels lists, which a
        policy never changes in place (an update that adds an entry builds new ones), so the
        input state is left as it was; the other containers are its own. A selection then
        copies nothing whose size grows with the frontier."""
        new = self.copy_without_frontier()
        new.frontier, new.labels = self.frontier, self.labels
        return new

    def copy_without_frontier(self) -> PolicyState:
        """`copy` with empty frontier and labels, for a caller that sets them."""
        return PolicyState(
            policy=self.policy, seed=self.seed, rng=dict(self.rng), frontier=[],
            arm_n=[list(row) for row in self.arm_n], arm_mu=[list(row) for row in self.arm_mu],
            t=self.t, labels=[], n_clusters=self.n_clusters,
            centroids=[list(c) for c in self.centroids], z_mean=list(self.z_mean),
            z_std=list(self.z_std), since_recluster=self.since_recluster,
            pending=dict(self.pending), next_decision=self.next_decision,
            prior_buffer=list(self.prior_buffer), prior_coef=list(self.prior_coef),
            signed=list(self.signed), prompts={k: list(v) for k, v in self.prompts.items()},
            derived=self.derived,
        )

    def entry(self, kernel_id: str) -> FrontierEntry:
        """The frontier entry with this id."""
        for item in self.frontier:
            if item.kernel_id == kernel_id:
                return item
        raise PolicyStateError(f"kernelband: kernel {kernel_id!r} is not in the frontier")

    def best(self) -> FrontierEntry:
        """The fastest kernel of the frontier (the first one on ties)."""
        return min(self.frontier, key=lambda e: e.time_ms)

    def pending_counts(self) -> dict[tuple[int, str | None], int]:
        """How many pulls are in flight per (cluster, strategy)."""
        counts: dict[tuple[int, str | None], int] = {}
        for d in self.pending.values():
            counts[(d.cluster, d.strategy)] = counts.get((d.cluster, d.strategy), 0) + 1
        return counts

    def to_dict(self, frontier: bool = True) -> dict[str, Any]:
        """Plain JSON-ready data; frontier=False leaves the (append-only) frontier out, for
        stores that keep it apart and pass it back to from_dict."""
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "policy": self.policy,
            "seed": self.seed,
            "rng": self.rng,
            "arm_n": self.arm_n,
            "arm_mu": self.arm_mu,
            "t": self.t,
            "labels": self.labels,
            "n_clusters": self.n_clusters,
            "centroids": self.centroids,
            "z_mean": self.z_mean,
            "z_std": self.z_std,
            "since_recluster": self.since_recluster,
            "pending": [d.to_dict() for d in self.pending.values()],
            "next_decision": self.next_decision,
            "prior_buffer": self.prior_buffer,
            "prior_coef": self.prior_coef,
            "signed": self.signed,
            "prompts": self.prompts,
        }
        if frontier:
            data["frontier"] = [e.to_dict() for e in self.frontier]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PolicyState:
        if data.get("version") != STATE_VERSION:
            raise PolicyStateError(
                f"kernelband: policy state version {data.get('version')!r} is not supported "
                f"(expected {STATE_VERSION}); restart the track from its original kernel"
            )
        pending = [Decision.from_dict(d) for d in data["pending"]]
        return cls(
            policy=data["policy"],
            seed=int(data["seed"]),
            rng=dict(data["rng"]),
            frontier=[FrontierEntry.from_dict(e) for e in data["frontier"]],
            arm_n=[[float(v) for v in row] for row in data["arm_n"]],
            arm_mu=[[float(v) for v in row] for row in data["arm_mu"]],
            t=int(data["t"]),
            labels=parse_labels(data["labels"]),
            n_clusters=int(data["n_clusters"]),
            centroids=[[float(v) for v in c] for c in data["centroids"]],
            z_mean=[float(v) for v in data["z_mean"]],
            z_std=[float(v) for v in data["z_std"]],
            since_recluster=int(data["since_recluster"]),
            pending={d.decision_id: d for d in pending},
            next_decision=int(data["next_decision"]),
            prior_buffer=[[float(v) for v in row] for row in data["prior_buffer"]],
            prior_coef=[float(v) for v in data["prior_coef"]],
            signed=list(map(str, data.get("signed", []))),  # absent in states saved before it
            prompts={str(k): [int(c) for c in v] for k, v in data.get("prompts", {}).items()},
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> PolicyState:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PolicyStateError(f"kernelband: policy state is not valid JSON ({exc})") from None
        return cls.from_dict(data)
