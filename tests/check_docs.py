#!/usr/bin/env python3
"""check_docs.py -- fails when the prose about src/ and the code disagree (issue #43).

Checks, from the repository's files alone:
  * docs/ARCHITECTURE.md's file table names every file of src/<layer>/ (the .c files, and
    the headers a row names in parentheses) under its own layer's heading, and nothing
    that does not exist;
  * its layer table lists the folders of src/ in the order CMakeLists.txt's CRD_LAYERS
    compiles them, and base.h's layer list names the same folders and files;
  * the lock order it states is the one base.h states;
  * every file of src/ opens with a comment that starts with its own name;
  * the CLI's commands: the command table of cli/main.c, its usage text, the bash
    completion and the man page name the same commands.
Usage: check_docs.py [REPO]; exit 1 with one line per disagreement.
"""
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")
errors = []


def read(*p):
    with open(os.path.join(root, *p), encoding="utf-8") as f:
        return f.read()


def err(msg):
    errors.append(msg)


# ---- layers and files ------------------------------------------------------------------
cmake = read("CMakeLists.txt")
m = re.search(r"set\(CRD_LAYERS ([a-z ]+)\)", cmake)
layers = m.group(1).split() if m else []
if not layers:
    err("CMakeLists.txt: no set(CRD_LAYERS ...)")
on_disk = {}
for layer in layers:
    d = os.path.join(root, "src", layer)
    for f in sorted(os.listdir(d)):
        if f.endswith((".c", ".h")):
            on_disk["src/%s/%s" % (layer, f)] = layer
for d in sorted(os.listdir(os.path.join(root, "src"))):
    if os.path.isdir(os.path.join(root, "src", d)) and d not in layers:
        err("src/%s/ is not a layer of CMakeLists.txt's CRD_LAYERS" % d)

arch = read("docs", "ARCHITECTURE.md")
table = arch[arch.index("## Files, threads and mutexes"):arch.index("## The engine")]
in_table = {}
current = None
for line in table.splitlines():
    h = re.match(r"\| \*\*([a-z]+)\*\* \|", line)
    if h:
        current = h.group(1)
        continue
    if not line.startswith("| `src/"):
        continue
    first = line.split("|")[1]
    base_dir = None
    for name in re.findall(r"`([^`]+)`", first):
        if name.startswith("src/"):
            base_dir = os.path.dirname(name)
            path = name
        elif base_dir is not None and re.match(r"^[\w]+\.[ch]$", name):
            path = base_dir + "/" + name
        else:
            continue
        in_table[path] = current
lt = arch[arch.index("## The layers"):arch.index("## Where things are decided")]
listed = re.findall(r"^\| `src/([a-z]+)/` \(`([a-z]+\.h)`\)", lt, re.M)
for layer, header in listed:
    in_table.setdefault("src/%s/%s" % (layer, header), layer)
for path, layer in on_disk.items():
    if path not in in_table:
        err("docs/ARCHITECTURE.md's file table does not name %s" % path)
    elif in_table[path] != layer:
        err("docs/ARCHITECTURE.md puts %s under %s, its folder is %s" % (path, in_table[path], layer))
for path in in_table:
    if path not in on_disk:
        err("docs/ARCHITECTURE.md's file table names %s, which does not exist" % path)

if [l for l, _ in listed] != layers:
    err("docs/ARCHITECTURE.md's layer table lists %s, CMake compiles %s" % ([l for l, _ in listed], layers))
for layer, header in listed:
    if "src/%s/%s" % (layer, header) not in on_disk:
        err("docs/ARCHITECTURE.md: the header of %s is %s, which does not exist" % (layer, header))

base = read("src", "base", "base.h")
blist = re.findall(r"^ \*   ([a-z]+)/([a-z]+\.h) +(.*)$", base, re.M)
if [l for l, _, _ in blist] != layers:
    err("base.h's layer list names %s, CMake compiles %s" % ([l for l, _, _ in blist], layers))
text = base[:base.index("A lower layer reaches")]
for path, layer in on_disk.items():
    f = os.path.basename(path)
    if f.endswith(".c") and not re.search(r"\b%s\b" % re.escape(f), text):
        err("base.h's layer list does not name %s" % path)

# ---- the lock order ----------------------------------------------------------------------
def order(text, where):
    m = re.search(r"Lock order[^:]*:\s*(.*?)\.\s", text, re.S)
    if not m:
        err("%s states no lock order" % where)
        return []
    names = re.findall(r"`?([a-z_]+(?:->[a-z_]+)?)`?\s*(?:→|->|$)", re.sub(r"\s*\*\s*", " ", m.group(1)))
    return [n for n in names if n]


a_order, b_order = order(arch, "docs/ARCHITECTURE.md"), order(base, "base.h")
if a_order != b_order:
    err("lock order: docs/ARCHITECTURE.md says %s, base.h says %s" % (" -> ".join(a_order), " -> ".join(b_order)))

# The ranks the fork handler takes the client's mutexes in (base.h's crd__mu_rank) are the
# documented order after registry_mu (off->mu, a leaf, goes first there only).
ranks = re.findall(r"CRD__MU_[A-Z]+,\s*/\* ([a-z_]+->[a-z_]+) ", base)
if [r for r in ranks if r != "off->mu"] != [n for n in a_order if n != "registry_mu"]:
    err("base.h's crd__mu_rank takes %s, the documented order is %s" % (ranks, a_order))

# ---- file heads ----------------------------------------------------------------------------
for path in on_disk:
    head = read(*path.split("/"))[:400]
    name = os.path.basename(path)
    if not re.match(r"/\*\n \* %s(?: \(|,| and| --)" % re.escape(name), head):
        err("%s does not open with a comment naming it ('/*\\n * %s -- ...')" % (path, name))

# ---- one version ------------------------------------------------------------------------------
hdr = read("include", "credisson.h")
v = re.search(r'#define CRD_VERSION_STRING "([0-9.]+)"', hdr).group(1)
parts = tuple(int(x) for x in v.split("."))
for name in ("MAJOR", "MINOR", "PATCH"):
    m = re.search(r"#define CRD_VERSION_%s (\d+)" % name, hdr)
    if int(m.group(1)) != parts[("MAJOR", "MINOR", "PATCH").index(name)]:
        err("credisson.h: CRD_VERSION_%s disagrees with CRD_VERSION_STRING %s" % (name, v))
for where, pat in (("man/credisson.1", r'"credisson ([0-9.]+)"'),
                   ("bindings/python/pyproject.toml", r'^version = "([0-9.]+)"'),
                   ("bindings/python/credisson/__init__.py", r'^__version__ = "([0-9.]+)"')):
    if not os.path.exists(os.path.join(root, where)):
        continue
    m = re.search(pat, read(*where.split("/")), re.M)
    if m is None or m.group(1) != v:
        err("%s says version %s, credisson.h %s" % (where, m.group(1) if m else "none", v))
if "## %s" % v not in read("CHANGES.md"):
    err("CHANGES.md has no section for %s" % v)
for m in re.finditer(r"[Aa]dded (?:in|after) (\d+)\.(\d+)", hdr):
    if (int(m.group(1)), int(m.group(2))) > parts[:2]:
        err("credisson.h says 'added in %s.%s', the version is %s" % (m.group(1), m.group(2), v))
if re.search(r"[Aa]dded after \d", hdr):
    err("credisson.h: an 'added after' note; name the version that added it")

# ---- the CLI's commands ----------------------------------------------------------------------
main = read("cli", "main.c")
tbl = re.search(r"COMMANDS\[\]\s*=\s*\{(.*?)\};", main, re.S)
if tbl:
    commands = re.findall(r'\{\s*"([a-z-]+)"', tbl.group(1))
    comp = read("cli", "credisson.bash")
    man = read("man", "credisson.1")
    m = re.search(r'commands="([^"]*)"', comp)
    comp_cmds = m.group(1).split() if m else []
    if sorted(comp_cmds) != sorted(commands):
        err("cli/credisson.bash completes %s, cli/main.c's table has %s" % (comp_cmds, commands))
    for c in commands:
        if not re.search(r'^\.SS "?%s\b' % re.escape(c), man, re.M) and \
           not re.search(r"^\.B %s\b" % re.escape(c), man, re.M):
            err("man/credisson.1 has no section for the command %s" % c)

for e in errors:
    print("check_docs: " + e)
sys.exit(1 if errors else 0)
