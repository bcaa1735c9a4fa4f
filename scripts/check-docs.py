#!/usr/bin/env python3
"""The doc check: documents and comments name only what exists.

Fails when a Markdown page (README.md, docs/, python/, examples/) or a
comment in the sources names
  1. a repository path (`runtime/exec.c`, `docs/io.md`) that does not exist,
     or a relative Markdown link whose target does not;
  2. a `dt_` function, type or `DT_` macro, or an internal function of a
     module (`sched_pool_claim(`, `mesh_plan(`...), that no code defines
     or uses;
  3. a `DTORCH_` environment variable or build option no code reads;
  5. a document the reader lacks ("seed 003", "issue 12");
  4. a `dtorch <command> --flag` the command line tool does not parse;
and when a C block of README.md does not compile against the public header
(`cc -fsyntax-only`), unless the line before it is `<!-- fragment -->`.

Grep-level on purpose: what other projects name (PyTorch, NCCL, MPI, libc)
is not checked, because their names carry no dtorch prefix. A line may opt
out with `doc-check: ignore` (for text that quotes a stale name on purpose).

Usage: scripts/check-docs.py [--root DIR] [--no-compile]
       scripts/check-docs.py --self-test   (plants a stale name of each kind
       in a copy of the tree and checks that each one fails)
Exit 1 on a finding.
"""
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile

FOLDERS = ("api bench cmake core dispatch docs examples include kernels mesh "
           "ops python runtime scripts sched sim tests tools .ci").split()
CODE_EXT = (".c", ".h", ".cu", ".cuh", ".py", ".sh", ".cmake", ".in", ".map",
            ".conf", ".toml")
MODULES = ("core sched mesh runtime dispatch ops sim cpu cuda api tools "
           "bench").split()
SKIP_DIRS = {".git", "__pycache__", "node_modules"}

PATH_RE = re.compile(r"(?<![\w/.$<{-])((?:%s)/[\w./+*-]*[\w*/])" %
                     "|".join(re.escape(f) for f in FOLDERS))
LINK_RE = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
DT_RE = re.compile(r"\b(dt_[a-z0-9_]+|DT_[A-Z0-9_]+)\b")
INTERNAL_RE = re.compile(r"\b((?:%s)_[a-z0-9_]+)\s*\(" % "|".join(MODULES))
TICK_RE = re.compile(r"`([^`\n]+)`")
ENV_RE = re.compile(r"\b(DTORCH_[A-Z0-9_]*[A-Z0-9])\b")
CLI_RE = re.compile(r"\bdtorch\s+(demo|stress|bench|trace|dry-run|info|help)"
                    r"((?:\s+[^\s`|]+)*)")
FLAG_RE = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
IDENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# documents a reader of this repository does not have: the project's
# source documents and its issue tracker
PRIVATE_RE = re.compile(r"\bseed[ _]?0\d\d|\bseed (?:document|doc)s?\b|"
                        r"\bissue #?\d+\b", re.I)


def walk(root):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and
                   not (d == root and x.startswith("build"))]
        for f in files:
            yield os.path.relpath(os.path.join(d, f), root)


def read(root, rel):
    try:
        with open(os.path.join(root, rel), encoding="utf-8",
                  errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def split_c(text):
    """(code with comments blanked, [(line, comment text)]) of C source"""
    code, comments, i, n, line = [], [], 0, len(text), 1
    while i < n:
        c = text[i]
        if text.startswith("/*", i) or text.startswith("//", i):
            block = text.startswith("/*", i)
            end = text.find("*/", i + 2) if block else text.find("\n", i)
            end = n if end < 0 else end + (2 if block else 0)
            body = text[i:end]
            for k, part in enumerate(body.split("\n")):
                comments.append((line + k, part))
            line += body.count("\n")
            code.append("\n" * body.count("\n"))
            i = end
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            code.append(text[i:j + 1])
            i = j + 1
        else:
            if c == "\n":
                line += 1
            code.append(c)
            i += 1
    return "".join(code), comments


def split_hash(text):
    """the same for languages with # comments (a # inside quotes stays)"""
    code, comments = [], []
    for ln, row in enumerate(text.split("\n"), 1):
        m = re.match(r"^((?:[^#\"']|\"[^\"]*\"|'[^']*')*)#(.*)$", row)
        if m and not row.lstrip().startswith("#!"):
            code.append(m.group(1))
            comments.append((ln, m.group(2)))
        else:
            code.append(row)
    return "\n".join(code), comments


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = set(walk(root))
        self.dirs = {os.path.dirname(f) for f in self.files}
        for d in list(self.dirs):
            while d:
                d = os.path.dirname(d)
                self.dirs.add(d)
        self.idents, self.flags, self.texts = set(), set(), []
        self.prefixes = None
        for rel in sorted(self.files):
            self.scan(rel)

    def scan(self, rel):
        base = os.path.basename(rel)
        if rel.endswith(".md"):
            self.texts.append((rel, list(enumerate(read(self.root, rel)
                                                    .split("\n"), 1))))
            return
        if not (rel.endswith(CODE_EXT) or base in ("CMakeLists.txt",
                                                    "Makefile", "run")):
            return
        if rel.startswith("scripts/check-docs"):
            return  # this script names stale things on purpose
        text = read(self.root, rel)
        if rel.endswith((".c", ".h", ".cu", ".cuh")):
            code, comments = split_c(text)
        else:
            code, comments = split_hash(text)
        self.idents.update(IDENT_RE.findall(code))
        if rel.startswith(("tools/", "bench/")):
            self.flags.update(re.findall(r"\"(--[a-z][a-z0-9-]*)", code))
        self.texts.append((rel, comments))

    def path_exists(self, p):
        if "*" in p:
            return any(fnmatch.fnmatch(f, p) for f in self.files)
        p = p.rstrip("./")
        return p in self.files or p in self.dirs

    def known(self, name):
        """an identifier the code has, or the prefix of a family of them
        (`dt_comm_count` for dt_comm_count_begin / _end)"""
        if name in self.idents:
            return True
        if self.prefixes is None:
            self.prefixes = set()
            for i in self.idents:
                for k in range(1, i.count("_") + 1):
                    self.prefixes.add(i.rsplit("_", k)[0])
        return name in self.prefixes


def check_line(tree, rel, ln, s, out):
    if "doc-check: ignore" in s:
        return
    where = "%s:%d" % (rel, ln)
    for ref in PRIVATE_RE.findall(s):
        out.append("%s: cites %r, a document the reader does not have: "
                   "name the public source or say it in our words" % (where, ref))
    for p in PATH_RE.findall(s):
        p = p.rstrip(".")
        # a path names a file (an extension) or a folder (a trailing /);
        # prose such as "include/exclude" is neither
        if not (re.search(r"\.\w+$", p) or p.endswith("/") or "*" in p):
            continue
        if not tree.path_exists(p):
            out.append("%s: names file %s, which does not exist" % (where, p))
    if rel.endswith(".md"):
        for t in LINK_RE.findall(s):
            if re.match(r"^[a-z]+:", t):
                continue
            dest = os.path.normpath(os.path.join(os.path.dirname(rel), t))
            if not tree.path_exists(dest):
                out.append("%s: links to %s, which does not exist" % (where, t))
    for name in DT_RE.findall(s):
        if not tree.known(name) and not name.endswith("_"):
            out.append("%s: names %s, which no code defines or uses" % (where, name))
    internal = set(INTERNAL_RE.findall(s))
    for tick in TICK_RE.findall(s):
        tick = re.sub(r"[\w./-]*/[\w./-]*|\w+\.\w+", " ", tick)  # paths
        internal.update(m for m in IDENT_RE.findall(tick)
                        if m.split("_")[0] in MODULES and "_" in m and
                        m.islower())
    for name in internal:
        if not tree.known(name) and not name.endswith("_"):
            out.append("%s: names function %s, which does not exist" % (where, name))
    for var in ENV_RE.findall(s):
        if var not in tree.idents:
            out.append("%s: names variable %s, which no code reads" % (where, var))
    for cmd, rest in CLI_RE.findall(s):
        for flag in FLAG_RE.findall(rest):
            if flag not in tree.flags and flag not in ("--help",):
                out.append("%s: names flag dtorch %s %s, which the tool does "
                           "not parse" % (where, cmd, flag))


def c_blocks(text):
    """(line, code) of each ```c block not marked as a fragment"""
    rows, blocks, i = text.split("\n"), [], 0
    while i < len(rows):
        if rows[i].strip() == "```c":
            frag = i > 0 and "<!-- fragment -->" in rows[i - 1]
            j = i + 1
            while j < len(rows) and rows[j].strip() != "```":
                j += 1
            if not frag:
                blocks.append((i + 1, "\n".join(rows[i + 1:j])))
            i = j
        i += 1
    return blocks


PRELUDE = ("#include <dtorch/dtorch.h>\n#include <dtorch/spmd.h>\n"
           "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n")


def compiles(cc, inc, code):
    r = subprocess.run([cc, "-std=gnu11", "-fsyntax-only", "-Wall",
                        "-Wno-unused", "-I", inc, "-x", "c", "-"],
                       input=code, capture_output=True, text=True)
    return r.returncode == 0, r.stderr


def check_compile(tree, out):
    """a block compiles as a file or, as statements, as a function's body;
    the public headers and stdio/stdlib/string come first"""
    cc = os.environ.get("CC", "cc")
    inc = os.path.join(tree.root, "include")
    for ln, code in c_blocks(read(tree.root, "README.md")):
        ok, err = compiles(cc, inc, PRELUDE + code)
        if not ok:
            ok, err2 = compiles(cc, inc, PRELUDE + "void readme_block(void) {\n"
                                + code + "\n}\n")
            if "not in a function" in err or "not constant" in err:
                err = err2  # statements: the body's error says more
        if not ok:
            first = next((e for e in err.split("\n") if "error" in e), err)
            out.append("README.md:%d: the C block does not compile (mark it "
                       "<!-- fragment --> if it is one): %s" % (ln, first.strip()))


def check(root, compile_blocks=True):
    tree = Tree(root)
    out = [f + ": a file named after a document the reader does not have"
           for f in sorted(tree.files) if PRIVATE_RE.search(f.replace("_", " "))]
    for rel, lines in tree.texts:
        fence = False
        for ln, s in lines:
            if rel.endswith(".md") and s.strip().startswith("```"):
                fence = not fence
            check_line(tree, rel, ln, s, out)
    if compile_blocks:
        check_compile(tree, out)
    return out


def self_test(src):
    cases = [  # (file, line to add, what the finding must say)
        ("docs/engine.md", "See `runtime/op_table.h`.", "names file runtime/op_table.h"),
        ("docs/engine.md", "Call `dt_tensor_frobnicate()`.", "names dt_tensor_frobnicate"),
        ("docs/engine.md", "The pool's `sched_pool_frobnicate(p)`.", "names function sched_pool_frobnicate"),
        ("docs/engine.md", "Set `DTORCH_FROBNICATE=1`.", "names variable DTORCH_FROBNICATE"),
        ("docs/engine.md", "Run `dtorch demo --frobnicate`.", "names flag dtorch demo --frobnicate"),
        ("core/error.h", "/* see mesh/frobnicate.c */", "names file mesh/frobnicate.c"),
        ("docs/engine.md", "[gone](nowhere.md)", "links to nowhere.md"),
        ("sched/pool.c", "/* as issue 12 asked */", "a document the reader does not have"),
        ("README.md", "\n```c\nint f(void) { return undeclared_thing; }\n```\n",
         "the C block does not compile"),
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for rel, line, want in cases:
            t = os.path.join(tmp, "t")
            shutil.rmtree(t, ignore_errors=True)
            shutil.copytree(src, t, ignore=shutil.ignore_patterns(
                ".git", "build*", "__pycache__"))
            with open(os.path.join(t, rel), "a") as fh:
                fh.write("\n" + line + "\n")
            found = check(t, compile_blocks=rel == "README.md")
            if not any(want in f for f in found):
                print("self-test: planting %r in %s was not caught (wanted %r)"
                      % (line, rel, want), file=sys.stderr)
                return 1
            print("self-test: caught %s += %s" % (rel, line.strip()))
    found = check(src)
    if found:
        print("self-test: the unplanted tree fails:\n" + "\n".join(found),
              file=sys.stderr)
        return 1
    print("self-test: ok (the unplanted tree passes)")
    return 0


def main(argv):
    root = os.path.normpath(os.path.join(os.path.dirname(__file__), ".."))
    compile_blocks = True
    args = list(argv)
    while args:
        a = args.pop(0)
        if a == "--root":
            root = args.pop(0)
        elif a == "--no-compile":
            compile_blocks = False
        elif a == "--self-test":
            return self_test(root)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    found = check(root, compile_blocks)
    for f in found:
        print(f)
    if found:
        print("doc check: %d finding(s)" % len(found), file=sys.stderr)
        return 1
    print("doc check: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
