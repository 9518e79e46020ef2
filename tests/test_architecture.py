"""Imports point down the layers of docs/architecture.md; the page and the code agree."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PKG = REPO / "src" / "gpuplan"
# lower number = lower layer; a module may import its own layer or any lower one
LAYERS = {
    "errors": 0,
    "units": 0,
    "spec": 1,
    "catalog": 2,
    "estimate": 3,
    "plan": 4,
    "local": 4,
    "api": 5,
    "render": 5,
    "cli": 6,
    "web": 6,
}
# no upward import is allowed (the last one, spec/serving.py -> estimate, is gone: choices live in spec)
ALLOWED: set[tuple[str, str]] = set()


def _layer_of(path: Path) -> str:
    rel = path.relative_to(PKG)
    return rel.parts[0].removesuffix(".py")


def _imported_layers(path: Path, pkg: Path = PKG):
    """Top-level gpuplan subpackages a module imports (absolute or relative), with line numbers."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    depth = len(path.relative_to(pkg).parts) - 1  # package depth below gpuplan
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                mod = node.module or ""
                if mod.startswith("gpuplan."):
                    yield mod.split(".")[1], node.lineno
            elif node.level > depth:  # climbs to gpuplan/ and goes down into another layer
                if node.module:
                    yield node.module.split(".")[0], node.lineno
                else:
                    for alias in node.names:
                        yield alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gpuplan."):
                    yield alias.name.split(".")[1], node.lineno


def test_every_module_sits_in_a_known_layer():
    unknown = {_layer_of(p) for p in PKG.rglob("*.py")} - set(LAYERS) - {"__init__", "__main__"}
    assert not unknown, f"add these to docs/architecture.md and LAYERS: {unknown}"


def test_imports_point_down():
    upward = []
    for path in PKG.rglob("*.py"):
        layer = _layer_of(path)
        if layer not in LAYERS:
            continue
        rel = str(path.relative_to(PKG))
        for target, line in _imported_layers(path):
            if target in LAYERS and LAYERS[target] > LAYERS[layer] and (rel, target) not in ALLOWED:
                upward.append(f"{rel}:{line} imports {target} (layer {LAYERS[target]} > {layer} {LAYERS[layer]})")
    assert not upward, "\n".join(upward)


def test_the_checker_sees_an_upward_import(tmp_path):
    """The check can fail: a planted 'from ..cli import main' inside estimate/ is reported."""
    fake = PKG / "estimate" / "flops.py"
    tree_targets = list(_imported_layers(fake))
    assert all(LAYERS[t] <= LAYERS["estimate"] for t, _ in tree_targets if t in LAYERS)
    planted = tmp_path / "estimate" / "planted.py"
    planted.parent.mkdir()
    planted.write_text(
        "from ..cli import main\nfrom . import flops\nfrom gpuplan.render import tables\n", encoding="utf-8"
    )
    assert [t for t, _ in _imported_layers(planted, tmp_path)] == ["cli", "render"]


def test_architecture_page_names_every_layer():
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    for layer in LAYERS:
        assert layer in text, layer
