"""Shell completion: ``lakectl completion bash|zsh|fish`` and the answers the scripts ask for.

The scripts call ``lakectl`` back with click's completion environment: ``_LAKECTL_COMPLETE``
set to ``<shell>_complete``, ``COMP_WORDS`` (the words of the command line up to the cursor)
and ``COMP_CWORD`` (the index of the word being completed). click's completion machinery then
finds the command and parameter being completed: commands and options complete from the
command tree, and every ``lakefs://`` argument from the configured lake (repositories, then
branches or tags, then object paths) through :func:`complete_uri`, which gives nothing on any
error rather than break the user's shell. The answer is one value a line; an empty answer
lets the shell complete file names. This module is imported only when completing.
"""

from __future__ import annotations

import itertools
import os
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

import typer
from typer._click.shell_completion import CompletionItem, ShellComplete, split_arg_string

from lakectl.cli import render
from lakectl.cli.common import JsonFlag
from lakectl.errors import InvalidArgument

if TYPE_CHECKING:
    from collections.abc import MutableMapping

    from typer._click import Command, Context, Parameter

PROG = "lakectl"
COMPLETE_VAR = "_LAKECTL_COMPLETE"
SCHEME = "lakefs://"
MAX_PATHS = 500
"""Object paths offered at once (a shell shows no more usefully)."""

# Scripts: they pass the words up to the cursor and print what lakectl answers. A value ending in
# "/" (a repository or ref, a directory) is not a whole word yet: no space is put after it.
BASH = r"""
%(func)s() {
    # bash splits the word at the cursor at each COMP_WORDBREAKS character (':' and '=' among
    # them: lakefs://lake/main/data/day=01/): glue back the pieces no blank separates, ask lakectl
    # about the whole word, and give bash back only what it replaces: the text after the last
    # break before the cursor ($2, empty right after one).
    local IFS=$'\n' line="${COMP_LINE:0:COMP_POINT}" words=() i piece rest prefix reply value
    for ((i = 0; i <= COMP_CWORD; i++)); do
        rest="${line#"${line%%%%[![:blank:]]*}"}"
        piece="${COMP_WORDS[i]}"
        ((i == COMP_CWORD)) && piece="$rest"
        if ((i > 0)) && [[ $rest == "$line" ]]; then
            words[${#words[@]}-1]+="$piece"
        else
            words+=("$piece")
        fi
        line="${rest:${#piece}}"
    done
    prefix="${words[${#words[@]}-1]#[\"\']}"  # in a quoted word, $2 starts after the quote
    prefix="${prefix%%"$2"}"
    reply=$(env COMP_WORDS="${words[*]}" COMP_CWORD=$((${#words[@]} - 1)) \
        %(var)s=bash_complete "$1" 2>/dev/null)
    COMPREPLY=()
    for value in $reply; do
        [[ $value == "$prefix"* ]] || continue
        COMPREPLY+=("${value#"$prefix"}")
        [[ $value == */ ]] && compopt -o nospace 2>/dev/null
    done
    return 0
}
complete -o default -F %(func)s %(prog)s
"""

ZSH = r"""
#compdef %(prog)s

%(func)s() {
    local IFS=$'\n'
    local -a reply whole partial
    reply=( $(env COMP_WORDS="${words[1,CURRENT]}" COMP_CWORD=$((CURRENT - 1)) \
        %(var)s=zsh_complete %(prog)s 2>/dev/null) )
    if (( ${#reply} == 0 )); then
        _files
        return
    fi
    for value in $reply; do
        if [[ $value == */ ]]; then partial+=("$value"); else whole+=("$value"); fi
    done
    (( ${#whole} )) && compadd -Q -- $whole
    (( ${#partial} )) && compadd -Q -S '' -- $partial
}

# Loaded from $fpath, this file is the body of _%(prog)s, run at every Tab (loadautofunc the
# first time, shfunc after); sourced, it registers the function.
if [[ $zsh_eval_context[-1] == (loadautofunc|shfunc) ]]; then
    %(func)s "$@"
else
    compdef %(func)s %(prog)s
fi
"""

FISH = r"""
function %(func)s
    # the words before the cursor (quoted again for the command line) and the one being typed
    set -l done (string escape -- (commandline -opc))
    set -l current (commandline -ct)
    set -l reply (env COMP_WORDS="$done $current" COMP_CWORD=(count $done) \
        %(var)s=fish_complete %(prog)s 2>/dev/null)
    if test (count $reply) -eq 0
        __fish_complete_path "$current"
    else
        printf '%%s\n' $reply
    end
end
complete --no-files --command %(prog)s --arguments '(%(func)s)'
"""


class _Shell(ShellComplete):
    """click's completion protocol for one shell: COMP_WORDS and COMP_CWORD in, values out."""

    name: ClassVar[str]
    template: ClassVar[str]

    def source_vars(self) -> dict[str, Any]:
        return {"func": self.func_name, "var": self.complete_var, "prog": self.prog_name}

    def source(self) -> str:
        return (self.template % self.source_vars()).strip() + "\n"

    def get_completion_args(self) -> tuple[list[str], str]:
        words = split_arg_string(os.environ.get("COMP_WORDS", ""))
        try:
            index = int(os.environ.get("COMP_CWORD", ""))
        except ValueError:
            index = len(words)
        args = words[1:index]
        incomplete = words[index] if 0 <= index < len(words) else ""
        return args, incomplete

    def format_completion(self, item: CompletionItem) -> str:
        return str(item.value)


class Bash(_Shell):
    name = "bash"
    template = BASH


class Zsh(_Shell):
    name = "zsh"
    template = ZSH


class Fish(_Shell):
    name = "fish"
    template = FISH


SHELLS: dict[str, type[_Shell]] = {cls.name: cls for cls in (Bash, Zsh, Fish)}


def shell_complete(cli: Command, ctx_args: MutableMapping[str, Any], instruction: str) -> int:
    """Answer one completion request (``<shell>_complete``, or ``<shell>_source`` for the script,
    click's instruction order); the process's exit code."""
    shell, _, action = instruction.partition("_")
    cls = SHELLS.get(shell)
    if cls is None or action not in ("complete", "source"):
        return 1
    comp = cls(cli, ctx_args, PROG, COMPLETE_VAR)
    try:
        text = comp.source() if action == "source" else comp.complete()
    except Exception:  # a completion must never print a traceback into the user's shell
        return 1
    if text:
        typer.echo(text.rstrip("\n"))
    return 0


# -- lakefs:// arguments --------------------------------------------------------------------


def complete_uri(ctx: Context, param: Parameter, incomplete: str) -> list[CompletionItem]:
    """Repositories, refs and paths for a ``lakefs://`` argument; the shape it takes is the one its
    help names (``lakefs://<repository>/<branch>/<path>``). Nothing on any error."""
    if not (incomplete.startswith(SCHEME) or SCHEME.startswith(incomplete)):
        return []
    shape = getattr(param, "help", None) or ""
    try:
        return [CompletionItem(v) for v in _uris(ctx, shape, incomplete[len(SCHEME) :])]
    except Exception:  # an unreachable server, a broken configuration, a lake not there yet
        return []


def _uris(ctx: Context, shape: str, rest: str) -> list[str]:
    from lakectl import config
    from lakectl.client import get_backend

    root = ctx.find_root()
    chosen = root.params.get("config_file")
    if chosen:
        config.use(chosen)
    try:
        config.require()
        from lakectl.client import server_settings

        if server_settings() is None and not _embedded_lake_exists():
            return []  # a TAB never creates a lake
        lake = get_backend()
    except BaseException:
        config.use(None)
        raise
    try:
        shape = shape.split()[0] if shape else ""
        refs = [kind for kind in ("<ref>", "<branch>", "<tag>") if kind in shape]
        paths = "<path>" in shape or "<prefix>" in shape
        repo, slash, after = rest.partition("/")
        if not slash:
            names = [r.name for r in lake.list_repos() if r.name.startswith(repo)]
            return [f"{SCHEME}{name}{'/' if refs else ''}" for name in names]
        if not refs:
            return []
        ref, slash, path = after.partition("/")
        if not slash:
            ref_names: list[str] = []  # branch and tag names alike
            if "<ref>" in refs or "<branch>" in refs:
                ref_names += [b.name for b in lake.list_branches(repo)]
            if "<ref>" in refs or "<tag>" in refs:
                ref_names += [t.name for t in lake.list_tags(repo)]
            base = f"{SCHEME}{repo}/"
            return [f"{base}{name}{'/' if paths else ''}" for name in ref_names if name.startswith(ref)]
        if not paths:
            return []
        found = itertools.islice(lake.list_objects(repo, ref, prefix=path, delimiter="/"), MAX_PATHS)
        return [f"{SCHEME}{repo}/{ref}/{o.path}" for o in found]
    finally:
        lake.close()
        if chosen:
            config.use(None)


# -- the command ----------------------------------------------------------------------------


def _embedded_lake_exists() -> bool:
    import os

    from lakectl.core.lake import default_home

    return os.path.exists(os.path.join(default_home(), "lake.db"))


def _shells(incomplete: str) -> list[str]:
    return [name for name in SHELLS if name.startswith(incomplete)]


def completion(
    ctx: typer.Context,
    shell: Annotated[
        str,
        typer.Argument(
            metavar="SHELL", help="bash, zsh or fish.", show_default=False, autocompletion=_shells
        ),
    ],
    json_: JsonFlag = False,
) -> None:
    """Print a shell completion script (bash, zsh or fish).

    It completes commands, options, and the repositories, branches, tags and object paths of
    lakefs:// arguments, asking the configured lake. To load it:

    bash: source <(lakectl completion bash), or save it as
    /etc/bash_completion.d/lakectl (~/.local/share/bash-completion/completions/lakectl).

    zsh: lakectl completion zsh > "${fpath[1]}/_lakectl" (with compinit in ~/.zshrc).

    fish: lakectl completion fish > ~/.config/fish/completions/lakectl.fish
    """
    cls = SHELLS.get(shell)
    if cls is None:
        raise InvalidArgument(f"unsupported shell {shell[:40]!r}: expected one of {', '.join(SHELLS)}")
    script = cls(ctx.find_root().command, {}, PROG, COMPLETE_VAR).source()
    if json_:
        render.print_json({"shell": shell, "script": script})
    else:
        typer.echo(script, nl=False)
