"""`load_policy`: files and directories -> parsed modules (includes resolved) -> compiled policy.

The one validator: `gpuwarden policy check`, the agent's start and its hot reload all call this,
so they accept and reject exactly the same policies.
"""

from __future__ import annotations

import contextlib
import errno
import gc
import hashlib
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from policy import ast
from policy.compiler import CompiledPolicy, compile_modules
from policy.diagnostics import Diagnostic, Severity, Span, closest, source_lines
from policy.parser import parse_recovering

__all__ = [
    "PARSE_CACHE",
    "POLICY_SUFFIX",
    "SUPPORTED_VERSIONS",
    "LoadResult",
    "load_policy",
    "load_texts",
    "parse_cached",
]

POLICY_SUFFIX = ".gwp"
SUPPORTED_VERSIONS = ("1",)
_GLOB_CHARS = set("*?[")
_Reader = Callable[[Path], str]


@dataclass(frozen=True)
class LoadResult:
    policy: CompiledPolicy | None
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return self.policy is not None and not any(d.is_error for d in self.diagnostics)

    @property
    def errors(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if d.is_error]

    @property
    def warnings(self) -> list[Diagnostic]:
        return [d for d in self.diagnostics if not d.is_error]


def display_path(path: Path) -> str:
    """Relative to the working directory when below it, as users wrote it; else absolute."""
    try:
        return os.path.relpath(path) if not os.path.relpath(path).startswith("..") else str(path)
    except ValueError:  # another drive (not on Linux, but harmless)
        return str(path)


class _Loader:
    def __init__(self, reader: _Reader) -> None:
        self.read = reader
        self.modules: list[ast.Module] = []
        self.keys: list[tuple[str, str]] = []  # (name, sha256) of every file read, in order
        self.loaded: set[str] = set()
        self.diagnostics: list[Diagnostic] = []
        # per file: does it (transitively) define any block?
        self.contributes: dict[str, bool] = {}

    def error(self, code: str, span: Span, msg: str, hint: str | None = None,
              severity: Severity = Severity.ERROR, source: str = "") -> None:
        self.diagnostics.append(Diagnostic(code, severity, span, msg, hint, source))

    def load_file(self, path: Path, stack: tuple[str, ...], via: tuple[Span, str] | None) -> bool:
        """Parse `path` and what it includes (depth first); returns whether it defines anything."""
        key = str(path.resolve()) if path.exists() else str(path.absolute())
        shown = display_path(path)
        if key in stack:
            chain = [display_path(Path(p)) for p in stack[stack.index(key):]] + [shown]
            assert via is not None
            self.error("GW016", via[0], "include cycle: " + " -> ".join(chain),
                       "remove one of these includes", source=via[1])
            return False
        if key in self.loaded:
            return self.contributes.get(key, False)
        self.loaded.add(key)
        try:
            text = self.read(path)
        except (OSError, UnicodeDecodeError) as err:
            span, src = via if via else (Span.point(shown), "")
            reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
            self.error("GW019", span, f"cannot read {shown}: {reason}", source=src)
            return False
        module, diags = parse_cached(text, shown)
        self.keys.append(content_key(text, shown))
        self.diagnostics.extend(diags)
        if module is None:
            self.contributes[key] = True  # unknown; do not also warn that it adds nothing
            return True
        lines = source_lines(text)
        self._check_version(module, lines)
        defines = False
        for item in module.items:
            if isinstance(item, ast.Include):
                added = self._include(path, item, (*stack, key), lines)
                defines = defines or added
            elif isinstance(item, ast.Block):
                defines = True
        # Blocks count at the position of the file (after what it includes): append now.
        self.modules.append(module)
        self.contributes[key] = defines
        return defines

    def _check_version(self, module: ast.Module, lines: list[str]) -> None:
        versions = [i for i in module.items if isinstance(i, ast.Version)]
        src = lines[0] if lines else ""
        if not versions:
            first = module.items[0].span if module.items else Span.point(module.file)
            self.error("GW004", Span(module.file, first.line, first.col, first.line,
                                     first.col + 1),
                       "missing version header", "start the file with `version 1`",
                       source=lines[first.line - 1] if 0 < first.line <= len(lines) else src)
            return
        head = versions[0]
        src = lines[head.span.line - 1]
        if module.items[0] is not head:
            self.error("GW004", head.span, "`version` must come before everything else",
                       "move `version 1` to the top of the file", source=src)
        if head.number.text not in SUPPORTED_VERSIONS:
            self.error("GW004", head.number.span,
                       f"unsupported policy version {head.number.text}",
                       "this gpuwarden reads `version 1`", source=src)
        for extra in versions[1:]:
            self.error("GW004", extra.span, "a second `version` header",
                       "keep one `version 1` at the top",
                       source=lines[extra.span.line - 1])

    def _include(self, path: Path, inc: ast.Include, stack: tuple[str, ...],
                 lines: list[str]) -> bool:
        src = lines[inc.span.line - 1]
        target = inc.path.string
        base = path.parent
        if not target.strip():
            self.error("GW015", inc.path.span, "include path is empty", source=src)
            return False
        if os.path.isabs(target):
            self.error("GW015", inc.path.span, f"include path `{target}` is absolute",
                       "includes are relative to the including file, so a policy set can be "
                       "moved and checked anywhere", source=src)
            return False
        if _GLOB_CHARS & set(target):
            matches = _glob(base, target)
            if matches is None:
                self.error("GW015", inc.path.span, f"include `{target}` matches more than "
                           f"{MAX_GLOB_FILES} files", "narrow the pattern", source=src)
                return False
            if not matches:
                self.error("GW103", inc.path.span, f"include `{target}` matches no files",
                           f"looked in {display_path(base)}", Severity.WARNING, source=src)
                return False
        else:
            candidate = base / target
            if candidate.is_dir():
                matches = sorted(candidate.glob(f"*{POLICY_SUFFIX}"))
            elif candidate.is_file():
                matches = [candidate]
            else:
                siblings = [p.name for p in candidate.parent.glob("*")] if (
                    candidate.parent.is_dir()) else []
                guess = closest(candidate.name, siblings)
                hint = f"did you mean `{Path(target).parent / guess}`?" if guess else (
                    f"paths are relative to {display_path(base)}")
                self.error("GW015", inc.path.span,
                           f"include `{target}` not found ({display_path(candidate)})",
                           hint.replace("./", "") if guess else hint, source=src)
                return False
        defines = False
        for m in matches:
            defines = self.load_file(m, stack, (inc.path.span, src)) or defines
        if not defines and not any(d.code == "GW016" and d.span == inc.path.span
                                   for d in self.diagnostics):
            self.error("GW103", inc.path.span, f"include `{target}` adds nothing",
                       "the included files define no rules, defaults or unmanaged block",
                       Severity.WARNING, source=src)
        return defines


MAX_FILE_BYTES = 4 << 20  # far above any real policy file; bounds memory and parse time


def _read(path: Path) -> str:
    """A policy file's text. Only regular files are read (a FIFO would block for ever, a
    symlink to /dev/zero never end), at most MAX_FILE_BYTES."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, "it is not a regular file (a FIFO, device or socket)")
        if st.st_size > MAX_FILE_BYTES:
            raise OSError(errno.EFBIG, f"it is {st.st_size} bytes, a policy file may have at "
                          f"most {MAX_FILE_BYTES}")
        data = os.read(fd, MAX_FILE_BYTES + 1)
        while len(data) <= MAX_FILE_BYTES and (more := os.read(fd, MAX_FILE_BYTES + 1 -
                                                               len(data))):
            data += more
        if len(data) > MAX_FILE_BYTES:
            raise OSError(errno.EFBIG, f"it has more than {MAX_FILE_BYTES} bytes")
    finally:
        os.close(fd)
    return data.decode("utf-8")


MAX_GLOB_FILES = 1000


def _glob(base: Path, pattern: str) -> list[Path] | None:
    """Files under base matching an include pattern, sorted; None beyond MAX_GLOB_FILES.
    `**` never follows a symlink to a directory (pathlib's rule), so a symlink loop beside the
    policy cannot make the walk endless."""
    found: list[Path] = []
    try:
        for p in base.glob(pattern):
            if p.is_file():
                found.append(p)
                if len(found) > MAX_GLOB_FILES:
                    return None
    except (OSError, ValueError):  # an unreadable folder; a pattern pathlib refuses
        pass
    return sorted(found)


class _ParseCache:
    """Parsed files by (name, sha256 of the text): a reload re-parses only the files that
    changed (parsing is most of the cost of a large policy).  Syntax trees are immutable, so
    sharing them is safe; bounded to the most recent PARSE_CACHE_FILES files."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.entries: OrderedDict[tuple[str, str], tuple[ast.Module | None,
                                                         list[Diagnostic]]] = OrderedDict()
        self.lock = threading.Lock()
        self.hits = self.misses = 0

    def parse(self, text: str, name: str) -> tuple[ast.Module | None, list[Diagnostic]]:
        key = content_key(text, name)
        with self.lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
                self.hits += 1
                return found[0], list(found[1])
            self.misses += 1
        result = parse_recovering(text, name)
        with self.lock:
            self.entries[key] = result
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
        return result[0], list(result[1])

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.hits = self.misses = 0
        with _LAST_LOCK:
            _LAST_COMPILED.clear()


def content_key(text: str, name: str) -> tuple[str, str]:
    return name, hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


PARSE_CACHE_FILES = 512
PARSE_CACHE = _ParseCache(PARSE_CACHE_FILES)


def parse_cached(text: str, name: str) -> tuple[ast.Module | None, list[Diagnostic]]:
    return PARSE_CACHE.parse(text, name)


@contextlib.contextmanager
def _no_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a policy is built, and spare it the scan of
    what was built.  A 10,000-rule policy is about a million young objects: generation scans
    during the build made compiling twice as slow, and the first collection after it (which
    walks every object allocated meanwhile) took as long as the parse.  The build makes no
    garbage cycles (everything it drops goes by reference counting) and what it keeps lives
    as long as the policy, so on the way out the young objects go straight to the oldest
    generation (`gc.freeze()` then `gc.unfreeze()`, which moves lists, not objects): they are
    scanned again only in the collector's occasional full collections, as old objects are."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_freeze_count() == 0:  # leave a caller's own frozen objects frozen
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def load_policy(paths: Iterable[Path | str], *, reader: _Reader | None = None) -> LoadResult:
    """Load, include, validate and compile policy files.

    `paths`: files, or directories (their `*.gwp` files, not recursive, in name order).  Order
    matters for precedence: later files win ties.  Never raises for bad input.
    """
    with _no_gc():
        return _load_paths(paths, reader)


def _load_paths(paths: Iterable[Path | str], reader: _Reader | None) -> LoadResult:
    loader = _Loader(reader or _read)
    roots: list[Path] = []
    for raw in paths:
        p = Path(raw)
        shown = display_path(p)
        if p.is_dir():
            found = sorted(p.glob(f"*{POLICY_SUFFIX}"))
            if not found:
                loader.error("GW019", Span.point(shown), f"no policy files (*{POLICY_SUFFIX}) "
                             f"in directory {shown}")
            roots.extend(found)
        elif p.exists():
            roots.append(p)
        else:
            loader.error("GW019", Span.point(shown), f"{shown}: no such file or directory",
                         f"give policy files (*{POLICY_SUFFIX}) or directories holding them")
    if not roots and not loader.diagnostics:
        loader.error("GW022", Span.point("<arguments>"), "no policy files given")
    for root in roots:
        loader.load_file(root, (), None)
    return _finish(loader)


def load_texts(files: Sequence[tuple[str, str]]) -> LoadResult:
    """Compile in-memory files (name, text), without includes; for tests and tools."""
    with _no_gc():
        return _load_texts(files)


def _load_texts(files: Sequence[tuple[str, str]]) -> LoadResult:
    loader = _Loader(_read)
    for name, text in files:
        module, diags = parse_recovering(text, name)
        loader.diagnostics.extend(diags)
        if module is not None:
            loader._check_version(module, source_lines(text))
            for item in module.items:
                if isinstance(item, ast.Include):
                    loader.error("GW015", item.span, "includes need files on disk",
                                 source=source_lines(text)[item.span.line - 1])
            loader.modules.append(module)
    return _finish(loader)


# The last successful compilation, by the content keys of its files: reloading an unchanged
# policy set returns the same (immutable) CompiledPolicy without compiling again.
_LAST_COMPILED: list[tuple[tuple[tuple[str, str], ...], CompiledPolicy, list[Diagnostic]]] = []
_LAST_LOCK = threading.Lock()


def _compile(loader: _Loader) -> tuple[CompiledPolicy | None, list[Diagnostic]]:
    key = tuple(loader.keys)
    with _LAST_LOCK:
        if loader.keys and _LAST_COMPILED and _LAST_COMPILED[0][0] == key:
            return _LAST_COMPILED[0][1], list(_LAST_COMPILED[0][2])
    compiled, diags = compile_modules(loader.modules)
    if compiled is not None and loader.keys and len(loader.keys) == len(loader.modules):
        with _LAST_LOCK:
            _LAST_COMPILED[:] = [(key, compiled, list(diags))]
    return compiled, diags


def _finish(loader: _Loader) -> LoadResult:
    files = tuple(m.file for m in loader.modules)
    # Compile what parsed even when some file did not, so one run reports every error.
    compiled, diags = _compile(loader)
    all_diags = _sorted([*loader.diagnostics, *diags])
    if any(d.is_error for d in all_diags):
        compiled = None
    return LoadResult(compiled, all_diags, files)


def _sorted(diags: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diags, key=lambda d: (d.span.file, d.span.line, d.span.col, d.code))
