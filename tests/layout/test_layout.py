"""The layout shows the architecture (docs/architecture.md): each library is
one folder and carries its name, the layers include downwards only, the
constraint compiler (fsm/) and the utilities (util/) stand alone, and a
folder's internal/ headers are its own.

Read off the sources and CMakeLists.txt; nothing is built."""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]

# Each library's folder, and its layer: a folder includes only folders of
# lower layers (and itself). fsm/ and the backends share a layer and never
# include each other; kernels/ is the CUDA backend's device half, and the two
# share their headers (kernels/kernels.h, src/backend/cuda.h).
ONE_COMPONENT = {("kernels", "src/backend"), ("src/backend", "kernels")}
LAYERS = {
    "util": 0,
    "kernels": 2,
    "fsm": 2,
    "src/backend": 2,
    "src/model": 3,
    "src/tokenizer": 4,
    "src/constraint": 5,
    "src/chat": 5,
    "src/engine": 6,
    "src/api": 7,
    "src/batch": 8,
    "src/server": 9,
    "src/cli": 10,
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(path):
    """The library folder a repository path is in, or None."""
    for f in sorted(LAYERS, key=len, reverse=True):
        if path == f or path.startswith(f + "/"):
            return f
    return None


def sources():
    for f in LAYERS:
        for p in sorted((ROOT / f).rglob("*")):
            if p.suffix in (".c", ".h", ".cu", ".cuh"):
                yield p.relative_to(ROOT).as_posix()


def includes(path):
    """The repository files path includes (resolved as the compiler does:
    beside it first, then from the repository root)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    for inc in INCLUDE.findall(text):
        beside = (ROOT / path).parent / inc
        if beside.is_file():
            yield inc, beside.resolve().relative_to(ROOT).as_posix()
        elif (ROOT / inc).is_file():
            yield inc, inc


def libraries():
    """{target: [source, ...]} from CMakeLists.txt's add_library blocks and
    target_sources lines."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    libs = {}
    for name, body in re.findall(r"add_library\((sieve\w+) STATIC\s+([^)]*)\)", text):
        libs.setdefault(name, []).extend(body.split())
    for name, body in re.findall(r"target_sources\((sieve\w+) PRIVATE\s+([^)]*)\)", text):
        libs.setdefault(name, []).extend(body.split())
    return libs


def test_each_library_is_one_folder_named_after_it():
    libs = libraries()
    assert len(libs) >= 10, libs
    seen = {}
    for name, srcs in libs.items():
        assert srcs, name
        for s in srcs:
            folder = folder_of(s)
            assert folder is not None, (name, s)
            assert name == "sieve" + folder.split("/")[-1], f"{s} is in {name}, not sieve{folder.split('/')[-1]}"
            assert s not in seen, f"{s} is in both {seen[s]} and {name}"
            seen[s] = name
    # and every source of a library folder is built into its library
    for f in LAYERS:
        if f == "src/cli":
            continue
        for p in (ROOT / f).rglob("*"):
            if p.suffix in (".c", ".cu"):
                rel = p.relative_to(ROOT).as_posix()
                assert rel in seen, f"{rel} is in no library"


def test_layers_include_downwards_only():
    bad = []
    for path in sources():
        here = folder_of(path)
        for _, target in includes(path):
            there = folder_of(target)
            if there is None or there == here or (here, there) in ONE_COMPONENT:
                continue
            if LAYERS[there] >= LAYERS[here]:
                bad.append(f"{path} includes {target}")
    assert not bad, "\n".join(bad)


def test_the_compiler_and_the_utilities_stand_alone():
    bad = [f"{p} includes {t}" for p in sources() if folder_of(p) in ("util", "fsm")
           for _, t in includes(p) if folder_of(t) not in ("util", "fsm")]
    assert not bad, "\n".join(bad)


def test_internal_headers_stay_in_their_folder():
    internal = {p for p in sources() if "/internal/" in p}
    assert internal, "no internal/ headers found"
    bad = []
    everything = list(sources()) + [p.relative_to(ROOT).as_posix() for d in ("tests", "fuzz")
                                    for p in (ROOT / d).rglob("*.c")]
    for path in everything:
        for _, target in includes(path):
            if target in internal and folder_of(target) != folder_of(path) and \
                    not path.startswith(("tests/", "fuzz/")):  # white-box tests
                bad.append(f"{path} includes {target}")
    assert not bad, "\n".join(bad)


def test_includes_name_files_from_the_root_or_beside():
    """One include style: a path from the repository root, or a file beside
    the including one; never a path that climbs out with '..'."""
    bad = [f"{p}: {inc}" for p in sources() for inc, _ in includes(p) if ".." in inc.split("/")]
    assert not bad, "\n".join(bad)
