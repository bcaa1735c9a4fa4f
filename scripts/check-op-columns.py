#!/usr/bin/env python3
"""The op list's columns, checked (docs/adding-an-op.md).

Every CORE_OP line of core/op_list.h must fill every column:
  infer, cpu     functions defined in ops/*.c
  rule           a sharding rule defined in ops/*.c
  grad           a backward formula defined in ops/*.c, or ops_grad_none
                 ("not differentiable")
  cuda           a CUDA binding defined in ops/*.c (under DTORCH_HAVE_CUDA,
                 so a build without CUDA never sees it), or
                 ops_cuda_host_fallback ("host fallback"), or ops_alias_cpu
                 for a view (its cpu column is ops_alias_cpu too)
  public function  a "dt_..." string naming a function declared in
                 include/dtorch/*.h
  flags          0 or CORE_OP_CHECKS_DATA / CORE_OP_CONTRACTS joined by |
With --lib LIBRARY (the built libdtorch), also the Python binding: each
op's public function is exported by the library and declared in
python/dtorch/_lib.py, and every function _lib.py declares takes as many
arguments there as its prototype in the header does.

  scripts/check-op-columns.py [--root DIR] [--lib LIBRARY]
  scripts/check-op-columns.py --self-test [--lib LIBRARY]
      plants a missing column of each kind in a copy of the tree and checks
      that each is caught, and that the unplanted copy passes.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

COLUMNS = ["id", "name", "schema", "infer", "cpu", "rule", "grad", "cuda",
           "public function", "flags"]
FLAGS = {"0", "CORE_OP_CHECKS_DATA", "CORE_OP_CONTRACTS"}


def op_entries(text):
    """(line number, [columns]) per CORE_OP( ... ) of the op list."""
    out = []
    for m in re.finditer(r"^CORE_OP\((.*?)\)[ \t]*$", text, re.M | re.S):
        line = text.count("\n", 0, m.start()) + 1
        cols = [c.strip() for c in m.group(1).split(",")]
        out.append((line, cols))
    return out


def defined(ops_text, name):
    return re.search(r"^(?:dt_status|void)\s+%s\s*\(" % re.escape(name),
                     ops_text, re.M) is not None


def prototypes(header_text):
    """public function name -> number of parameters, from the headers."""
    protos = {}
    text = re.sub(r"/\*.*?\*/", "", header_text, flags=re.S)
    for m in re.finditer(r"\b(dt_\w+)\s*\(", text):
        name, i, depth = m.group(1), m.end(), 1
        start = i
        while i < len(text) and depth:
            depth += {"(": 1, ")": -1}.get(text[i], 0)
            i += 1
        params = text[start:i - 1]
        rest = text[i:i + 2].lstrip()
        if not rest.startswith(";") and not rest.startswith("D"):
            continue  # a call or a macro, not a declaration
        # the return type precedes the name on the same statement
        before = text[max(0, m.start() - 80):m.start()]
        if not re.search(r"(\w|\*)\s*$", before):
            continue
        parts, depth, cur = [], 0, ""
        for ch in params:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += {"(": 1, ")": -1}.get(ch, 0)
            cur += ch
        parts.append(cur)
        parts = [p.strip() for p in parts if p.strip()]
        protos.setdefault(name, 0 if parts in ([], ["void"]) else len(parts))
    return protos


def check_tree(root, lib):
    root = pathlib.Path(root)
    findings = []
    ops_text = "\n".join(p.read_text() for p in sorted((root / "ops").glob("*.c")))
    header = "\n".join(p.read_text() for p in
                       sorted((root / "include" / "dtorch").glob("*.h")))
    protos = prototypes(header)
    entries = op_entries((root / "core" / "op_list.h").read_text())
    if not entries:
        findings.append("core/op_list.h: no CORE_OP lines found")
    apis = []
    for line, cols in entries:
        where = "core/op_list.h:%d: op %s" % (line, cols[0] if cols else "?")
        if len(cols) != len(COLUMNS) or any(not c for c in cols):
            findings.append("%s has %d columns (%d non-empty), expected %d: %s"
                            % (where, len(cols), sum(1 for c in cols if c),
                               len(COLUMNS), ", ".join(COLUMNS)))
            continue
        col = dict(zip(COLUMNS, cols))
        for k in ("infer", "cpu", "rule"):
            if not defined(ops_text, col[k]):
                findings.append("%s: its %s %s is defined nowhere in ops/*.c"
                                % (where, k, col[k]))
        if col["grad"] != "ops_grad_none" and not defined(ops_text, col["grad"]):
            findings.append("%s: its backward %s is defined nowhere in ops/*.c "
                            "(ops_grad_none: not differentiable)"
                            % (where, col["grad"]))
        cuda = col["cuda"]
        if cuda == "ops_alias_cpu":
            if col["cpu"] != "ops_alias_cpu":
                findings.append("%s: cuda column ops_alias_cpu, but the op is "
                                "not a view" % where)
        elif cuda != "ops_cuda_host_fallback" and not defined(ops_text, cuda):
            findings.append("%s: its CUDA kernel %s is defined nowhere in "
                            "ops/*.c (ops_cuda_host_fallback: none, the host "
                            "fallback runs it)" % (where, cuda))
        api = col["public function"]
        m = re.fullmatch(r'"(dt_\w+)"', api)
        if not m:
            findings.append('%s: public function %s is not a "dt_..." string'
                            % (where, api))
        elif m.group(1) not in protos:
            findings.append("%s: public function %s is declared nowhere in "
                            "include/dtorch/*.h" % (where, m.group(1)))
        else:
            apis.append((where, m.group(1)))
        if not set(f.strip() for f in col["flags"].split("|")) <= FLAGS:
            findings.append("%s: flags %s are not among %s"
                            % (where, col["flags"], ", ".join(sorted(FLAGS))))
    if lib:
        findings += check_python(root, lib, apis, protos)
    return findings


def check_python(root, lib, apis, protos):
    """Loads root's python/dtorch/_lib.py alone (the package imports torch)
    against lib in a child process (_lib loads the library at import) and
    compares."""
    probe = (
        "import importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('_lib', sys.argv[1])\n"
        "_lib = importlib.util.module_from_spec(spec)\n"
        "spec.loader.exec_module(_lib)\n"
        "for n, v in vars(_lib).items():\n"
        "    if n.startswith('dt_') and hasattr(v, 'argtypes'):\n"
        "        print(n, len(v.argtypes or []))\n")
    env = dict(os.environ, DTORCH_LIBRARY=str(lib))
    r = subprocess.run([sys.executable, "-c", probe,
                        str(root / "python" / "dtorch" / "_lib.py")],
                       env=env, capture_output=True, text=True)
    if r.returncode != 0:
        return ["python/dtorch/_lib.py: the import failed:\n" + r.stderr]
    declared = dict((n, int(k)) for n, k in
                    (ln.split() for ln in r.stdout.splitlines()))
    out = []
    for where, api in apis:
        if api not in declared:
            out.append("%s: public function %s is not declared in "
                       "python/dtorch/_lib.py" % (where, api))
    for name, n in sorted(declared.items()):
        if name in protos and protos[name] != n:
            out.append("python/dtorch/_lib.py: %s takes %d arguments, its "
                       "prototype in include/dtorch %d" % (name, n, protos[name]))
    return out


def plant(tree, rel, old, new):
    p = tree / rel
    text = p.read_text()
    if old not in text:
        raise SystemExit("self-test: %r not found in %s" % (old, rel))
    p.write_text(text.replace(old, new, 1))


def self_test(src, lib):
    cases = [
        ("core/op_list.h", "ops_binary_cuda, \"dt_add\", 0)",
         "\"dt_add\", 0)", "op ADD has 9 columns"),
        ("core/op_list.h", "ops_binary_rule, ops_pointwise_grad,\n        ops_binary_cuda, \"dt_sub\"",
         "ops_binary_rule, ,\n        ops_binary_cuda, \"dt_sub\"", "op SUB has 10 columns (9 non-empty)"),
        ("core/op_list.h", "ops_matmul_rule", "ops_matmul_rule_missing",
         "rule ops_matmul_rule_missing is defined nowhere"),
        ("core/op_list.h", "ops_reduce_grad,", "ops_reduce_grad_gone,",
         "backward ops_reduce_grad_gone is defined nowhere"),
        ("core/op_list.h", "ops_softmax_cuda", "ops_softmax_cuda_gone",
         "CUDA kernel ops_softmax_cuda_gone is defined nowhere"),
        ("core/op_list.h", "\"dt_where\"", "\"dt_where_gone\"",
         "public function dt_where_gone is declared nowhere"),
        ("core/op_list.h", "\"dt_cat\", 0)", "\"dt_cat\", CORE_OP_FAST)",
         "flags CORE_OP_FAST are not among"),
    ]
    if lib:
        cases += [
            ("python/dtorch/_lib.py", '("dt_where", P, (P, P, P)), ', "",
             "public function dt_where is not declared in python/dtorch/_lib.py"),
            ("python/dtorch/_lib.py", '("dt_softmax", P, (P, I))',
             '("dt_softmax", P, (P,))',
             "dt_softmax takes 1 arguments, its prototype in include/dtorch 2"),
        ]
    with tempfile.TemporaryDirectory() as tmp:
        base = pathlib.Path(tmp) / "base"
        for d in ("core", "ops", "include", "python/dtorch"):
            shutil.copytree(src / d, base / d,
                            ignore=shutil.ignore_patterns("__pycache__"))
        clean = check_tree(base, lib)
        if clean:
            print("self-test: the unplanted tree fails:\n" + "\n".join(clean))
            return 1
        for i, (rel, old, new, expect) in enumerate(cases):
            tree = pathlib.Path(tmp) / ("case%d" % i)
            shutil.copytree(base, tree)
            plant(tree, rel, old, new)
            found = check_tree(tree, lib)
            if not any(expect in f for f in found):
                print("self-test: planting %r in %s was not caught (expected "
                      "%r); findings: %s" % (new, rel, expect, found))
                return 1
            print("self-test: caught %s: %s" % (rel, expect))
    print("self-test: ok (the unplanted tree passes)")
    return 0


def main(argv):
    root = pathlib.Path(__file__).resolve().parent.parent
    lib, selftest, i = None, False, 0
    while i < len(argv):
        if argv[i] == "--root" and i + 1 < len(argv):
            root, i = pathlib.Path(argv[i + 1]), i + 2
        elif argv[i] == "--lib" and i + 1 < len(argv):
            lib, i = pathlib.Path(argv[i + 1]).resolve(), i + 2
        elif argv[i] == "--self-test":
            selftest, i = True, i + 1
        else:
            print(__doc__, file=sys.stderr)
            return 2
    if selftest:
        return self_test(root, lib)
    findings = check_tree(root, lib)
    for f in findings:
        print(f)
    n = len(op_entries((root / "core" / "op_list.h").read_text()))
    print("op columns: %d op(s), %d finding(s)%s" %
          (n, len(findings), "" if lib else " (no --lib: the Python binding "
                                              "was not checked)"))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
