"""Plain coercion of command-line values, so that running a command never imports pydantic.

typer (0.29) coerces every value that is not a flag through a pydantic ``TypeAdapter`` built
on first use; importing pydantic and building the adapters costs over 100 ms per run, about
half of the start-up budget of ``lakectl log``. lakectl's parameters are ``str``, ``int``
(with bounds), ``bool`` and lists of ``str``, but for one ``float``; :func:`install` gives each such
parameter a plain coercer before it is used. Any other parameter, or a typer without this
hook, keeps typer's own coercion: the effect is speed, never behaviour (the CLI tests run both).
"""

from __future__ import annotations

from typing import Any

from typer import BadParameter, Context

# typer's (pydantic's) wording, so that a message does not depend on which coercion ran.
_NOT_AN_INTEGER = "Input should be a valid integer, unable to parse string as an integer"
_TRUE = {"1", "true", "t", "yes", "y", "on"}
_FALSE = {"0", "false", "f", "no", "n", "off"}


class _Plain:
    """A typer ``RuntimeParam`` look-alike: ``coerce(value, param, ctx)``."""

    def __init__(self, kind: type, minimum: int | None, maximum: int | None) -> None:
        self.kind = kind
        self.minimum = minimum
        self.maximum = maximum

    def coerce(self, value: Any, param: Any, ctx: Any) -> Any:
        many = param.multiple or param.nargs == -1
        if value is None:
            return () if many else None
        if many:
            if isinstance(value, str):
                raise BadParameter("Value must be an iterable.", ctx=ctx, param=param)
            return [self._one(v, param, ctx) for v in value]
        return self._one(value, param, ctx)

    def _one(self, value: Any, param: Any, ctx: Any) -> Any:
        if self.kind is str:
            if isinstance(value, bytes):
                return value.decode("utf-8", "replace")
            return value if isinstance(value, str) else str(value)
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise BadParameter(
                "Input should be a valid boolean, unable to interpret input", ctx=ctx, param=param
            )
        try:
            number = value if isinstance(value, int) and not isinstance(value, bool) else int(str(value))
        except ValueError:
            raise BadParameter(_NOT_AN_INTEGER, ctx=ctx, param=param) from None
        if self.minimum is not None and number < self.minimum:
            raise BadParameter(
                f"Input should be greater than or equal to {self.minimum}", ctx=ctx, param=param
            )
        if self.maximum is not None and number > self.maximum:
            raise BadParameter(f"Input should be less than or equal to {self.maximum}", ctx=ctx, param=param)
        return number


def _plain_for(param: Any) -> _Plain | None:
    descriptor = getattr(param, "type_descriptor", None)
    info = getattr(descriptor, "parameter_info", None)
    if descriptor is None or info is None or getattr(info, "parser", None) is not None:
        return None
    if getattr(descriptor, "file_annotation", None) is not None:
        return None
    annotation = descriptor.annotation
    if annotation == list[str]:
        annotation = str
    elif param.multiple or param.nargs != 1:
        return None
    if annotation not in (str, int, bool):
        return None
    if getattr(info, "clamp", False):
        return None
    minimum, maximum = getattr(info, "min", None), getattr(info, "max", None)
    if (minimum is not None or maximum is not None) and annotation is not int:
        return None
    return _Plain(annotation, minimum, maximum)


def install(command: Any, help_names: list[str]) -> None:
    """Give every plain parameter of ``command`` and its sub-commands a plain coercer.

    ``help_names`` are the app's help option names: the help option is made (and cached by the
    command) here, as the parse would make it, so that it gets a plain coercer too.
    """
    params = list(getattr(command, "params", ()))
    try:
        help_option = command.get_help_option(Context(command, help_option_names=help_names))
    except (AttributeError, TypeError):
        help_option = None
    if help_option is not None:
        params.append(help_option)
    for param in params:
        if getattr(param, "_runtime_param", "missing") is None:
            plain = _plain_for(param)
            if plain is not None:
                param._runtime_param = plain
    for sub in getattr(command, "commands", {}).values():
        install(sub, help_names)
