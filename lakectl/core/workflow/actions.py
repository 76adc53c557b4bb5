"""lakeFS action files: YAML under ``_lakefs_actions/`` naming events, branch globs and hooks;
parsed, validated, read at a ref and matched against an event.

The format is lakeFS's: ``name``, ``description``, ``on.<event>.branches`` (globs; none: every
branch, and never consulted for tag events), ``hooks[].id|type|description|properties``. Hook
types: ``webhook`` (``properties.url``, ``timeout``, ``query_params``, ``headers``) and
``command`` (``properties.command``, a program and its arguments, ``timeout``, ``env``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import TYPE_CHECKING, Any

from lakectl.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from lakectl.core.lake import Lake

PREFIX = "_lakefs_actions/"
"""Where a repository's action files live, at every ref."""

EVENTS = tuple(
    f"{when}-{verb}"
    for verb in ("commit", "merge", "create-branch", "delete-branch", "create-tag", "delete-tag")
    for when in ("pre", "post")
)
"""The events an action may name (lakeFS's, hyphenated)."""

TAG_EVENTS = frozenset(e for e in EVENTS if e.endswith("-tag"))
HOOK_TYPES = ("webhook", "command")
DEFAULT_TIMEOUT_S = 60.0
"""lakeFS's default hook timeout: one minute."""

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_HOOK_ID = re.compile(r"[A-Za-z0-9_.-]{1,128}")


@dataclass(frozen=True, slots=True)
class Hook:
    id: str
    type: str
    description: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)

    @property
    def timeout(self) -> float:
        """Seconds to wait for the hook (``properties.timeout``, a Go duration such as ``1m30s``)."""
        text = self.properties.get("timeout")
        return DEFAULT_TIMEOUT_S if text is None else parse_duration(str(text))


@dataclass(frozen=True, slots=True)
class Action:
    name: str
    on: Mapping[str, tuple[str, ...]]
    """Event name → branch globs (empty: every branch)."""
    hooks: tuple[Hook, ...]
    description: str = ""

    def matches(self, event_type: str, branch: str) -> bool:
        if event_type not in self.on:
            return False
        globs = self.on[event_type]
        if not globs or event_type in TAG_EVENTS:
            return True
        return any(fnmatchcase(branch, g) for g in globs)


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``90s``, ``1m30s``, ``500ms``); ``InvalidArgument`` otherwise."""
    text = text.strip()
    pos, total = 0, 0.0
    for m in _DURATION.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT_S[m.group(2)]
        pos = m.end()
    if not text or pos != len(text) or total <= 0:
        raise InvalidArgument(f"timeout {text!r} is no positive duration (e.g. 30s, 1m30s, 500ms)")
    return total


def parse(text: str | bytes, source: str) -> Action:
    """The action in ``text`` (YAML); ``InvalidArgument`` naming ``source`` and what is wrong."""
    import yaml

    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise InvalidArgument(f"{source}: invalid YAML: {e}", path=source) from e
    try:
        return _action(data, source)
    except _Bad as e:
        raise InvalidArgument(f"{source}: {e}", path=source) from None


class _Bad(Exception):
    pass


def _text(value: Any, what: str, required: bool = False) -> str:
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _Bad(f"{what} must be {'a non-empty' if required else 'a'} string, not {value!r}")
    return value


def _action(data: Any, source: str) -> Action:
    if not isinstance(data, dict):
        raise _Bad("an action file holds a mapping (name, on, hooks)")
    # YAML 1.1 reads a bare `on:` key as the boolean true.
    data = {("on" if k is True else k): v for k, v in data.items()}
    unknown = set(data) - {"name", "description", "on", "hooks"}
    if unknown:
        raise _Bad(f"unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    stem = source.rsplit("/", 1)[-1]
    name = _text(data.get("name"), "name") or stem
    on = data.get("on")
    if not isinstance(on, dict) or not on:
        raise _Bad(f"'on' must map events to their branches (events: {', '.join(EVENTS)})")
    events: dict[str, tuple[str, ...]] = {}
    for event, spec in on.items():
        if event not in EVENTS:
            raise _Bad(f"unknown event {event!r} (events: {', '.join(EVENTS)})")
        events[event] = _branches(event, spec)
    hooks = data.get("hooks")
    if not isinstance(hooks, list) or not hooks:
        raise _Bad("'hooks' must be a non-empty list")
    parsed = tuple(_hook(h, i) for i, h in enumerate(hooks))
    ids = [h.id for h in parsed]
    duplicate = next((i for i in ids if ids.count(i) > 1), None)
    if duplicate is not None:
        raise _Bad(f"hook id {duplicate!r} is used twice: ids are unique within an action")
    return Action(name, events, parsed, _text(data.get("description"), "description"))


def _branches(event: str, spec: Any) -> tuple[str, ...]:
    if spec is None:
        return ()
    if not isinstance(spec, dict) or set(spec) - {"branches"}:
        raise _Bad(f"on.{event} takes only 'branches' (a list of globs)")
    globs = spec.get("branches") or []
    if not isinstance(globs, list) or not all(isinstance(g, str) and g for g in globs):
        raise _Bad(f"on.{event}.branches must be a list of branch globs")
    return tuple(globs)


def _hook(data: Any, index: int) -> Hook:
    where = f"hooks[{index}]"
    if not isinstance(data, dict):
        raise _Bad(f"{where} must be a mapping (id, type, properties)")
    unknown = set(data) - {"id", "type", "description", "properties", "if"}
    if unknown:
        raise _Bad(f"{where}: unknown field(s) {', '.join(sorted(map(str, unknown)))}")
    hid = _text(data.get("id"), f"{where}.id", required=True)
    if not _HOOK_ID.fullmatch(hid):
        raise _Bad(f"{where}.id {hid!r} may hold only letters, digits, '_', '.' and '-'")
    kind = _text(data.get("type"), f"{where}.type", required=True)
    if kind not in HOOK_TYPES:
        raise _Bad(f"{where}: hook type {kind!r} is not supported (types: {', '.join(HOOK_TYPES)})")
    if data.get("if") not in (None, "", "success()"):
        raise _Bad(f"{where}: 'if' conditions other than success() are not supported")
    props = data.get("properties")
    if not isinstance(props, dict):
        raise _Bad(f"{where}.properties must be a mapping")
    hook = Hook(hid, kind, _text(data.get("description"), f"{where}.description"), props)
    try:
        hook.timeout  # noqa: B018 -- validates properties.timeout
    except InvalidArgument as e:
        raise _Bad(f"{where}: {e.message}") from None
    (_webhook if kind == "webhook" else _command)(props, where)
    return hook


def _webhook(props: Mapping[str, Any], where: str) -> None:
    url = props.get("url")
    if not isinstance(url, str) or not re.match(r"https?://[^/?#\s]", url) or any(c.isspace() for c in url):
        raise _Bad(f"{where}.properties.url must be an http(s)://host... URL")
    _mapping(props.get("query_params"), f"{where}.properties.query_params", lists=True)
    _mapping(props.get("headers"), f"{where}.properties.headers")


def _command(props: Mapping[str, Any], where: str) -> None:
    cmd = props.get("command")
    ok = (isinstance(cmd, str) and cmd.strip()) or (
        isinstance(cmd, list) and cmd and all(isinstance(a, str) for a in cmd)
    )
    if not ok:
        raise _Bad(f"{where}.properties.command must be a program and its arguments (a string or list)")
    if isinstance(cmd, str):
        import shlex

        try:
            shlex.split(cmd)
        except ValueError as e:
            raise _Bad(f"{where}.properties.command: {e}") from None
    _mapping(props.get("env"), f"{where}.properties.env")


def _mapping(value: Any, what: str, lists: bool = False) -> None:
    if value is None:
        return
    scalar = (str, int, float, bool)
    good = isinstance(value, dict) and all(
        isinstance(k, str)
        and (
            isinstance(v, scalar) or (lists and isinstance(v, list) and all(isinstance(x, scalar) for x in v))
        )
        for k, v in value.items()
    )
    if not good:
        kind = "strings or lists of strings" if lists else "strings"
        raise _Bad(f"{what} must map names to {kind}")


@dataclass(frozen=True, slots=True)
class Loaded:
    """The action files at a ref: the parsed ones, and the errors of those that do not parse."""

    actions: tuple[tuple[str, Action], ...] = ()
    errors: tuple[tuple[str, str], ...] = ()


def load(lake: Lake, repo: str, ref: str) -> Loaded:
    """Every action file under :data:`PREFIX` at ``ref``: one listing, then each file read. A ref
    that does not resolve has none."""
    from lakectl.core import listing, porcelain

    try:
        infos = [i for i in listing.list_objects(lake, repo, ref, PREFIX) if i.entry is not None]
    except NotFound:
        return Loaded()
    actions, errors = [], []
    for info in infos:
        assert info.entry is not None
        key = (info.path, *info.entry.locators)  # locators are content addresses
        found = _PARSED.get(key)
        if found is None:
            data = b"".join(porcelain.read_entry(lake, info.entry))
            try:
                found = parse(data, info.path)
            except InvalidArgument as e:
                found = e.message
            if len(_PARSED) >= PARSED_CACHE:
                with suppress(KeyError, RuntimeError, StopIteration):  # another thread evicted first
                    _PARSED.pop(next(iter(_PARSED)))
            _PARSED[key] = found
        if isinstance(found, str):
            errors.append((info.path, found))
        else:
            actions.append((info.path, found))
    return Loaded(tuple(actions), tuple(errors))


PARSED_CACHE = 1024
"""Action files kept parsed, by path and content: an unchanged file is neither read nor parsed
again (YAML parsing would cost more than the commit it gates)."""
_PARSED: dict[tuple[str, ...], Action | str] = {}


def matching(loaded: Sequence[tuple[str, Action]], event_type: str, branch: str) -> list[Action]:
    """The actions that ``event_type`` on ``branch`` triggers, in path order."""
    return [a for _, a in loaded if a.matches(event_type, branch)]
