"""Blue-green per kind: what differs between a P/D pair (two LWS), a DisaggregatedSet and a single LWS.

The executor (:mod:`executor`) and the planner (:mod:`plan`: weights, route writes, state,
next step) are written once; a kind answers the kind-specific questions, as :mod:`kinds` does for the
partition engine: find blue and the labels of its leader pods, the revision and green names, the green
objects, the selectors that keep each pool to its own pods, readiness, what the analysis compares, and
what deleting a side deletes.

- **pair** (``pair/NAME``): blue is the LWS per role labelled ``lwsflow.io/pd-pair=NAME``; green is a
  second LWS pair; the pools tell the pairs apart by that label, which the pod templates must carry.
- **ds** (``ds/NAME``): blue is the DisaggregatedSet; green is a second DS ``<base>-<rev>``. The DS
  controller puts ``disaggregatedset.x-k8s.io/name`` on every pod of every role (lws-semantics §f
  "Automatic labels", they win over the role's own), so that label tells the two DS's pods apart with
  nothing to add to the templates. Readiness is the DS gate of :class:`ds.DsKind` (the per-role
  equality from ``status.roleStatuses``, or from the child LWS where a released DS controller writes
  no status); deleting the DS deletes its child LWS by owner reference.
- **lws** (``lws/NAME``): blue is the LWS; green a second LWS ``<base>-<rev>``; the pools tell them
  apart by the LWS controller's ``leaderworkerset.sigs.k8s.io/name`` pod label.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable
from typing import Protocol

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.wire import Obj
from lwsflow.controller.bluegreen import plan as P
from lwsflow.controller.errors import InvalidInput, NotFound
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.kube.resources import DS, LWS, Resource
from lwsflow.controller.rollout import gate, state
from lwsflow.controller.rollout.ds import DsKind
from lwsflow.controller.rollout.gate import GateResult

PAIR_KIND = "LeaderWorkerSetPair"

Reader = Callable[[Resource, str], Obj]
"""(resource, name) -> the object in the rollout's namespace (NotFound when gone): what a wait reads."""


class BlueGreenKind(Protocol):
    """The kind-specific part of a blue-green (one instance per rollout)."""

    target: str  # the TARGET prefix, ``pair`` or ``ds`` (also ``Side.kind`` in the persisted state)
    kind: str  # the report's and the stage hooks' kind
    # how readiness reads an object: a GET, or the in-cluster controller's cache (set by the executor)
    read: Reader

    def find_blue(self, name: str) -> dict[str, Obj]:
        """The blue objects by role (a DS: ``{"": ds}``); refuses (InvalidInput) what is not there."""
        ...

    def leader_labels(self, blue: dict[str, Obj]) -> list[dict[str, str]]:
        """The labels of the blue leader pods, one map per role (the blue pool selects them all)."""
        ...

    def revision(self, manifests: dict[str, Obj]) -> str:
        """The green revision suffix, from the new templates."""
        ...

    def blue_revision(self, blue: dict[str, Obj]) -> str:
        """The revision suffix an earlier blue-green gave blue ("" if none)."""
        ...

    def green_side(self, name: str, blue: dict[str, Obj], rev: str, manifests: dict[str, Obj]) -> P.Side:
        """Green's names (refuses names the API would refuse)."""
        ...

    def blue_side(self, name: str, pool: str, blue: dict[str, Obj]) -> P.Side:
        ...

    def narrowed_selector(self, pool: Obj, name: str, blue: dict[str, Obj]) -> dict[str, str]:
        """The blue pool's matchLabels, narrowed to blue's pods (before any green pod exists)."""
        ...

    def green_objects(self, manifests: dict[str, Obj], green: P.Side, rev: str) -> list[tuple[Resource, Obj]]:
        """The workload objects to create, in creation order."""
        ...

    def green_pool(self, blue_pool: Obj, green: P.Side, rev: str) -> Obj:
        ...

    def capacity_objs(self, objs: list[Obj]) -> list[Obj]:
        """``objs`` (green objects not created yet) as objects with an LWS spec each, for
        :func:`capacity.check_beside`."""
        ...

    def exists(self, side: P.Side) -> bool:
        """Whether every workload object of ``side`` exists."""
        ...

    def ready(self, side: P.Side) -> dict[str, GateResult]:
        """The readiness equality of ``side``'s objects, by role (a DS: one gate for all roles)."""
        ...

    def hook_context(self, st: P.BlueGreenState) -> tuple[Obj, dict[str, tuple[str, str]]]:
        """The green object a stage hook sees and, per role, the (green, blue) names the analysis
        compares (the ``{{lws}}`` and ``{{stable_lws}}`` arguments)."""
        ...

    def delete(self, side: P.Side) -> None:
        """Delete ``side``'s workload objects (gone already is fine: a rerun after a crash)."""
        ...


def exists(kube: Kube, res: Resource, namespace: str, name: str) -> bool:
    try:
        kube.get(res, namespace, name)
    except NotFound:
        return False
    return True


def delete_if_present(kube: Kube, res: Resource, namespace: str, name: str) -> None:
    with contextlib.suppress(NotFound):  # a rerun after a crash finds it gone
        kube.delete(res, namespace, name)


class _Base:
    def __init__(self, kube: Kube, namespace: str) -> None:
        self.kube, self.ns = kube, namespace
        self.read: Reader = lambda res, name: self.kube.get(res, self.ns, name)

    def _exists(self, res: Resource, name: str) -> bool:
        return exists(self.kube, res, self.ns, name)

    def _delete(self, res: Resource, name: str) -> None:
        delete_if_present(self.kube, res, self.ns, name)


class PairBlueGreen(_Base):
    """A P/D pair: two LWS labelled ``lwsflow.io/pd-pair=NAME`` and ``lwsflow.io/role``."""

    target = "pair"
    kind = PAIR_KIND

    def find_blue(self, name: str) -> dict[str, Obj]:
        items, _ = self.kube.list(LWS, self.ns, label_selector=f"{L.PD_PAIR}={name}")
        out: dict[str, list[Obj]] = {}
        for o in items:
            out.setdefault((o["metadata"].get("labels") or {}).get(L.ROLE, ""), []).append(o)
        if any(len(out.get(r, [])) != 1 for r in P.ROLES):
            raise InvalidInput(f"pair {self.ns}/{name}: need one LWS labelled {L.ROLE}=prefill and one "
                               f"=decode with {L.PD_PAIR}={name}, found "
                               f"{sorted(o['metadata']['name'] for o in items)}", field="target")
        return {r: out[r][0] for r in P.ROLES}

    def leader_labels(self, blue: dict[str, Obj]) -> list[dict[str, str]]:
        return [P.pod_labels(o) for o in blue.values()]

    def revision(self, manifests: dict[str, Obj]) -> str:
        return P.revision_of(manifests)

    def blue_revision(self, blue: dict[str, Obj]) -> str:
        return str((blue["decode"]["metadata"].get("labels") or {}).get(L.REVISION, ""))

    def green_side(self, name: str, blue: dict[str, Obj], rev: str, manifests: dict[str, Obj]) -> P.Side:
        return P.green_side(P.base_name(name, blue), rev)

    def blue_side(self, name: str, pool: str, blue: dict[str, Obj]) -> P.Side:
        return P.Side(name, pool, {r: o["metadata"]["name"] for r, o in blue.items()})

    def narrowed_selector(self, pool: Obj, name: str, blue: dict[str, Obj]) -> dict[str, str]:
        return P.narrowed_blue_selector(pool, name, blue)

    def green_objects(self, manifests: dict[str, Obj], green: P.Side, rev: str) -> list[tuple[Resource, Obj]]:
        return [(LWS, P.green_lws(manifests[r], green, r, rev, self.ns)) for r in P.ROLES]

    def green_pool(self, blue_pool: Obj, green: P.Side, rev: str) -> Obj:
        return P.green_pool(blue_pool, green, rev, self.ns)

    def capacity_objs(self, objs: list[Obj]) -> list[Obj]:
        return objs

    def exists(self, side: P.Side) -> bool:
        return all(self._exists(LWS, n) for n in side.lws.values())

    def ready(self, side: P.Side) -> dict[str, GateResult]:
        return {r: gate.lws_fully_rolled(self.read(LWS, side.lws[r])) for r in P.ROLES}

    def hook_context(self, st: P.BlueGreenState) -> tuple[Obj, dict[str, tuple[str, str]]]:
        assert st.green is not None and st.blue is not None
        return (self.kube.get(LWS, self.ns, st.green.lws["decode"]),
                {r: (st.green.lws[r], st.blue.lws[r]) for r in P.ROLES})

    def delete(self, side: P.Side) -> None:
        for role in reversed(P.ROLES):  # prefill first: no decode left waiting on a prefill
            self._delete(LWS, side.lws[role])


# -- DisaggregatedSet: the pure part -------------------------------------------------------------------


def ds_roles(ds: Obj) -> list[Obj]:
    return [r for r in ((ds.get("spec") or {}).get("roles") or []) if isinstance(r, dict)]


def ds_leader_labels(ds: Obj) -> dict[str, dict[str, str]]:
    """Per role, labels every pod of the role carries: the role's pod-template labels (leader and worker
    in common) under the DS controller's own name and role labels, which win (lws-semantics §f)."""
    name = (ds.get("metadata") or {}).get("name", "")
    return {r["name"]: {**P.pod_labels({"spec": copy.deepcopy(r.get("spec") or {})}),
                        L.DS_NAME: name, L.DS_ROLE: r["name"]} for r in ds_roles(ds)}


def ds_revision(manifest: Obj) -> str:
    """The green revision suffix: a hash of the roles' templates (same manifest, same name)."""
    return state.template_hash(state.template_of(manifest))[:P.REV_LEN]


def ds_base_name(name: str, ds: Obj) -> str:
    """The DS's name without the revision suffix an earlier blue-green gave it."""
    rev = ((ds.get("metadata") or {}).get("labels") or {}).get(L.REVISION, "")
    return name[: -len(rev) - 1] if rev and name.endswith(f"-{rev}") else name


def ds_green_side(base: str, rev: str, manifest: Obj) -> P.Side:
    """Green's DS ``<base>-<rev>``, refused when the DS webhook would refuse it: its child LWS
    ``<ds>-<slice>-<rev8>-<role>`` and their Services ``<lws>-prv`` must stay DNS-1035 labels, so
    ``len(ds) + len(role) + 3 + slice digits + 8 + 4 <= 63`` (lws-semantics §f "Validation")."""
    name = f"{base}-{rev}"
    digits = len(str(max(int((manifest.get("spec") or {}).get("slices") or 1) - 1, 0)))
    for role in ds_roles(manifest):
        if len(name) + len(str(role.get("name", ""))) + 3 + digits + 8 + 4 > 63:
            raise InvalidInput(f"green DisaggregatedSet name {name!r} with role {role.get('name')!r} makes "
                               "child names longer than 63 characters (the DS webhook refuses it); "
                               "shorten the DisaggregatedSet's name", field="target")
    return P.Side(name, name, {}, "ds")


def green_ds(manifest: Obj, green: P.Side, rev: str, namespace: str) -> Obj:
    """The new revision's DS: the manifest renamed, labelled with the revision, no rollout state."""
    return P.fresh_copy(manifest, green.pair, namespace, {L.REVISION: rev})


def ds_capacity_objs(ds: Obj) -> list[Obj]:
    """One LWS-shaped object per role of ``ds`` (``replicas x slices`` groups of its template)."""
    name = (ds.get("metadata") or {}).get("name", "")
    targets = gate.ds_role_targets(ds)
    return [{"kind": L.DS_KIND, "metadata": {"name": f"{name} role {r['name']}"},
             "spec": {**(r.get("spec") or {}), "replicas": targets[r["name"]]}} for r in ds_roles(ds)]


class DsBlueGreen(_Base):
    """A DisaggregatedSet: blue the DS, green a second DS (see the module docstring)."""

    target = "ds"
    kind = L.DS_KIND

    def find_blue(self, name: str) -> dict[str, Obj]:
        try:
            return {"": self.kube.get(DS, self.ns, name)}
        except NotFound:
            raise InvalidInput(f"DisaggregatedSet {self.ns}/{name} not found", field="target") from None

    def leader_labels(self, blue: dict[str, Obj]) -> list[dict[str, str]]:
        return list(ds_leader_labels(blue[""]).values())

    def revision(self, manifests: dict[str, Obj]) -> str:
        return ds_revision(manifests[""])

    def blue_revision(self, blue: dict[str, Obj]) -> str:
        return str((blue[""]["metadata"].get("labels") or {}).get(L.REVISION, ""))

    def green_side(self, name: str, blue: dict[str, Obj], rev: str, manifests: dict[str, Obj]) -> P.Side:
        return ds_green_side(ds_base_name(name, blue[""]), rev, manifests[""])

    def blue_side(self, name: str, pool: str, blue: dict[str, Obj]) -> P.Side:
        return P.Side(name, pool, {}, "ds")

    def narrowed_selector(self, pool: Obj, name: str, blue: dict[str, Obj]) -> dict[str, str]:
        match = dict(((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        return {**match, L.DS_NAME: name}

    def green_objects(self, manifests: dict[str, Obj], green: P.Side, rev: str) -> list[tuple[Resource, Obj]]:
        return [(DS, green_ds(manifests[""], green, rev, self.ns))]

    def green_pool(self, blue_pool: Obj, green: P.Side, rev: str) -> Obj:
        return P.green_pool(blue_pool, green, rev, self.ns, select={L.DS_NAME: green.pair})

    def capacity_objs(self, objs: list[Obj]) -> list[Obj]:
        return [o for ds in objs for o in ds_capacity_objs(ds)]

    def exists(self, side: P.Side) -> bool:
        return self._exists(DS, side.pair)

    def ready(self, side: P.Side) -> dict[str, GateResult]:
        return {"ds": DsKind(self.kube, self.ns).gate(self.read(DS, side.pair), 1)}

    def hook_context(self, st: P.BlueGreenState) -> tuple[Obj, dict[str, tuple[str, str]]]:
        assert st.green is not None and st.blue is not None
        obj = self.kube.get(DS, self.ns, st.green.pair)
        return obj, {r["name"]: (st.green.pair, st.blue.pair) for r in ds_roles(obj)}

    def delete(self, side: P.Side) -> None:
        self._delete(DS, side.pair)  # its child LWS go by owner reference


# -- a single LeaderWorkerSet ----------------------------------------------------------------------------


def lws_role(lws: Obj) -> str:
    """The role an LWS serves (``lwsflow.io/role``, else ``aggregated``): the analysis's ``{{role}}``."""
    return str(((lws.get("metadata") or {}).get("labels") or {}).get(L.ROLE) or "aggregated")


def lws_green_side(base: str, rev: str, role: str) -> P.Side:
    """Green's LWS ``<base>-<rev>``: the LWS controller labels its pods with that name
    (``leaderworkerset.sigs.k8s.io/name``), so it must be a label value of at most 63 characters."""
    name = f"{base}-{rev}"
    if len(name) > 63:
        raise InvalidInput(f"green LeaderWorkerSet name {name!r} is longer than 63 characters; shorten the "
                           "LeaderWorkerSet's name", field="target")
    return P.Side(name, name, {role: name}, "lws")


class LwsBlueGreen(_Base):
    """A single LWS (an aggregated model, or one served alone): blue the LWS, green a second LWS. The
    LWS controller labels every pod with ``leaderworkerset.sigs.k8s.io/name`` (lws-semantics §a), which
    tells the two LWS's pods apart with nothing added to the templates."""

    target = "lws"
    kind = L.LWS_KIND

    def find_blue(self, name: str) -> dict[str, Obj]:
        try:
            obj = self.kube.get(LWS, self.ns, name)
        except NotFound:
            raise InvalidInput(f"LeaderWorkerSet {self.ns}/{name} not found", field="target") from None
        return {lws_role(obj): obj}

    def leader_labels(self, blue: dict[str, Obj]) -> list[dict[str, str]]:
        return [{**P.pod_labels(o), L.NAME: o["metadata"]["name"]} for o in blue.values()]

    def revision(self, manifests: dict[str, Obj]) -> str:
        return state.template_hash(state.template_of(manifests[""]))[:P.REV_LEN]

    def blue_revision(self, blue: dict[str, Obj]) -> str:
        return next(str((o["metadata"].get("labels") or {}).get(L.REVISION, "")) for o in blue.values())

    def green_side(self, name: str, blue: dict[str, Obj], rev: str, manifests: dict[str, Obj]) -> P.Side:
        old = self.blue_revision(blue)
        base = name[: -len(old) - 1] if old and name.endswith(f"-{old}") else name
        return lws_green_side(base, rev, lws_role(manifests[""]))

    def blue_side(self, name: str, pool: str, blue: dict[str, Obj]) -> P.Side:
        return P.Side(name, pool, {r: name for r in blue}, "lws")

    def narrowed_selector(self, pool: Obj, name: str, blue: dict[str, Obj]) -> dict[str, str]:
        match = dict(((pool.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        return {**match, L.NAME: name}

    def green_objects(self, manifests: dict[str, Obj], green: P.Side, rev: str) -> list[tuple[Resource, Obj]]:
        return [(LWS, P.fresh_lws(manifests[""], green.pair, self.ns, {L.REVISION: rev}, {}))]

    def green_pool(self, blue_pool: Obj, green: P.Side, rev: str) -> Obj:
        return P.green_pool(blue_pool, green, rev, self.ns, select={L.NAME: green.pair})

    def capacity_objs(self, objs: list[Obj]) -> list[Obj]:
        return objs

    def exists(self, side: P.Side) -> bool:
        return self._exists(LWS, side.pair)

    def ready(self, side: P.Side) -> dict[str, GateResult]:
        return {r: gate.lws_fully_rolled(self.read(LWS, side.pair)) for r in side.lws}

    def hook_context(self, st: P.BlueGreenState) -> tuple[Obj, dict[str, tuple[str, str]]]:
        assert st.green is not None and st.blue is not None
        return (self.kube.get(LWS, self.ns, st.green.pair),
                {r: (st.green.pair, st.blue.pair) for r in st.green.lws})

    def delete(self, side: P.Side) -> None:
        self._delete(LWS, side.pair)


def kind_for(target: str, kube: Kube, namespace: str) -> BlueGreenKind:
    """The blue-green kind of a TARGET prefix (``pair`` or ``ds``)."""
    if target == "ds":
        return DsBlueGreen(kube, namespace)
    if target == "pair":
        return PairBlueGreen(kube, namespace)
    if target == "lws":
        return LwsBlueGreen(kube, namespace)
    raise InvalidInput(f"blue-green rolls lws/NAME, pair/NAME or ds/NAME, not {target}/", field="strategy")
