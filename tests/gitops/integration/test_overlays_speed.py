"""The fast paths of render and build-overlays change no byte and no error (bench/overlays_bench.py).

* ``dump_yaml`` hands a document to libyaml's emitter only when both emitters write it alike;
* ``parse_tool_output`` (kustomize output, through libyaml) parses like ``parse_yaml_documents``
  and refuses with the same line;
* environments build concurrently, yet results and errors are those of a sequential build;
* a re-render parses only the overlays holding a pin; kustomize runs with the GOGC lwsflow sets.
"""

from __future__ import annotations

import contextlib
import random
import re
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from lwsflow.components import kustomize as K
from lwsflow.components import overlays as O
from lwsflow.components.catalog import Catalog, load_catalog
from lwsflow.components.gitops import pin_entry
from lwsflow.controller import yamlio
from lwsflow.controller.api.paths import repo_root
from lwsflow.controller.errors import InvalidInput
from tests.gitops.gitops_helpers import stand_in_render

ROOT = repo_root()
DIGEST = "sha256:" + "ab" * 32


def _python_dump(doc: Any) -> str:
    return yamlio._dump(doc, yamlio._Dumper)


def _libyaml_dump(doc: Any) -> str:
    return yamlio._dump(doc, yamlio._CDumper)


def test_libyaml_is_available() -> None:
    """The pinned PyYAML wheel bundles libyaml; without it every fast path would silently be off."""
    assert yamlio._CDumper is not None and yamlio._CLoader is not None


def _documents(root: Path) -> list[Any]:
    files = sorted(root.rglob("*.yaml"))
    return [d for p in files for d in yaml.safe_load_all(p.read_text()) if d is not None]


def test_rendered_trees_dump_identically_and_through_libyaml(tmp_path: Path) -> None:
    """Every document of the committed tree and of a fresh render: libyaml takes it, same bytes."""
    out = tmp_path / "overlays"
    O.render_to(load_catalog(ROOT / "examples" / "catalog.yaml"), out)
    docs = _documents(ROOT / "overlays") + _documents(out)
    assert len(docs) > 100
    for doc in docs:
        assert yamlio._emits_alike(doc), doc
        assert _libyaml_dump(doc) == _python_dump(doc)
        assert yamlio._block_dump(doc) == _python_dump(doc)  # the block emitter takes every one


_ALPHABET = [chr(i) for i in range(0x20, 0x7F)] + ["\n"] * 6 + [" "] * 6 + list(":#-?&*!|>'\"%@`{}[],") * 2
_WORDS = ["true", "no", "null", "~", "on", "1", "1.0", "0x1F", "1e3", "-", "---", "...", "<<", "=", ".inf",
          "0o17", "1_000", "12:30", "2024-01-01", "y", "- a", "? x", "a: b", "#c", "a #b", " ", "  a", "a  ",
          "a\n", "\na", " a\nb", "a\n b\n", "a\nb \n", "", "'", '"', "a'b", " \n", "\n ", "a\n\n\nb", "%x",
          "@x", "!x", "&x", "*x", "|", ">", "-1", "+1", ".5", "sha256:ab", "http://x:80/a?b=c#d"]


def _generated(rnd: random.Random, depth: int = 0) -> Any:
    def text() -> str:
        if rnd.random() < 0.35:
            return rnd.choice(_WORDS)
        return "".join(rnd.choice(_ALPHABET) for _ in range(rnd.choice([1, 2, 5, 10, 40, 119, 121, 200])))

    def key() -> str:
        while not yamlio._ASCII_KEY.match(k := text()):
            pass
        return k

    r = rnd.random()
    if depth > 5 or r < 0.45:
        scalars = [text, lambda: rnd.randint(-(10**20), 10**20),
                   lambda: rnd.random() * 10 ** rnd.randint(-30, 30),
                   lambda: rnd.choice([True, False, None, 0, float("inf"), float("nan")])]
        return rnd.choice(scalars)()
    if r < 0.75:
        return {key(): _generated(rnd, depth + 1) for _ in range(rnd.randint(0, 5))}
    return [_generated(rnd, depth + 1) for _ in range(rnd.randint(0, 5))]


def test_generated_documents_dump_identically() -> None:
    """Seeded documents full of YAML indicators, reserved words and line breaks: every one the
    predicate accepts is written alike by both emitters, and dump_yaml always equals pure Python."""
    rnd = random.Random(20261201)
    accepted = block = 0
    for _ in range(800):
        doc = _generated(rnd)
        assert yamlio.dump_yaml(doc) == _python_dump(doc)
        if yamlio._emits_alike(doc):
            accepted += 1
            assert _libyaml_dump(doc) == _python_dump(doc), doc
        with contextlib.suppress(yamlio._Unalike):
            assert yamlio._block_dump(doc) == _python_dump(doc), doc
            block += 1
    assert accepted > 250 and block > 250


def test_block_scalars_follow_their_indentation() -> None:
    """The block emitter caches a scalar's form once and writes it at any depth; the lines of a
    literal block follow the column of the node that holds them, as PyYAML writes them."""
    text = "line one\n\n  indented\nlast"
    doc = {"a": text, "b": [text, {"c": [[text]], "d": {"e": text}}], "f": [" lead\nx\n", "\nx"]}
    for _ in range(2):  # the second time from the cache
        assert yamlio._block_dump(doc) == _python_dump(doc)
        assert yamlio._block_dump([doc, [doc]]) == _python_dump([doc, [doc]])


@pytest.mark.parametrize("doc", [
    {"": 1},  # Python writes an empty key as "? ''"
    {"k" * 125: 1},  # Python's simple-key limit counts differently from libyaml's
    {"a\n\n": 1},  # keep-chomped block scalar: libyaml closes the document with "..."
    {"\xa0:\U0001F600": 1},  # non-ASCII: libyaml quotes and escapes it
    "a scalar document",  # Python ends it with "..."
])
def test_documents_the_emitters_write_differently_stay_pure_python(doc: Any) -> None:
    assert _libyaml_dump(doc) != _python_dump(doc)  # the case is real ...
    assert not yamlio._emits_alike(doc)  # ... so libyaml never sees it
    assert yamlio.dump_yaml(doc) == _python_dump(doc)


def test_a_cyclic_document_is_not_walked_forever() -> None:
    doc: dict[str, Any] = {"a": []}
    doc["a"].append(doc)
    assert not yamlio._emits_alike(doc)


def test_tool_output_parses_like_user_yaml(tree: Path) -> None:
    text = yamlio.dump_yaml_documents(K.kustomize_build(tree / "prod"))
    assert yamlio.parse_tool_output(text, "x") == yamlio.parse_yaml_documents(text, "x")


def _same(a: Any, b: Any) -> bool:
    return repr(a) == repr(b)  # types too: 1, 1.0 and True are equal but not alike


def test_event_loader_builds_what_safe_load_builds() -> None:
    """The event loader against PyYAML's SafeLoader on seeded documents full of reserved words,
    numbers in every YAML 1.1 spelling and quoted look-alikes, in block and flow style."""
    rnd = random.Random(20261202)
    fast = 0
    for _ in range(400):
        docs = [_generated(rnd) for _ in range(rnd.randint(1, 3))]
        for flow in (False, True):
            text = yaml.dump_all(docs, default_flow_style=flow, sort_keys=False)
            ref = yamlio.parse_yaml_documents(text, "x")
            assert _same(yamlio.parse_tool_output(text, "x"), ref), text
            with contextlib.suppress(yamlio._Unalike):
                assert _same([d for d in yamlio._event_load(text) if d is not None], ref), text
                fast += 1
    assert fast > 600  # the event loader itself built them, not the fallback


@pytest.mark.parametrize("text", [
    "a: &x 1\nb: *x\n",  # anchors and aliases
    "base: &b {k: 1}\nm:\n  <<: *b\n  j: 2\n",  # a merge key
    "d: 2024-01-01\nt: 2001-12-14t21:59:43.10-05:00\n",  # timestamps
    "s: !!str 12\ni: !!int '7'\nset: !!set {a, b}\n",  # explicit tags
    "? [a, b]\n: 1\n",  # a collection as a key
    "=: 1\n",  # the YAML 1.1 value key
    "---\n---\na: 1\n---\n...\n",  # empty documents
    "plain scalar document\n",
])
def test_event_loader_hands_the_rest_to_safe_load(text: str) -> None:
    try:
        ref = yamlio.parse_yaml_documents(text, "x")
    except InvalidInput as exc:
        with pytest.raises(InvalidInput, match=re.escape(str(exc))):
            yamlio.parse_tool_output(text, "x")
        return
    assert _same(yamlio.parse_tool_output(text, "x"), ref)


@pytest.mark.parametrize("text", [
    "a: [1, 2\nb: 3\n",
    "a: b: c\n",
    "[" * 100 + "]" * 100,  # deeper than MAX_DEPTH
    "l0: &l0 [1]\n" + "".join(f"l{i}: &l{i} [*l{i - 1}, *l{i - 1}]\n" for i in range(1, 25)),  # alias bomb
    "a:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)) + "  " * 80 + "v: 1\n",
])
def test_tool_output_refuses_with_the_same_line(text: str) -> None:
    with pytest.raises(InvalidInput) as pure:
        yamlio.parse_yaml_documents(text, "out")
    with pytest.raises(InvalidInput) as fast:
        yamlio.parse_tool_output(text, "out")
    assert str(fast.value) == str(pure.value)


def test_concurrent_build_names_the_first_broken_environment(tree: Path) -> None:
    """Results of the concurrent build are the sequential ones; with dev and prod broken the error
    is dev's, as in the sequential build (environments sorted)."""
    seq = [b for e in K.environments(tree) for b in K.build_environment(tree, e)]
    assert [(b.path, b.objects, b.images, b.files) for b in K.build_overlays(tree)] == [
        (b.path, b.objects, b.images, b.files) for b in seq
    ]
    for env in ("prod", "dev"):
        k = tree / env / "small" / "kustomization.yaml"
        k.write_text(k.read_text().replace("count: ", "count: -"))
    with pytest.raises(InvalidInput, match=r"^dev/small: .*spec.replicas"):
        K.build_overlays(tree)
    # a later environment that does not even build (it fails first, in its own thread) changes nothing
    k = tree / "staging" / "pd" / "kustomization.yaml"
    k.write_text(k.read_text().replace("../../base/pd", "../../base/missing"))
    with pytest.raises(InvalidInput, match=r"^dev/small: .*spec.replicas"):
        K.build_overlays(tree)
    with pytest.raises(InvalidInput, match=r"/staging/pd: kustomize build failed"):
        K.build_overlays(tree, "staging")


def test_rerender_parses_only_pinned_overlays(
    tree: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    pinned = tree / "staging" / "small" / "kustomization.yaml"
    doc = O.set_pins(O.read_kustomization(pinned) or {}, [pin_entry("vllm/vllm-openai", DIGEST)], "set-image")
    pinned.write_text(yamlio.dump_yaml(doc))
    before = pinned.read_bytes()
    parsed: list[Path] = []
    real = O.read_kustomization
    monkeypatch.setattr(O, "read_kustomization", lambda p: parsed.append(p) or real(p))
    assert O.render_to(catalog, tree, render=stand_in_render) == []
    assert parsed == [pinned] and pinned.read_bytes() == before


def test_kustomize_runs_with_lwsflows_gc_target_unless_one_is_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "kubectl"
    fake.write_text('#!/bin/sh\nprintf "kind: Probe\\ngogc: \'%s\'\\n" "$GOGC"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(K, "kubectl_path", lambda: fake)
    monkeypatch.delenv("GOGC", raising=False)
    assert K.kustomize_build(tmp_path) == [{"kind": "Probe", "gogc": K.KUSTOMIZE_GOGC}]
    monkeypatch.setenv("GOGC", "150")
    assert K.kustomize_build(tmp_path) == [{"kind": "Probe", "gogc": "150"}]
