#!/usr/bin/env python3
"""docs/configuration.md documents every key config/load*.cpp accept, with
the default config/defaults.hpp gives it (ctest docs_config_keys).

  config_docs_test.py SOURCE_DIR

The keys come from the loader's reject_unknown() calls (the allowed keys of
each section); a section is named by the call's prefix argument, or, for a
variable prefix, by the function it is in (SECTION_OF below: a new reader
must be added there). The page's "Every key" part has a `### [SECTION]`
heading per section and a `| key | default | why |` table under it. A key
whose default is a constant of defaults.hpp (DEFAULT_OF, else the
constant of the key's own name) must show that value. examples/worker.toml
is checked the same way: a key it sets to a value differing from the
default must say so in its comment ("not the default").
"""
import glob
import re
import sys

SRC = sys.argv[1] if len(sys.argv) > 1 else "."

# (function, prefix variable) -> the sections it reads.
SECTION_OF = {
    ("read_http_kind", "hp"): ["kinds.NAME.http"],
    ("read_kinds", "p"): ["kinds.NAME"],
    ("read_periodic", "p"): ["periodic.NAME"],
    ("read_database", "p"): ["database", "databases.NAME"],
    ("read_queue", "p"): ["queues.NAME"],
    ("read_scheduler", "p"): ["scheduler"],
    ("read_node", "p"): ["nodes.NAME"],
}
# (section, key) -> constant of defaults.hpp, or None: no constant.
DEFAULT_OF = {
    ("scheduler", "threads"): "scheduler_threads",
    ("scheduler", "policy"): "scheduler_policy",
    ("http", "dashboard"): "http_dashboard",
    ("log", "format"): "log_format",
    ("periodic.NAME", "timezone"): "periodic_timezone",
    ("periodic.NAME", "catch_up"): "periodic_catch_up",
    ("periodic.NAME", "queue"): "periodic_queue",
    ("periodic.NAME", "priority"): "periodic_priority",
    ("kinds.NAME.http", "timeout"): "http_timeout",
    ("kinds.NAME", "timeout"): None,            # 0: none (config.hpp)
    ("kinds.NAME", "callback_timeout"): None,   # unset: no id before the park
    ("queues.NAME", "local_queue_size"): None,  # [worker]'s
    ("queues.NAME", "local_queue_bytes"): None,  # [worker]'s
    ("queues.NAME", "database"): "database_name",
    ("nodes.NAME", "queues"): None,
    ("periodic.NAME", "kind"): None,
    ("kinds.NAME.http", "headers"): None,
}
failures = []


def fail(msg):
    failures.append(msg)


# -- the keys config/load*.cpp accept -----------------------------------------
# The loader's files one after the other; where() names a line's own file.
load_files = sorted(glob.glob(f"{SRC}/config/load*.cpp"))
load = ""
line_file = []  # line of `load` -> (file, its line there)
for path in load_files:
    text = open(path).read()
    if not text.endswith("\n"):
        text += "\n"
    load += text
    name = path[len(SRC) + 1:]
    line_file += [(name, n + 1) for n in range(text.count("\n"))]


def where(line_no):
    name, n = line_file[line_no]
    return f"{name}:{n}"


worker_keys = re.search(r"worker_keys\(\) \{\s*static const std::set<std::string> keys\{(.*?)\};",
                        load, re.S)
worker_keys = re.findall(r'"(\w+)"', worker_keys.group(1))
accepted = {}  # section -> set of keys
function = None
lines = load.split("\n")
text_from = {}
for i, line in enumerate(lines):
    m = re.match(r"^[A-Za-z][\w:<>&*, ]*?\b(\w+)\(", line)
    if m and not line.rstrip().endswith(";"):
        function = m.group(1)
    text_from[i] = function
for m in re.finditer(r"reject_unknown\(", load):
    line_no = load.count("\n", 0, m.start())
    fn = text_from[line_no]
    if fn == "reject_unknown":
        continue  # its definition
    # the call's text up to its closing parenthesis
    depth, j = 0, m.end() - 1
    while True:
        c = load[j]
        depth += c == "("
        depth -= c == ")"
        j += 1
        if depth == 0:
            break
    call = load[m.end():j - 1]
    args = [a.strip() for a in re.split(r",(?![^{]*\})", call, maxsplit=3)]
    prefix, keys = args[2], args[3]
    if keys == "worker_keys()":
        names = list(worker_keys)
    elif keys == "known":  # read_node: the worker's keys but node, and queues
        names = [k for k in worker_keys if k != "node"] + ["queues"]
    else:
        names = re.findall(r'"(\w+)"', keys)
        if not names:
            fail(f"{where(line_no)}: cannot read the keys of reject_unknown({call})")
    if prefix == '""':
        continue  # the top level: the sections themselves
    lit = re.fullmatch(r'"([\w.]+)\."', prefix)
    if lit:
        sections = [lit.group(1)]
    elif (fn, prefix) in SECTION_OF:
        sections = SECTION_OF[(fn, prefix)]
    else:
        fail(f"{where(line_no)}: reject_unknown in {fn}() with prefix {prefix}: "
             "name its section in SECTION_OF of test/docs/config_docs_test.py")
        continue
    for s in sections:
        accepted.setdefault(s, set()).update(names)
# The worker keys a node may override are documented under [worker].
node_keys = accepted.get("nodes.NAME", set())
accepted["nodes.NAME"] = {k for k in node_keys if k not in worker_keys}
for must in ("database", "worker", "queues.NAME", "http", "periodic.NAME", "kinds.NAME"):
    if not accepted.get(must):
        fail(f"found no keys of [{must}] in config/load*.cpp: the test's parser is out of date")

# -- defaults.hpp -------------------------------------------------------------
UNIT = {"ms": 1, "s": 1000, "min": 60000, "h": 3600000}


def cpp_value(expr):
    expr = expr.strip()
    m = re.fullmatch(r'"(.*)"', expr)
    if m:
        return m.group(1)
    if expr in ("true", "false"):
        return expr == "true"
    m = re.fullmatch(r"\{(\d+)\}", expr)
    if m:
        return int(m.group(1))
    m = re.fullmatch(r"(\d[\d']*)(ms|s|min|h)", expr)
    if m:
        return int(m.group(1).replace("'", "")) * UNIT[m.group(2)]
    m = re.fullmatch(r"int64_t\{(\d+)\} << (\d+)", expr)
    if m:
        return int(m.group(1)) << int(m.group(2))
    m = re.fullmatch(r"(\d[\d']*)", expr)
    if m:
        return int(m.group(1).replace("'", ""))
    return ("unparsed", expr)


constants = {}
for m in re.finditer(r"constexpr [\w:* ]+? (\w+)(\{[^}]*\}| = [^;]+);",
                     open(f"{SRC}/config/defaults.hpp").read()):
    name, init = m.group(1), m.group(2)
    init = init[3:] if init.startswith(" = ") else init
    constants[name] = init
for name, init in list(constants.items()):  # one constant naming another
    if init in constants:
        constants[name] = constants[init]


def doc_value(text, like):
    """The documented default as the type of `like` (the constant's value)."""
    text = text.strip().strip("`").strip()
    if isinstance(like, bool):
        return {"true": True, "false": False}.get(text, ("bad", text))
    if isinstance(like, str):
        return text.strip('"') if text.startswith('"') else ("bad", text)
    m = re.fullmatch(r'"?(\d+)(ms|s|min|m|h|d|KiB|MiB|GiB)?"?', text)
    if not m:
        return ("bad", text)
    n, unit = int(m.group(1)), m.group(2)
    mult = {None: 1, "ms": 1, "s": 1000, "min": 60000, "m": 60000, "h": 3600000,
            "d": 86400000, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}[unit]
    return n * mult


def constant_of(section, key):
    if (section, key) in DEFAULT_OF:
        return DEFAULT_OF[(section, key)]
    return key if key in constants else None


# -- the page -----------------------------------------------------------------
page = open(f"{SRC}/docs/configuration.md").read()
if "## Every key" not in page:
    fail("docs/configuration.md has no '## Every key' section")
documented = {}  # section -> {key: default text}
current = []
for line in page.split("## Every key", 1)[-1].split("\n"):
    if line.startswith("### "):
        current = re.findall(r"\[([\w.]+)\]", line)
        continue
    m = re.match(r"\|\s*`(\w+)`\s*\|([^|]*)\|", line)
    if m and current:
        for s in current:
            documented.setdefault(s, {})[m.group(1)] = m.group(2)

checked = 0
for section in sorted(accepted):
    for key in sorted(accepted[section]):
        if key not in documented.get(section, {}):
            fail(f"docs/configuration.md: key '{key}' of [{section}] (config/load.cpp "
                 f"accepts it) is not in the '### [{section}]' table")
            continue
        const = constant_of(section, key)
        if const is None:
            continue
        if const not in constants:
            fail(f"test: defaults::{const} (for [{section}] {key}) not found in defaults.hpp")
            continue
        want = cpp_value(constants[const])
        got = doc_value(documented[section][key], want)
        checked += 1
        if got != want:
            fail(f"docs/configuration.md: [{section}] {key} is documented with default "
                 f"{documented[section][key].strip()}, but config/defaults.hpp has "
                 f"{const} = {constants[const]}")
for section, keys in documented.items():
    for key in keys:
        if key not in accepted.get(section, set()) and section != "nodes.NAME":
            fail(f"docs/configuration.md documents [{section}] {key}, which config/load.cpp "
                 "does not accept")

# -- examples/worker.toml: "every key, with its default" -----------------------
section = None
for n, line in enumerate(open(f"{SRC}/examples/worker.toml"), 1):
    m = re.match(r"^\[([\w.]+)\]", line)
    if m:
        section = re.sub(r"^(queues|kinds|periodic|databases|nodes)\.[^.]+", r"\1.NAME", m.group(1))
        continue
    m = re.match(r"^(\w+)\s*=\s*(\"[^\"]*\"|[\w.]+)\s*(#.*)?$", line)
    if not m or section is None:
        continue
    key, value, comment = m.group(1), m.group(2), m.group(3) or ""
    const = constant_of(section, key)
    if const is None or const not in constants or key == "node":
        continue
    want = cpp_value(constants[const])
    if doc_value(value, want) != want and "not the default" not in comment:
        fail(f"examples/worker.toml:{n}: {key} = {value}, but the default "
             f"(config/defaults.hpp {const}) is {constants[const]}")

total = sum(len(v) for v in accepted.values())
if failures:
    print("\n".join(failures))
    print(f"docs_config_keys: {len(failures)} problem(s)")
    sys.exit(1)
print(f"docs_config_keys: {total} keys in {len(accepted)} sections documented; "
      f"{checked} defaults match config/defaults.hpp")
