"""Print Quillian's package-level import graph and any two-way pairs (the layers and
cycles lint-imports checks, as a picture): python .ci/import_graph.py [SRC_DIR].

Give another checkout's src/ (for example a `git worktree` of an older commit) to
compare before and after a change.
"""

import sys

import grimp

source = sys.argv[1] if len(sys.argv) > 1 else "src"
sys.path.insert(0, source)
graph = grimp.build_graph("quillian", cache_dir=None)
packages = sorted({m.split(".")[1] for m in graph.modules if m.count(".") >= 1})
imports = {
    a: [
        b
        for b in packages
        if a != b
        and graph.direct_import_exists(
            importer=f"quillian.{a}", imported=f"quillian.{b}", as_packages=True
        )
    ]
    for a in packages
}
for package in packages:
    print(f"{package:12s} -> {', '.join(imports[package])}")
pairs = sorted({tuple(sorted((a, b))) for a in packages for b in imports[a] if a in imports[b]})
print("two-way package pairs:", pairs or "none")
