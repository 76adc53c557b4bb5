"""Action files (lakectl.core.workflow.actions): lakeFS's format parses; any other text or bytes raises
only InvalidArgument; durations and branch globs mean what lakeFS means."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakectl.core.workflow.actions import Action, Hook, parse, parse_duration
from lakectl.errors import InvalidArgument

GOOD = {
    "name": "n",
    "on": {"pre-commit": {"branches": ["main", "release-*"]}, "post-create-tag": None},
    "hooks": [{"id": "a", "type": "webhook", "properties": {"url": "http://h/x", "timeout": "10s"}}],
}

_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=8)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


@given(st.binary(max_size=300) | st.text(max_size=300))
@settings(max_examples=300, deadline=None)
def test_any_text_parses_or_raises_invalid_argument(text: bytes | str) -> None:
    try:
        assert isinstance(parse(text, "_lakefs_actions/x.yaml"), Action)
    except InvalidArgument as e:
        assert e.message.startswith("_lakefs_actions/x.yaml: ")


@given(_json)
@settings(max_examples=300, deadline=None)
def test_any_document_parses_or_raises_invalid_argument(doc: object) -> None:
    mixed = {**GOOD, "hooks": [doc]} if isinstance(doc, dict) else doc
    for candidate in (doc, mixed, {**GOOD, "on": doc}):
        with contextlib.suppress(InvalidArgument):
            parse(json.dumps(candidate), "f.yaml")


def test_the_lakefs_format() -> None:
    action = parse(json.dumps(GOOD), "_lakefs_actions/x.yaml")
    assert action.name == "n" and action.hooks[0].timeout == 10.0
    assert action.matches("pre-commit", "release-7") and not action.matches("pre-commit", "dev")
    assert action.matches("post-create-tag", "") and not action.matches("pre-merge", "main")
    unnamed = parse(
        "on:\n  pre-merge:\nhooks:\n  - {id: c, type: command, properties: {command: x}}\n", "p/a.yaml"
    )
    assert unnamed.name == "a.yaml" and unnamed.matches("pre-merge", "anything")  # `on:` is YAML's true


@pytest.mark.parametrize(
    "text,seconds",
    [("1m30s", 90.0), ("500ms", 0.5), ("2h", 7200.0), ("1.5s", 1.5), ("10us", 1e-5)],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert Hook("h", "webhook", properties={"timeout": text}).timeout == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "10", "s", "1m x", "-1s", "0s", "1d"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(InvalidArgument):
        parse_duration(text)


def test_run_records_round_trip() -> None:
    from lakectl.core.workflow.actionruns import ActionRun, HookRun

    run = ActionRun(
        "e7", "main", "2026-01-01T00:00:00Z", "2026-01-01T00:00:01Z", "pre-commit", "failed", "c1"
    )
    hook = HookRun("0000_0001", "gate", "h", "2026-01-01T00:00:00Z", "", "completed")
    assert ActionRun.from_dict(json.loads(json.dumps(run.to_dict()))) == run
    assert HookRun.from_dict(json.loads(json.dumps(hook.to_dict()))) == hook


@pytest.mark.parametrize("url", ["http://", "ftp://h/x", "http://a b/", "http:// h"])
def test_a_webhook_needs_a_url_with_a_host(url: str) -> None:
    hook = {"id": "a", "type": "webhook", "properties": {"url": url}}
    with pytest.raises(InvalidArgument, match="must be an http"):
        parse(json.dumps({"on": {"pre-commit": None}, "hooks": [hook]}), "f.yaml")


@pytest.mark.parametrize(
    "props",
    [
        {"url": "http://127.0.0.1:9/x", "headers": {"X-Name": "bad\nvalue"}},
        {"url": "http://127.0.0.1:99999/x"},
        {"url": "http://[::1/x"},
    ],
)
def test_a_webhook_urllib_refuses_fails_its_hook(props: dict[str, object]) -> None:
    from lakectl.core.workflow import hooks

    outcome = hooks.run(Hook("a", "webhook", properties=props), {"event_type": "pre-commit"}, False, {})
    assert not outcome.passed and outcome.output


def test_a_command_string_splits_as_a_shell_would() -> None:
    hook = {"id": "a", "type": "command", "properties": {"command": "python 'unclosed"}}
    with pytest.raises(InvalidArgument, match="No closing quotation"):
        parse(json.dumps({"on": {"pre-commit": None}, "hooks": [hook]}), "f.yaml")
