"""The shipped RBAC is exactly what the controller uses: derived from the embedded API server's
request log over a rollout, a rollback (with a forced group recreate), a P/D pair and a DS."""

from __future__ import annotations

from pathlib import Path

from rollout_env import NS, SPEED, TOKEN, Env, ds_manifest, lws_manifest, new_release

from lwsflow.controller.api import labels as L
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.kube.client import Kube
from lwsflow.controller.rollout import session
from lwsflow.controller.rollout.engine import RolloutOptions
from lwsflow.controller.yamlio import dump_yaml, load_yaml_documents
from lwsflow.sim.apiserver import ApiServer

RBAC = repo_root() / "overlays" / "rbac"


def shipped() -> set[tuple[str, str, str]]:
    out = set()
    for doc in load_yaml_documents(RBAC / "clusterrole.yaml"):
        for rule in doc["rules"]:
            assert "*" not in rule["apiGroups"] + rule["resources"] + rule["verbs"], rule
            assert "secrets" not in rule["resources"]
            for g in rule["apiGroups"]:
                for r in rule["resources"]:
                    for v in rule["verbs"]:
                        out.add((g, r, v))
    return out


def test_rbac_matches_what_the_controller_uses(env: Env, tmp_path: Path) -> None:
    opts = RolloutOptions(stages="1,100%", deadline_s=90)
    good = lws_manifest("ok", replicas=2)
    env.create_ready(good)
    bad = lws_manifest("bad", replicas=2)
    env.create_ready(bad)
    p = lws_manifest("c-prefill", replicas=2, labels={L.PD_PAIR: "c", L.ROLE: "prefill"})
    d = lws_manifest("c-decode", replicas=1, labels={L.PD_PAIR: "c", L.ROLE: "decode"})
    env.create_ready(p)
    env.create_ready(d)
    ds = ds_manifest("dis")
    env.create_ready(ds)
    # the controller gets its own API server on the same store: its log holds only the controller
    api = ApiServer(env.cluster.store, token=TOKEN, clock=env.cluster.now, speed=SPEED)
    api.start()
    kube = Kube.connect(str(api.write_kubeconfig(tmp_path / "controller.kubeconfig")))
    clock = session.clock_for(kube)
    for name, doc in (("ok", new_release(good)),
                      ("bad", new_release(bad, **{"sim.lwsflow.io/never-ready": "true"}))):
        f = tmp_path / f"{name}.yaml"
        f.write_text(dump_yaml(doc))
        out = session.run(kube, clock, session.parse_target(f"lws/{name}", NS), opts, manifest=f)
        assert out.result == ("succeeded" if name == "ok" else "rolled-back"), out.message
    f = tmp_path / "pair.yaml"
    f.write_text(dump_yaml(new_release(p)) + "---\n" + dump_yaml(new_release(d)))
    assert session.run(kube, clock, session.parse_target("pair/c", NS), opts,
                       manifest=f).result == "succeeded"
    f = tmp_path / "ds.yaml"
    f.write_text(dump_yaml(new_release(ds)))
    assert session.run(kube, clock, session.parse_target("ds/dis", NS), opts,
                       manifest=f).result == "succeeded"
    api.stop()
    used = {(g, r, v) for g, r, v in api.verbs_used() if not r.startswith("/")}
    assert used == shipped(), f"used but not granted: {used - shipped()}; granted, unused: {shipped() - used}"


def test_kustomization_lists_every_file() -> None:
    doc = load_yaml_documents(RBAC / "kustomization.yaml")[0]
    assert sorted(doc["resources"]) == sorted(p.name for p in RBAC.glob("*.yaml")
                                              if p.name != "kustomization.yaml")
